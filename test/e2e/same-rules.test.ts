// One rule, one message, on every surface: the same bad configurations go to `unhalt run`
// (a real child process), to the service's API (host mode's WebSocket) and to the wizard in
// Chromium (typed and clicked as a person does), and each surface refuses each one with the very
// same words. The rules live once (electron/vmm/config/rules.ts, vm-config.ts, knob-syntax.ts,
// vmm/boot/boot-file-checks.ts); this test is what keeps the surfaces from drifting apart again.
// It starts no VM, so it runs on every host, with KVM or without (test/support/e2e-files.ts).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { copyFileSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Page } from 'playwright-core';
import { runCli } from '../support/cli.ts';
import { apiClient, type ApiClient } from '../support/serve-child.ts';
import { ROOT, artifact, typeInto, useApp, waitFor } from './support.ts';
import { scaled } from '../support/time-scale.ts';

/** Type, then Tab out of the field, so its blur-time check runs. */
const LEAVE = { leave: true, delay: 20 };

interface BadConfig {
  what: string;
  cli: string[];
  api: Record<string, unknown>;
  /** Drives the wizard (already open on its first step) to the point where the rule fires. */
  wizard: (page: Page) => Promise<void>;
  /** The message every surface must give, as a pattern (the test also requires them equal). */
  message: RegExp;
}

async function next(page: Page, times = 1): Promise<void> {
  for (let i = 0; i < times; i++) {
    const before = await page.locator('form.step-panel').getAttribute('data-step');
    await page.locator('button[data-action="next"]').click();
    await waitFor(`the step after ${before}`, async () => (await page.locator('form.step-panel').getAttribute('data-step')) !== before, 10_000);
  }
}

describe('the same bad configuration gets the same message on the CLI, the API and the wizard', () => {
  let api: ApiClient | undefined;
  let notAKernel = '';
  let ownKernel = '';

  const app = useApp({
    width: 1440, height: 1200,
    prepare: async (home) => {
      // Inside UNHALT_HOME, which the service always allows: the refusal is about the file's kind.
      mkdirSync(join(home, 'kernels'), { recursive: true });
      notAKernel = join(home, 'kernels', 'notes.txt');
      writeFileSync(notAKernel, 'this is not a kernel, just a text file\n');
      // A real kernel (the probe's PVH ELF) as a user's own: guest-side polling needs a guest with a kernel command line.
      ownKernel = join(home, 'kernels', 'own.elf');
      copyFileSync(join(ROOT, 'assets/guests/probe.elf'), ownKernel);
    },
  });

  beforeAll(async () => {
    api = await apiClient(new URL(app.url));
  }, scaled(60_000));

  afterAll(() => {
    api?.close();
  });

  const cases: BadConfig[] = [
    {
      what: 'more vCPUs than a VM may have',
      cli: ['--cpus', '300'],
      api: { cpus: 300 },
      wizard: async (page) => { await next(page); await typeInto(page, 'vCPUs', '300', LEAVE); },
      message: /^cpus must be between 1 and 254, got 300$/,
    },
    {
      what: 'an emptied vCPU field',
      cli: ['--cpus', ''],
      api: { cpus: '' },
      wizard: async (page) => { await next(page); await typeInto(page, 'vCPUs', '', LEAVE); },
      message: /^cpus is empty: give a whole number from 1 to 254$/,
    },
    {
      what: 'less memory than a VM needs',
      cli: ['--memory', '8'],
      api: { memoryMiB: 8 },
      wizard: async (page) => { await next(page); await typeInto(page, 'Memory (MiB)', '8', LEAVE); },
      message: /^memory \(MiB\) must be between 16 and 1048576, got 8$/,
    },
    {
      what: 'more memory than the host has',
      cli: ['--memory', '999999'],
      api: { memoryMiB: 999999 },
      wizard: async (page) => { await next(page); await typeInto(page, 'Memory (MiB)', '999999', LEAVE); },
      message: /^memory 999999 MiB is more than this host has \(\d+ MiB\)$/,
    },
    {
      what: 'a pinned host CPU that does not exist',
      cli: ['--pin', '99'],
      api: { pin: [99] },
      wizard: async (page) => { await next(page, 7); await typeInto(page, 'Or type a list', '99', LEAVE); },
      message: /^pin: host CPU 99 does not exist or is not available to Unhalt \(available: [\d,-]+\)$/,
    },
    {
      what: 'a halt-poll time above the limit',
      cli: ['--halt-poll-ns', '2000000000'],
      api: { haltPollNs: 2_000_000_000 },
      wizard: async (page) => {
        await next(page, 6);
        await page.getByRole('radio', { name: /This VM's own maximum/ }).click();
        await typeInto(page, 'Maximum poll time (ns)', '2000000000', LEAVE);
      },
      message: /^halt-poll-ns must be between 0 and 1000000000, got 2000000000$/,
    },
    {
      what: 'a guest-side poll time above the limit',
      cli: ['--guest', 'custom', '--kernel', '<ownKernel>', '--guest-halt-poll-ns', '2000000000'],
      api: { guest: 'custom', kernel: '<ownKernel>', guestHaltPollNs: 2_000_000_000 },
      wizard: async (page) => {
        await page.getByRole('radio', { name: /Own kernel/ }).click();
        await typeInto(page, 'Kernel', ownKernel, LEAVE);
        await next(page, 6);
        await page.getByRole('switch', { name: /The guest polls before it halts/ }).click();
        await typeInto(page, 'Guest\'s maximum poll time (ns)', '2000000000', LEAVE);
      },
      message: /^guest-halt-poll-ns must be between 0 and 1000000000, got 2000000000$/,
    },
    {
      what: 'kvm-pv-unhalt=on together with cpu-pm=on',
      cli: ['--cpu', 'host,kvm-pv-unhalt=on', '--overcommit', 'cpu-pm=on'],
      api: { cpuFeatures: { 'kvm-pv-unhalt': true }, cpuPm: true },
      wizard: async (page) => {
        await next(page, 5);
        await page.getByRole('switch', { name: /^cpu-pm/ }).click();
        await page.getByRole('button', { name: 'Back' }).click();
        // cpu-pm=on turned the default pv-unhalt off; switching it on is the contradiction.
        const pv = page.getByRole('switch', { name: /^kvm-pv-unhalt/ });
        expect(await pv.isChecked()).toBe(false);
        await pv.click();
      },
      message: /^kvm-pv-unhalt=on contradicts cpu-pm=on: .*turn one of them off$/,
    },
    {
      what: 'an own kernel that is not a kernel',
      cli: ['--guest', 'custom', '--kernel', '<notAKernel>'],
      api: { guest: 'custom', kernel: '<notAKernel>' },
      wizard: async (page) => {
        await page.getByRole('radio', { name: /Own kernel/ }).click();
        await typeInto(page, 'Kernel', notAKernel, LEAVE);
      },
      message: /^kernel \/.*\/kernels\/notes\.txt is neither a PVH ELF, a Linux bzImage nor a multiboot kernel$/,
    },
  ];

  const withFile = <T,>(v: T): T => JSON.parse(JSON.stringify(v).replaceAll('<notAKernel>', notAKernel).replaceAll('<ownKernel>', ownKernel)) as T;

  for (const c of cases) {
    it(c.what, async () => {
      // 1. The command line (a dry run: nothing would start anyway).
      const cli = await runCli(['run', ...withFile(c.cli), '--dry-run'], { env: { UNHALT_HOME: app.home } });
      expect(cli.code, cli.stderr).toBe(1);
      const cliMessage = cli.stderr.trim().split('\n').at(-1)!.replace(/^unhalt: /, '');

      // 2. The API: createVm refuses what a start would refuse.
      const reply = await api!.call('createVm', { name: 'same-rules', ...withFile(c.api) });
      expect('error' in reply, JSON.stringify(reply)).toBe(true);
      const apiMessage = (reply as { error: { message: string } }).error.message;

      // 3. The wizard, at the field.
      const { page } = app;
      await app.goto();
      await page.getByRole('button', { name: 'New VM', exact: true }).click();
      await page.getByRole('heading', { name: 'New virtual machine' }).waitFor();
      await c.wizard(page);
      const field = page.locator('.field-error').first();
      await field.waitFor({ timeout: 10_000 });
      const wizardMessage = (await field.textContent())!.trim();
      await page.screenshot({ path: artifact(`same-rules/${c.what.replace(/[^a-z0-9]+/gi, '-')}.png`), fullPage: true });

      expect(cliMessage).toMatch(c.message);
      expect(apiMessage).toBe(cliMessage);
      expect(wizardMessage).toBe(cliMessage);
    }, 60_000);
  }

  it('a relative kernel path: the CLI resolves it against its working directory; the API and the wizard ask for the full path in the same words', async () => {
    const cli = await runCli(['run', '--guest', 'custom', '--kernel', './assets/guests/probe.elf', '--dry-run'], { cwd: ROOT, env: { UNHALT_HOME: app.home } });
    expect(cli.code, cli.stderr).toBe(0);
    expect(cli.stdout).toContain(join(ROOT, 'assets/guests/probe.elf'));

    const reply = await api!.call('createVm', { name: 'rel', guest: 'custom', kernel: './kernel' });
    const apiMessage = (reply as { error: { message: string } }).error.message;
    expect(apiMessage).toBe('kernel must be an absolute path (its full path on the host, starting with /), got "./kernel"');

    const { page } = app;
    await app.goto();
    await page.getByRole('button', { name: 'New VM', exact: true }).click();
    await page.getByRole('radio', { name: /Own kernel/ }).click();
    await typeInto(page, 'Kernel', './kernel', LEAVE);
    const field = page.locator('.field-error').first();
    await field.waitFor({ timeout: 10_000 });
    expect((await field.textContent())!.trim()).toBe(apiMessage);
    expect(app.errors.filter((e) => !/favicon|WebSocket/.test(e))).toEqual([]);
  }, scaled(60_000));
});

// The wizard where KVM cannot be opened (UNHALT_KVM_DEVICE names no device, so every host behaves
// like one without /dev/kvm; no VM is started): a library of configurations needs no KVM.
// - the wizard creates a VM, the summary shows its command line and a warning naming what this
//   host lacks, and the VM is in the library after a reload; Edit saves a change;
// - the KVM problem is said once, not per paravirt feature nor under every step;
// - the vCPU limit's hint, its error and what is accepted name one number;
// - the probe's memory is one number in the hint, the wizard's default and a one-click VM.
// Typed and clicked as a person does; screenshots go to test/artifacts/no-kvm/.
import { describe, expect, it } from 'vitest';
import type { Page } from 'playwright-core';
import { artifact, typeInto, useApp, waitFor } from './support.ts';

const NO_KVM = { UNHALT_KVM_DEVICE: '/nonexistent/kvm' };
const LEAVE = { leave: true, delay: 20 };
const CAUSE = 'KVM is not usable on this host';

const step = (page: Page) => page.locator('form.step-panel').getAttribute('data-step');
const shot = (name: string) => artifact(`no-kvm/${name}.png`);

async function next(page: Page, times = 1): Promise<void> {
  for (let i = 0; i < times; i++) {
    const before = await step(page);
    await page.locator('button[data-action="next"]').click();
    await waitFor(`the step after ${before}`, async () => (await step(page)) !== before, 10_000);
  }
}

/** How often the KVM problem is written on the page as a reader sees it. */
async function causeCount(page: Page): Promise<number> {
  return (await page.locator('body').innerText()).split(CAUSE).length - 1;
}

async function openWizard(page: Page): Promise<void> {
  await page.getByRole('button', { name: 'New VM', exact: true }).click();
  await page.getByRole('heading', { name: 'New virtual machine' }).waitFor();
}

/** The message under the field labelled `label` (its aria-describedby error), or ''. */
async function fieldError(page: Page, label: string): Promise<string> {
  const input = page.getByLabel(label, { exact: true });
  if ((await input.getAttribute('aria-invalid')) !== 'true') return '';
  for (const id of ((await input.getAttribute('aria-describedby')) ?? '').split(' ')) {
    const el = page.locator(`[id="${id}"].field-error`);
    if (await el.count()) return (await el.textContent())!.trim();
  }
  return '';
}

describe('without KVM, the wizard keeps a library of configurations', () => {
  const app = useApp({ env: NO_KVM, width: 1440, height: 1200 });

  it('creates a VM: every step says the KVM problem at most once, the summary shows the command line and what waits for KVM', async () => {
    const page = await app.goto();
    await page.getByTestId('kvm-notice').waitFor();
    await openWizard(page);
    await typeInto(page, 'Name', 'plan-a', LEAVE);
    for (;;) {
      // The notice at the top, and nothing else: no per-field repetition, no line under the step.
      expect(await causeCount(page), `step ${await step(page)}`).toBe(1);
      expect(await page.locator('.check-line.bad').count()).toBe(0);
      if ((await step(page)) === 'features') {
        // Each paravirt feature can be chosen (a start judges what this host offers); none repeats the problem.
        await expect(page.locator('.toggle-list .unavailable').count()).resolves.toBeLessThanOrEqual(1); // kvm-msi-ext-dest-id: never offered
        const steal = page.getByRole('switch', { name: /^kvm-steal-time/ });
        expect(await steal.isDisabled()).toBe(false);
        await steal.click();
        await page.screenshot({ path: shot('wizard-features'), fullPage: true });
      }
      if ((await step(page)) === 'summary') break;
      await next(page);
    }
    const cmd = page.getByTestId('cmdline');
    await cmd.waitFor({ timeout: 15_000 });
    const summaryCmd = (await cmd.textContent())!;
    expect(summaryCmd).toMatch(/--name plan-a .*--cpu host,kvm-steal-time=off/);
    const judged = page.getByTestId('judged-at-start');
    expect(await judged.textContent()).toMatch(/^⚠ This host lacks a usable KVM: .*not started here; .*checked when it starts: 2 vCPUs against KVM's vCPU limit, the paravirt features on \(/);
    expect(await causeCount(page)).toBe(1);
    await page.screenshot({ path: shot('wizard-summary'), fullPage: true });
    const create = page.locator('button[data-action="create"]');
    expect(await create.isEnabled()).toBe(true);
    await create.click();
    await page.getByRole('heading', { name: 'plan-a', level: 1 }).waitFor();

    // The VM page shows the same command line as the summary, not the KVM problem in its place.
    const vmCmd = page.getByTestId('vm-cmdline');
    await vmCmd.waitFor({ timeout: 15_000 });
    expect(await vmCmd.textContent()).toBe(summaryCmd);
    expect(await causeCount(page)).toBe(1);

    // Kept in the library: after a reload too.
    await page.reload();
    await page.getByRole('button', { name: 'Library', exact: true }).click();
    const card = page.locator('li.vm-card', { has: page.getByRole('button', { name: 'plan-a', exact: true }) });
    await card.waitFor();
    expect(await card.locator('[data-knob="vCPUs"] dd').textContent()).toBe('2');
    await page.screenshot({ path: shot('library-after-reload'), fullPage: true });
  }, 120_000);

  it('Edit saves a change without KVM', async () => {
    const { page } = app;
    await page.getByRole('button', { name: 'plan-a', exact: true }).click();
    await page.locator('button[data-action="edit"]').click();
    await page.getByRole('heading', { name: 'Edit plan-a' }).waitFor();
    await next(page);
    await typeInto(page, 'Memory (MiB)', '256', LEAVE);
    while ((await step(page)) !== 'summary') await next(page);
    await waitFor('the edited command line', async () => /--memory 256 /.test(await page.getByTestId('cmdline').textContent() ?? ''), 15_000);
    const save = page.locator('button[data-action="save"]');
    expect(await save.isEnabled()).toBe(true);
    await save.click();
    await page.getByRole('heading', { name: 'plan-a', level: 1 }).waitFor();
    await waitFor('the saved memory on the VM page', async () => (await page.locator('section.vm-view [data-knob="memory"] dd').textContent()) === '256 MiB', 10_000);
    await waitFor('the saved command line', async () => /--memory 256 /.test(await page.getByTestId('vm-cmdline').textContent() ?? ''), 15_000);
  }, 90_000);

  it('the vCPU limit: the hint, the error and what is accepted name one number', async () => {
    const page = await app.goto();
    await openWizard(page);
    await typeInto(page, 'Name', 'many-cpus', LEAVE);
    await next(page);
    const hint = await page.locator('p.hint', { hasText: 'This host has' }).textContent();
    const limit = Number(/up to (\d+) vCPUs/.exec(hint ?? '')?.[1]);
    expect(limit, hint ?? '').toBe(254);
    expect(hint).toMatch(/KVM cannot be asked here, so its own limit is checked at start/);

    await typeInto(page, 'vCPUs', String(limit + 1), LEAVE);
    expect(await fieldError(page, 'vCPUs')).toBe(`cpus must be between 1 and ${limit}, got ${limit + 1}`);
    await page.locator('button[data-action="next"]').click();
    await page.waitForTimeout(300);
    expect(await step(page)).toBe('resources');
    await page.screenshot({ path: shot('vcpu-limit-refused'), fullPage: true });

    await typeInto(page, 'vCPUs', String(limit), LEAVE);
    expect(await fieldError(page, 'vCPUs')).toBe('');
    while ((await step(page)) !== 'summary') await next(page);
    await waitFor('the command line', async () => new RegExp(`--cpus ${limit} `).test(await page.getByTestId('cmdline').textContent() ?? ''), 15_000);
    expect(await page.getByTestId('judged-at-start').textContent()).toContain(`${limit} vCPUs against KVM's vCPU limit`);
    expect(await page.locator('button[data-action="create"]').isEnabled()).toBe(true);
  }, 90_000);

  it('the probe\'s memory is one number: the hint, the wizard\'s default and a one-click VM', async () => {
    const page = await app.goto();
    await openWizard(page);
    await next(page);
    const hint = await page.locator('p.hint', { hasText: 'Host memory' }).textContent();
    const probeMiB = /the probe guest (\d+) MiB/.exec(hint ?? '')?.[1];
    expect(probeMiB, hint ?? '').toBeDefined();
    expect(await page.getByLabel('Memory (MiB)', { exact: true }).inputValue()).toBe(probeMiB);

    await page.getByRole('button', { name: 'Library', exact: true }).click();
    await page.getByRole('button', { name: 'Create a probe VM' }).click();
    await page.locator('section.vm-view').waitFor();
    expect(await page.locator('section.vm-view [data-knob="memory"] dd').textContent()).toBe(`${probeMiB} MiB`);
  }, 60_000);
});

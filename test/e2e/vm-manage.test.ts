// End to end, in headless Chromium against host mode, what virt-manager and Cockpit users expect
// of a VM page: its whole configuration and the `unhalt run` command line (run here: the probe
// guest boots with it), editing a stopped VM in the wizard (every step, the name too), a running
// VM's settings refused with the reason while its name still changes, reset and force stop behind
// a confirmation, per-vCPU host CPU and run-queue wait charts, the library as a sortable table,
// and an old tab that finds `unhalt serve` again after it restarts on the same port.
// Typed and clicked as a person does; screenshots in test/artifacts/vm-manage/.
import { beforeAll, describe, expect, it } from 'vitest';
import { existsSync } from 'node:fs';
import type { Page } from 'playwright-core';
import { runCli } from '../support/cli.ts';
import { SERVER_GONE, artifact, hook, launchBrowser, skipReason, typeInto, useApp, waitFor } from './support.ts';
import { scaled } from '../support/time-scale.ts';

const reason = skipReason();
if (reason) console.warn(`[e2e] skipped: ${reason}`);

const shot = (name: string) => artifact(`vm-manage/${name}.png`);

/** Words of a POSIX shell command line as commandLine() quotes them (plain words and '…' with '\'' inside). */
function shellWords(line: string): string[] {
  const words: string[] = [];
  let word = '';
  let inWord = false;
  for (let i = 0; i < line.length; i++) {
    const ch = line[i]!;
    if (ch === "'") {
      const end = line.indexOf("'", i + 1);
      if (end < 0) throw new Error(`unbalanced quote in ${line}`);
      word += line.slice(i + 1, end);
      i = end;
      inWord = true;
    } else if (ch === '\\') {
      word += line[++i] ?? '';
      inWord = true;
    } else if (ch === ' ') {
      if (inWord) words.push(word);
      word = '';
      inWord = false;
    } else {
      word += ch;
      inWord = true;
    }
  }
  if (inWord) words.push(word);
  return words;
}

const state = (page: Page) => page.getByTestId('vm-state').first().textContent();

describe.skipIf(reason !== null)('managing VMs in the app', () => {
  let vmId = '';
  let port = 0;

  const app = useApp({ width: 1440, height: 1300 });

  beforeAll(async () => {
    port = Number(new URL(app.url).port);
  }, scaled(60_000));

  it('shows a VM\'s whole configuration and a command line that boots the same guest', async () => {
    const { page } = app;
    await app.goto();
    await page.getByRole('button', { name: 'Create a probe VM' }).click();
    await page.locator('section.vm-view').waitFor();
    vmId = (await page.locator('section.vm-view').getAttribute('data-vm-id'))!;
    const panel = page.getByTestId('config-panel');
    await panel.waitFor();
    // The features come with the service's resolution of the saved configuration (describeConfig).
    const text = await waitFor('the resolved features', async () => {
      const t = (await panel.textContent()) ?? '';
      return /on: .*kvm-pv-unhalt/.test(t) ? t : undefined;
    }, 15_000);
    for (const label of ['Name', 'Guest', 'Kernel command line', 'vCPUs', 'Memory', 'Machine type', 'Paravirt features', 'cpu-pm', 'mem-lock',
      'Halt polling', 'Pinning', 'Created', 'Last started']) expect(text).toContain(label);
    const cmd = await waitFor('the command line', async () => (await page.getByTestId('vm-cmdline').textContent()) ?? '', 15_000);
    expect(cmd).toMatch(/^unhalt run --guest probe .*--cpus 2/);
    await panel.scrollIntoViewIfNeeded();
    await page.screenshot({ path: shot('config-panel'), fullPage: true });

    // The command line, as shown, run on its own: the probe guest boots, prompts and powers off.
    const [unhalt, run, ...args] = shellWords(cmd);
    expect([unhalt, run]).toEqual(['unhalt', 'run']);
    const r = await runCli([run!, ...args], { inputAfter: 'probe> ', input: 'poweroff\r' });
    expect(r.stdout, r.stderr).toContain('Unhalt probe guest: 2 of 2 CPUs up');
    expect(r.stdout).toContain('probe> ');
    expect(r.code, r.stderr).toBe(0);
  });

  it('edits the stopped VM in the wizard, every step, and the saved command line boots', async () => {
    const { page } = app;
    await page.locator('button[data-action="edit"]').click();
    await page.getByRole('heading', { name: 'Edit probe', level: 1 }).waitFor();
    // Every step starts from the saved configuration.
    await typeInto(page, page.getByLabel('Name'), 'probe-edited');
    await page.screenshot({ path: shot('edit-basics'), fullPage: true });
    await page.locator('button[data-action="next"]').click();
    await page.locator('form.step-panel[data-step="resources"]').waitFor();
    await typeInto(page, page.getByLabel('vCPUs', { exact: true }), '1');
    await page.locator('button[data-action="next"]').click();
    await page.locator('form.step-panel[data-step="storage"]').waitFor();
    await page.locator('button[data-action="next"]').click();
    await page.getByRole('radio', { name: /^unhalt-1\.0/ }).click();
    await page.locator('button[data-action="next"]').click();
    await page.getByRole('switch', { name: /^kvm-steal-time/ }).click();
    await page.locator('button[data-action="next"]').click();
    await page.getByRole('switch', { name: /^mem-lock/ }).click();
    await page.locator('button[data-action="next"]').click();
    await page.getByRole('radio', { name: /This VM's own maximum/ }).click();
    await page.getByRole('group', { name: 'Presets' }).getByRole('button', { name: '1 ms' }).click();
    await page.locator('button[data-action="next"]').click();
    await page.getByRole('checkbox', { name: 'CPU 0' }).click();
    await page.locator('button[data-action="next"]').click();
    const wanted = /--cpus 1 --memory 128 --name probe-edited --machine unhalt-1\.0 --cpu host,kvm-steal-time=off --overcommit cpu-pm=off,mem-lock=on --halt-poll-ns 1000000 --pin 0$/;
    const cmd = page.getByTestId('cmdline');
    await waitFor('the new command line', async () => wanted.test(await cmd.textContent() ?? ''), 15_000);
    await page.screenshot({ path: shot('edit-summary'), fullPage: true });
    await page.locator('button[data-action="save"]').click();
    await page.getByRole('heading', { name: 'probe-edited', level: 1 }).waitFor();
    expect(await page.locator('section.vm-view').getAttribute('data-vm-id')).toBe(vmId);
    const panel = page.getByTestId('config-panel');
    const shown = await waitFor('the saved configuration on the VM page', async () => {
      const t = await page.getByTestId('vm-cmdline').textContent() ?? '';
      return wanted.test(t) ? t : '';
    }, 15_000);
    const text = await panel.textContent();
    expect(text).toMatch(/Halt polling1 ms/);
    expect(text).toMatch(/mem-lockon/);
    expect(text).toMatch(/off: .*kvm-steal-time \(set\)/);
    const saved = await hook<{ vms: { id: string; config: Record<string, unknown> }[] }>(page, 'state');
    expect(saved.vms.find((v) => v.id === vmId)!.config).toMatchObject({
      name: 'probe-edited', cpus: 1, machine: 'unhalt-1.0', cpuFeatures: { 'kvm-steal-time': false }, memLock: true, haltPollNs: 1_000_000, pin: [0],
    });
    await panel.scrollIntoViewIfNeeded();
    await page.screenshot({ path: shot('edited-config'), fullPage: true });
    // The edited VM's command line boots the probe guest with its one vCPU.
    const [, run, ...args] = shellWords(shown);
    const r = await runCli([run!, ...args], { inputAfter: 'probe> ', input: 'poweroff\r' });
    expect(r.stdout, r.stderr).toContain('Unhalt probe guest: 1 of 1 CPUs up');
    expect(r.code, r.stderr).toBe(0);
  });

  it('refuses to edit a running VM\'s settings and says why; renames it all the same', async () => {
    const { page } = app;
    await page.locator('button[data-action="start"]').click();
    await waitFor('the VM to run', async () => (await state(page)) === 'running', 30_000);
    await waitFor('the echo shell prompt', async () => (await hook<string>(page, 'consoleText', vmId)).includes('probe>'), 30_000);
    expect(await page.getByTestId('edit-note').textContent()).toMatch(/Fixed while the VM runs/);
    await page.locator('button[data-action="edit"]').click();
    const refused = page.getByTestId('edit-refused');
    await refused.waitFor();
    expect(await refused.textContent()).toMatch(/probe-edited is running\. Its settings .* are the guest's hardware, fixed when it booted: stop the VM to edit them/);
    await page.screenshot({ path: shot('edit-refused-running'), fullPage: true });
    await page.getByRole('button', { name: 'Back to probe-edited' }).click();
    await page.locator('section.vm-view').waitFor();

    // A name the library refuses stays in the field with the reason; a good one is saved at once.
    await page.locator('button[data-action="rename"]').click();
    await page.keyboard.press('Control+A');
    await page.keyboard.type('bad/name', { delay: 10 });
    await page.keyboard.press('Enter');
    const err = page.locator('form.rename [role="alert"]');
    await err.waitFor();
    expect(await err.textContent()).toMatch(/may use letters, digits, space, dot, dash and underscore/);
    await page.screenshot({ path: shot('rename-refused'), fullPage: false });
    await page.keyboard.press('Control+A');
    await page.keyboard.type('probe-live', { delay: 10 });
    await page.keyboard.press('Enter');
    await page.getByRole('heading', { name: 'probe-live', level: 1 }).waitFor();
    expect(await state(page)).toBe('running');
  });

  it('charts host CPU and run-queue wait for each vCPU thread', async () => {
    const { page } = app;
    await page.getByTestId('console').click();
    const cpuChart = page.locator('figure[data-chart="host-cpu"]');
    const waitChart = page.locator('figure[data-chart="runqueue-wait"]');
    await cpuChart.scrollIntoViewIfNeeded();
    // Typing wakes the guest: its vCPU thread runs on the host.
    const nonZero = await waitFor('non-zero host CPU on the chart', async () => {
      const n = Number(await cpuChart.getAttribute('data-nonzero-points') ?? 0);
      if (n > 0) return n;
      await page.getByTestId('console').click();
      await page.keyboard.type('help', { delay: 20 });
      await page.keyboard.press('Enter');
      await cpuChart.scrollIntoViewIfNeeded();
      return 0;
    }, 30_000, 500);
    expect(nonZero).toBeGreaterThan(0);
    expect(await cpuChart.locator('.chart-empty').isHidden()).toBe(true);
    await waitChart.scrollIntoViewIfNeeded();
    await waitFor('points on the run-queue chart', async () => Number(await waitChart.getAttribute('data-points') ?? 0) > 0, 15_000);
    // The run-queue wait comes from schedstat: a kernel without it says so instead of drawing zeros.
    const schedstat = existsSync(`/proc/self/task/${process.pid}/schedstat`);
    await waitFor('the run-queue chart to show its data or why it has none',
      async () => (await waitChart.locator('.chart-empty').isHidden()) === schedstat, 15_000);
    if (!schedstat) expect(await waitChart.locator('.chart-empty').textContent()).toMatch(/schedstat/);
    // A few seconds of history for the screenshot.
    for (let i = 0; i < 6; i++) {
      await page.getByTestId('console').click();
      await page.keyboard.type(i % 2 ? 'cpus' : 'help', { delay: 30 });
      await page.keyboard.press('Enter');
      await page.waitForTimeout(400);
    }
    await page.locator('section.charts-panel').screenshot({ path: shot('charts-host-cpu-runqueue') });
  });

  it('resets the running VM after a confirmation: it boots again', async () => {
    const { page } = app;
    const prompts = async () => ((await hook<string>(page, 'consoleText', vmId)).match(/Unhalt probe guest:/g) ?? []).length;
    const before = await prompts();
    await page.locator('section.vm-view').scrollIntoViewIfNeeded();
    await page.locator('button[data-action="reset"]').click();
    const ask = page.locator('[data-confirm="reset"]');
    await ask.waitFor();
    expect(await ask.textContent()).toMatch(/Reset probe-live\? It stops at once and boots again/);
    await page.screenshot({ path: shot('reset-confirm'), fullPage: false });
    await page.locator('button[data-action="confirm-reset"]').click();
    await waitFor('a second boot in the console', async () => (await prompts()) > before, 30_000);
    await waitFor('the VM to run again', async () => (await state(page)) === 'running', 30_000);
    expect(await page.getByTestId('status-line').textContent()).toMatch(/reset by the user/);
  });

  it('asks before a force stop; Cancel keeps the VM running', async () => {
    const { page } = app;
    await page.locator('button[data-action="force-stop"]').click();
    const ask = page.locator('[data-confirm="force-stop"]');
    await ask.waitFor();
    expect(await ask.textContent()).toMatch(/Force stop probe-live\? Its vCPUs stop at once: the guest gets no chance to shut down/);
    await page.screenshot({ path: shot('force-stop-confirm'), fullPage: false });
    await ask.getByRole('button', { name: 'Cancel' }).click();
    await ask.waitFor({ state: 'detached' });
    // Escape backs out too, and the keyboard is back on the button it started from.
    await page.locator('button[data-action="force-stop"]').click();
    await ask.waitFor();
    await page.keyboard.press('Escape');
    await ask.waitFor({ state: 'detached' });
    expect(await page.evaluate(() => (globalThis as unknown as { document: { activeElement: { getAttribute(n: string): string | null } | null } })
      .document.activeElement?.getAttribute('data-action'))).toBe('force-stop');
    await page.waitForTimeout(500);
    expect(await state(page)).toBe('running');
    await page.locator('button[data-action="force-stop"]').click();
    await page.locator('button[data-action="confirm-force-stop"]').click();
    await waitFor('the VM to stop', async () => (await state(page)) === 'stopped', 30_000);
    expect(await page.getByTestId('status-line').textContent()).toMatch(/stopped by force/);
  });

  it('lists the library as a table sorted by any column', async () => {
    const { page } = app;
    await page.getByRole('button', { name: 'Library', exact: true }).click();
    // A second VM, never started, with 2 vCPUs (the first now has 1).
    await page.getByRole('button', { name: 'Create a probe VM' }).click();
    await page.locator('section.vm-view').waitFor();
    await page.getByRole('button', { name: 'Library', exact: true }).click();
    await page.getByRole('group', { name: 'Show the library as' }).getByRole('button', { name: 'Table' }).click();
    const table = page.getByTestId('vm-table');
    await table.waitFor();
    const names = async () => (await table.locator('tbody th').allTextContents());
    expect(await names()).toEqual(['probe', 'probe-live']);
    const header = (key: string) => table.locator(`button[data-sort="${key}"]`);
    const sortOf = (key: string) => table.locator(`th:has(button[data-sort="${key}"])`).getAttribute('aria-sort');
    await header('cpus').click();
    expect(await sortOf('cpus')).toBe('descending');
    expect(await names()).toEqual(['probe', 'probe-live']);
    await header('cpus').click();
    expect(await sortOf('cpus')).toBe('ascending');
    expect(await names()).toEqual(['probe-live', 'probe']);
    await header('lastRun').click();
    expect(await sortOf('lastRun')).toBe('descending');
    expect(await names()).toEqual(['probe-live', 'probe']);
    expect(await table.locator('tbody tr').nth(1).locator('td').last().textContent()).toBe('Start');
    expect(await table.locator('tbody tr').nth(1).textContent()).toContain('never');
    await header('name').click();
    expect(await names()).toEqual(['probe', 'probe-live']);
    await header('name').click();
    expect(await sortOf('name')).toBe('descending');
    expect(await names()).toEqual(['probe-live', 'probe']);
    await page.screenshot({ path: shot('library-table'), fullPage: true });
    // The choice and the order are kept across a reload.
    await page.reload();
    await table.waitFor();
    expect(await names()).toEqual(['probe-live', 'probe']);
  });

  it('an open tab reconnects by itself when the server restarts on the same port', async () => {
    const { page } = app;
    await page.evaluate(() => { (globalThis as unknown as { notReloaded: boolean }).notReloaded = true; });
    expect(await app.host.stop()).toBe(0);
    const banner = page.getByTestId('connection-banner');
    await banner.waitFor({ timeout: 15_000 });
    await waitFor('the reconnecting state', async () => (await banner.getAttribute('data-state')) === 'reconnecting', 15_000);
    expect(await banner.textContent()).toMatch(/reconnecting/);
    await page.screenshot({ path: shot('reconnecting'), fullPage: false });
    await app.startHost(port);
    expect(Number(new URL(app.url).port)).toBe(port);
    await banner.waitFor({ state: 'detached', timeout: 30_000 });
    expect(await page.evaluate(() => (globalThis as unknown as { notReloaded?: boolean }).notReloaded)).toBe(true);
    // The page works against the new server: a VM started from it runs.
    const row = page.locator(`[data-testid="vm-table"] tr[data-vm-id="${vmId}"]`);
    await row.getByRole('button', { name: 'Start' }).click();
    await waitFor('the VM to run under the new server', async () => (await row.getAttribute('data-state')) === 'running', 30_000);
    await page.screenshot({ path: shot('reconnected'), fullPage: false });
    await row.getByRole('button', { name: 'Stop' }).click();
    await waitFor('the VM to stop', async () => (await row.getAttribute('data-state')) === 'stopped', 30_000);
    expect(app.errors.filter((e) => !/favicon|WebSocket/.test(e) && !SERVER_GONE.test(e))).toEqual([]);
  });

  it('renders the table and the VM page in the dark theme', async () => {
    const dark = await launchBrowser({ colorScheme: 'dark', width: 1440, height: 1300 });
    try {
      await dark.page.goto(app.url);
      await dark.page.getByRole('group', { name: 'Show the library as' }).getByRole('button', { name: 'Table' }).click();
      await dark.page.getByTestId('vm-table').waitFor();
      await dark.page.screenshot({ path: shot('library-table-dark'), fullPage: true });
      // The VM that was never started says so.
      await dark.page.getByTestId('vm-table').getByRole('button', { name: 'probe', exact: true }).click();
      await dark.page.getByTestId('vm-cmdline').waitFor({ timeout: 15_000 });
      expect(await dark.page.getByTestId('status-line').textContent()).toBe('Never started.');
      await dark.page.goto(`${app.url}#/vm/${vmId}`);
      await dark.page.getByTestId('vm-cmdline').waitFor({ timeout: 15_000 });
      await dark.page.screenshot({ path: shot('vm-page-dark'), fullPage: true });
      expect(dark.errors.filter((e) => !/favicon/.test(e))).toEqual([]);
    } finally {
      await dark.close();
    }
  });
});

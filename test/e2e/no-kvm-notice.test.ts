// Where KVM cannot be opened (UNHALT_KVM_DEVICE names no device, so every host behaves like one
// without /dev/kvm; no VM is started), the app says so before any click: one notice naming the
// cause and its fix on every view (the empty library, the library, a VM page, Compare), a header
// badge that does not claim a KVM, and every button that starts VMs (a VM's Start, Compare's Run
// experiment, the advisor's Start tuning) disabled and pointing at the notice, while planning
// (typing configurations, a workload, runs) still works. A start of a VM, an experiment or a
// tune that reaches the service anyway is refused in the notice's words, and nothing is left
// running. Clone and export work.
// Typed and clicked as a person does; screenshots go to test/artifacts/no-kvm/.
import { describe, expect, it } from 'vitest';
import type { Locator, Page } from 'playwright-core';
import { artifact, hook, typeInto, useApp, waitFor } from './support.ts';

const NO_KVM = { UNHALT_KVM_DEVICE: '/nonexistent/kvm' };
const CAUSE = 'KVM is not usable on this host: UNHALT_KVM_DEVICE names /nonexistent/kvm, a path that does not exist';
const FIX = "To fix: unset UNHALT_KVM_DEVICE to use /dev/kvm, or set it to the KVM device's path";
const shot = (name: string) => artifact(`no-kvm/${name}.png`);

/** A button that starts VMs, disabled here with the pointer to the notice. */
async function blockedStart(button: Locator): Promise<void> {
  expect(await button.isDisabled()).toBe(true);
  expect(await button.getAttribute('title')).toBe('Starting a VM needs KVM, which this host lacks: see the notice at the top');
  expect(await button.getAttribute('aria-describedby')).toBe('kvm-notice');
}

/** Calls the page's API client (`__unhalt.api`) as the renderer would; the refusal's message, or 'accepted'. */
function apiCall(page: Page, method: 'startExperiment' | 'startTune', ...args: unknown[]): Promise<string> {
  return page.evaluate(async ([method, args]) => {
    const api = (globalThis as unknown as { __unhalt: { api: Record<string, (...a: unknown[]) => Promise<unknown>> } }).__unhalt.api;
    try {
      await api[method as string]!(...(args as unknown[]));
      return 'accepted';
    } catch (e) {
      return (e as Error).message;
    }
  }, [method, args] as const);
}

/** The notice is there exactly once, and the cause is written once on the page. */
async function noticeOnce(page: Page): Promise<string> {
  const notice = page.getByTestId('kvm-notice');
  await notice.waitFor();
  expect(await notice.count()).toBe(1);
  expect((await page.locator('body').innerText()).split(CAUSE).length - 1).toBe(1);
  return (await notice.textContent())!;
}

describe('without KVM, the app says so once and Start says why it cannot', () => {
  const app = useApp({ env: NO_KVM, width: 1440, height: 1000 });
  let vmId = '';

  it('the empty library shows the notice with the cause and its fix, and the badge claims no KVM', async () => {
    const page = await app.goto();
    await page.getByRole('heading', { name: 'No virtual machines yet' }).waitFor();
    const text = await noticeOnce(page);
    expect(text).toContain(CAUSE);
    expect(text).toContain(FIX);
    expect(text).toMatch(/created, edited, cloned and exported/);
    const badge = page.locator('.topbar .host-kind');
    expect(await badge.textContent()).toBe('No KVM');
    await page.screenshot({ path: shot('empty-library'), fullPage: true });
  }, 60_000);

  it('a VM page: Start is disabled and points at the notice; clone and export work', async () => {
    const { page } = app;
    await page.getByRole('button', { name: 'Create a probe VM' }).click();
    await page.locator('section.vm-view').waitFor();
    vmId = (await page.locator('section.vm-view').getAttribute('data-vm-id'))!;
    await noticeOnce(page);
    const start = page.locator('button[data-action="start"]');
    expect(await start.isDisabled()).toBe(true);
    expect(await start.getAttribute('title')).toMatch(/needs KVM, which this host lacks/);
    expect(await start.getAttribute('aria-describedby')).toBe('kvm-notice');
    expect(await page.getByTestId('start-blocked').textContent()).toMatch(/cannot start here: this host lacks KVM/);
    await page.screenshot({ path: shot('vm-page'), fullPage: true });

    await page.getByRole('button', { name: 'Export…' }).click();
    const exported = page.getByTestId('export-text');
    await exported.waitFor({ timeout: 15_000 });
    expect(await exported.textContent()).toMatch(/qemu-system-x86_64/);

    await page.getByRole('button', { name: 'Clone' }).click();
    await page.getByRole('heading', { name: 'probe-copy', level: 1 }).waitFor();
    await noticeOnce(page);
  }, 60_000);

  it('a start that reaches the service is refused with the cause and its fix, and the VM stays stopped', async () => {
    const { page } = app;
    const refusal = await page.evaluate(async (id) => {
      const h = (globalThis as unknown as { __unhalt: { api: { startVm(id: string): Promise<unknown> } } }).__unhalt;
      try {
        await h.api.startVm(id);
        return 'started';
      } catch (e) {
        return (e as Error).message;
      }
    }, vmId);
    expect(refusal).toBe(`${CAUSE}. ${FIX}`);
    const state = await hook<{ vms: { id: string; status: { state: string } }[] }>(page, 'state');
    expect(state.vms.find((v) => v.id === vmId)?.status.state).toBe('stopped');
  }, 30_000);

  it('the library: every Start is disabled, on cards and in the table; the notice is there once', async () => {
    const { page } = app;
    await page.getByRole('button', { name: 'Library', exact: true }).click();
    const cards = page.locator('li.vm-card');
    await waitFor('two cards', async () => (await cards.count()) === 2, 10_000);
    await noticeOnce(page);
    for (const card of await cards.all()) {
      const start = card.getByRole('button', { name: 'Start' });
      expect(await start.isDisabled()).toBe(true);
      expect(await start.getAttribute('title')).toMatch(/needs KVM/);
    }
    await page.screenshot({ path: shot('library-cards'), fullPage: true });
    await page.getByRole('button', { name: 'Table', exact: true }).click();
    const table = page.getByTestId('vm-table');
    await table.waitFor();
    const starts = table.getByRole('button', { name: 'Start' });
    expect(await starts.count()).toBe(2);
    for (const start of await starts.all()) expect(await start.isDisabled()).toBe(true);
    await page.getByRole('button', { name: 'Cards', exact: true }).click();
  }, 60_000);

  it('Compare shows the notice once', async () => {
    const { page } = app;
    await page.getByRole('button', { name: 'Compare', exact: true }).click();
    await page.locator('h1', { hasText: /Compare/ }).first().waitFor();
    await noticeOnce(page);
    await page.screenshot({ path: shot('compare'), fullPage: true });
    expect(app.errors.filter((e) => !/favicon|WebSocket/.test(e))).toEqual([]);
  }, 30_000);
  it('Compare: a comparison is still planned by typing, and Run experiment is disabled and points at the notice', async () => {
    const { page } = app;
    const run = page.getByRole('button', { name: 'Run experiment' });
    await run.waitFor();
    await blockedStart(run);
    await typeInto(page, 'Workload', 'ipi');
    await typeInto(page, 'Workload parameters', 'count=2000');
    await typeInto(page, 'Configuration 1 name', 'no polling');
    await typeInto(page, 'Configuration 1 config string', 'cpus=2,halt-poll-ns=0');
    await typeInto(page, 'Configuration 2 name', 'polling');
    await typeInto(page, 'Configuration 2 config string', 'cpus=2,halt-poll-ns=200000');
    await page.getByRole('button', { name: 'Add configuration' }).click();
    await typeInto(page, 'Configuration 3 config string', 'cpus=2,cpu-pm=on');
    await typeInto(page, 'Runs each', '7', { leave: true });
    const value = (label: string) => page.getByLabel(label, { exact: true }).inputValue();
    expect(await value('Workload')).toBe('ipi');
    expect(await value('Workload parameters')).toBe('count=2000');
    expect(await value('Configuration 1 name')).toBe('no polling');
    expect(await value('Configuration 2 config string')).toBe('cpus=2,halt-poll-ns=200000');
    expect(await value('Configuration 3 config string')).toBe('cpus=2,cpu-pm=on');
    expect(await value('Runs each')).toBe('7');
    // Typed configurations are still checked as they are typed.
    expect(await page.getByTestId('config-problem').count()).toBe(0);
    await typeInto(page, 'Configuration 3 config string', 'cpus=2,warp=1');
    await waitFor('the config string problem', async () => /unknown key "warp"/.test(await page.getByTestId('config-problem').textContent() ?? ''));
    await typeInto(page, 'Configuration 3 config string', 'cpus=2,cpu-pm=on');
    await waitFor('the problem to go', async () => (await page.getByTestId('config-problem').count()) === 0);
    // Enter in a field submits the form as the button would: nothing starts.
    await page.getByLabel('Runs each', { exact: true }).click();
    await page.keyboard.press('Enter');
    await blockedStart(run);
    expect(await page.getByRole('alert').count()).toBe(0);
    expect(await page.locator('.exp-list li').count()).toBe(0);
    await page.screenshot({ path: shot('compare-planned'), fullPage: true });
  }, 60_000);

  it('the advisor: Start tuning is disabled and points at the notice, while its fields take input and check it', async () => {
    const { page } = app;
    await app.goto(`#/vm/${vmId}`);
    await page.locator('section.vm-view').waitFor();
    await page.getByRole('button', { name: 'Tune…' }).click();
    const panel = page.getByRole('region', { name: 'Advisor' });
    const start = panel.getByRole('button', { name: 'Start tuning' });
    await blockedStart(start);
    // (The cause is on this page twice now: the notice, and the start refused above, kept as the VM's failed start.)
    expect(await page.getByTestId('kvm-notice').count()).toBe(1);
    expect(await page.getByTestId('start-failure').textContent()).toContain(CAUSE);
    await typeInto(page, panel.getByLabel('Workload', { exact: true }), 'warp', { leave: true });
    await panel.getByRole('alert').filter({ hasText: 'unknown probe workload "warp"; valid: ipi, timer, spinlock, pio, idle' }).waitFor();
    await typeInto(page, panel.getByLabel('Workload', { exact: true }), 'pio');
    await typeInto(page, panel.getByLabel('Budget', { exact: true }), '90s', { leave: true });
    expect(await panel.getByRole('alert').count()).toBe(0);
    expect(await panel.getByLabel('Workload', { exact: true }).inputValue()).toBe('pio');
    expect(await panel.getByLabel('Budget', { exact: true }).inputValue()).toBe('90s');
    await panel.getByLabel('Budget', { exact: true }).click();
    await page.keyboard.press('Enter');
    await blockedStart(start);
    expect(await panel.getByTestId('tune-progress').count()).toBe(0);
    await page.screenshot({ path: shot('advisor'), fullPage: true });
  }, 60_000);

  it('an experiment or a tune that reaches the service is refused at once with the notice\'s sentence, and nothing is left running', async () => {
    const { page } = app;
    const t0 = Date.now();
    const experiment = await apiCall(page, 'startExperiment', {
      guest: 'probe', workload: 'timer', runs: 5, configs: [{ name: 'a', config: 'cpus=1,halt-poll-ns=0' }, { name: 'b', config: 'cpus=1' }],
    });
    expect(experiment).toBe(`${CAUSE}. ${FIX}`);
    const tune = await apiCall(page, 'startTune', vmId, { workload: 'timer', goal: 'latency-p50', budgetS: 60 });
    expect(tune).toBe(`${CAUSE}. ${FIX}`);
    expect(Date.now() - t0).toBeLessThan(10_000);
    // A bad request is still refused in its own words.
    expect(await apiCall(page, 'startTune', vmId, { workload: 'warp', goal: 'latency-p50', budgetS: 60 }))
      .toBe('unknown probe workload "warp"; valid: ipi, timer, spinlock, pio, idle');
    const listed = await page.evaluate(() => (globalThis as unknown as { __unhalt: { api: { listExperiments(): Promise<unknown[]> } } }).__unhalt.api.listExperiments());
    expect(listed).toEqual([]);
    const state = await hook<{ vms: { id: string; status: { state: string } }[] }>(page, 'state');
    expect(state.vms.map((v) => v.status.state)).toEqual(['stopped', 'stopped']);
    await page.getByRole('button', { name: 'Compare', exact: true }).click();
    await page.locator('h1', { hasText: /Compare/ }).first().waitFor();
    expect(await page.locator('.exp-list li').count()).toBe(0);
    expect(app.errors.filter((e) => !/favicon|WebSocket/.test(e))).toEqual([]);
  }, 30_000);
});

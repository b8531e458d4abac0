// End to end, in headless Chromium against host mode: the VM page of the built-in Linux guest
// under load, as a person watches it. Started with a click; at its shell prompt the person types
// `yes | cat >/dev/null &` (two busy processes). The page starts the agent's context-switch
// probe by itself (the latency chart of a Linux guest), the guest's own idle (its cpuidle-haltpoll
// states) and steal time are drawn per vCPU as shares of time, the host-CPU chart climbs and stays
// a share of one host CPU (never above 100 %), the exit kinds add up, and the console is 80
// columns wide. Its screenshot is the README's Linux VM page. A stock Linux needs a KVM with
// hardware semantics: on a PVM host this file skips and runs in the nested lane's L1, as the
// Linux lane's files do (test/support/e2e-files.ts LINUX_E2E_FILES).
import { describe, expect, it } from 'vitest';
import { hardwareKvm, NEEDS_HARDWARE } from '../support/kvm-semantics.ts';
import { kvmAvailable } from '../support/probe.ts';
import { artifact, createVmThroughApi, hook, openAndStartVm, skipReason, useApp, waitFor } from './support.ts';

const reason = skipReason() ?? (kvmAvailable && hardwareKvm() ? null : NEEDS_HARDWARE);
if (reason) console.warn(`[e2e linux vm page] skipped: ${reason}`);

const PROMPT = 'unhalt:~# ';
const num = async (page: import('playwright-core').Page, chart: string, attr: string) =>
  Number(await page.locator(`figure[data-chart="${chart}"]`).getAttribute(attr) ?? NaN);
/** Each series' mean over the chart's window, as drawn (NaN: no value). */
const seriesMeans = async (page: import('playwright-core').Page, chart: string) =>
  (await page.locator(`figure[data-chart="${chart}"]`).getAttribute('data-series-means') ?? '').split(' ').map((v) => (v === '' ? NaN : Number(v)));

describe.skipIf(reason !== null)('a Linux VM page under load', () => {
  // Tall enough that every chart is on screen (charts out of view are not drawn) for the screenshot.
  const app = useApp({ width: 1440, height: 2200 });

  it('starts the agent\'s probe, charts two busy processes within one host CPU per vCPU, and keeps 80 columns', async () => {
    const { page } = app;
    await app.goto();
    await page.getByRole('heading', { name: 'No virtual machines yet' }).waitFor();
    // Guest-side polling (guest-halt-poll-ns forces cpuidle-haltpoll on; KVM gives no realtime
    // hint): the guest then counts its idle states.
    const vmId = await createVmThroughApi(page, { name: 'linux-load', guest: 'linux', cpus: 2, memoryMiB: 512, guestHaltPollNs: 200_000 });
    await openAndStartVm(page, vmId, 'linux-load');
    await waitFor('the shell prompt', async () => (await hook<string>(page, 'consoleText', vmId)).includes(PROMPT), 300_000, 500);

    // The page watches the VM, so the service turned the agent's probe on: samples reach the latency chart.
    await waitFor('the agent probing', async () => (await hook<{ vms: { id: string; status: { agent?: string } }[] }>(page, 'state'))
      .vms.find((v) => v.id === vmId)?.status.agent === 'probing', 120_000, 500);
    const latency = page.locator('figure[data-chart="latency"]');
    await waitFor('context-switch samples drawn', async () => Number(await latency.getAttribute('data-points') ?? 0) >= 3, 60_000, 500);
    expect((await latency.locator('.u-legend .u-series .u-label').allTextContents()).some((l) => /^ctxprobe p50/.test(l))).toBe(true);
    expect(await latency.locator('.chart-empty').isHidden()).toBe(true);

    // The same probe reads the guest's idle states: a polling and a halted share per vCPU, each
    // 0-100 %, and an idle guest at its prompt halts (by its own count too).
    const idle = page.locator('figure[data-chart="guest-idle"]');
    await waitFor('guest idle drawn for both vCPUs', async () => (await seriesMeans(page, 'guest-idle')).filter(Number.isFinite).length === 4, 60_000, 500);
    expect((await idle.locator('.u-legend .u-series .u-label').allTextContents()).slice(1))
      .toEqual(['vCPU 0 polling', 'vCPU 0 halted', 'vCPU 1 polling', 'vCPU 1 halted']);
    const idleMeans = await seriesMeans(page, 'guest-idle');
    for (const m of idleMeans) expect(m >= 0 && m <= 1.0001, `guest idle means ${idleMeans}`).toBe(true);
    expect(idleMeans[1]! + idleMeans[3]!, `halted shares ${idleMeans}`).toBeGreaterThan(0);
    expect(await num(page, 'guest-idle', 'data-band-max')).toBeLessThanOrEqual(1.0001);
    expect(await idle.locator('.chart-fact').textContent()).toMatch(/^guest: cpuidle-haltpoll driver, /);
    expect(await idle.locator('.chart-empty').isHidden()).toBe(true);

    // The load, typed at the prompt as a person does.
    await page.getByTestId('console').click();
    await page.keyboard.type('yes | cat >/dev/null &', { delay: 20 });
    await page.keyboard.press('Enter');
    // Two busy processes keep the vCPU threads on the host's CPUs: a share of one host CPU each.
    await waitFor('host CPU per vCPU above 30 %', async () => (await num(page, 'host-cpu', 'data-window-max')) > 0.3, 60_000, 500);
    // Fifteen seconds of samples under load (10 a second), so the charts and the screenshot show it.
    const loaded = await num(page, 'host-cpu', 'data-points');
    await waitFor('15 s of samples under load', async () => (await num(page, 'host-cpu', 'data-points')) >= loaded + 150, 60_000, 500);
    for (const chart of ['host-cpu', 'runqueue-wait', 'halt-wait']) {
      const max = await num(page, chart, 'data-window-max');
      expect(max, `${chart} max`).toBeGreaterThanOrEqual(0);
      expect(max, `${chart} max (a share of one host CPU)`).toBeLessThanOrEqual(1.0001);
    }
    // Steal, the guest's view of run-queue wait: a share per vCPU, drawn.
    const steal = await seriesMeans(page, 'steal');
    expect(steal, 'a steal series per vCPU').toHaveLength(2);
    for (const m of steal) expect(m >= 0 && m <= 1.0001, `steal means ${steal}`).toBe(true);
    expect(await num(page, 'steal', 'data-band-max')).toBeLessThanOrEqual(1.0001);
    // Every exit has a kind ("other" included): the kinds' means add up to all exits'.
    const means = (await page.locator('figure[data-chart="exits-by-kind"]').getAttribute('data-series-means') ?? '').split(' ').map(Number);
    const [all, ...kinds] = means;
    expect(all).toBeGreaterThan(0);
    const parts = kinds.reduce((a, b) => a + (Number.isFinite(b) ? b : 0), 0);
    expect(Math.abs(parts - all!), `kinds ${parts} against all ${all}`).toBeLessThanOrEqual(0.01 * all! + 1);
    // Kernel and shell lines are 80 columns wide.
    const size = await hook<{ cols: number }>(page, 'consoleSize', vmId);
    expect(size.cols).toBeGreaterThanOrEqual(80);
    await page.locator('section.vm-view').screenshot({ path: artifact('linux-vm-page.png') });

    await page.keyboard.type('kill %1', { delay: 20 });
    await page.keyboard.press('Enter');
    await page.locator('button[data-action="stop"]').click();
    await waitFor('the VM stopped', async () => (await page.getByTestId('vm-state').first().textContent()) === 'stopped', 120_000, 500);
  }, 900_000);
});

// The compare view as a person uses it (typing and clicking, in headless Chromium against host
// mode): Runs = 0 is refused at the field and nothing starts, fewer than 5 runs is warned about;
// a halt-polling compare "also under QEMU" marks the QEMU row that could not run as labelled (in
// the table, its footnote and the chart) and gives each pair a verdict with its confidence
// interval and p; a running experiment is cancelled (its VM and QEMU end) and then deleted (from
// the list and from disk). Real VMs, real QEMU. Screenshots to test/artifacts/.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { artifact, launchBrowser, skipReason, typeInto, useApp, waitFor } from './support.ts';
import { qemuSkipReason } from '../support/qemu-probe.ts';
import { scaled } from '../support/time-scale.ts';

const reason = skipReason() ?? qemuSkipReason() ?? null;
if (reason) console.warn(`[e2e compare] skipped: ${reason}`);

/** Processes whose parent is `pid` and whose name starts with `prefix`, from /proc. */
function childrenOf(pid: number, prefix: string): number[] {
  const out: number[] = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8');
      const comm = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'));
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      if (ppid === pid && comm.startsWith(prefix)) out.push(Number(name));
    } catch { /* gone */ }
  }
  return out;
}

describe.skipIf(reason !== null)('the compare view', () => {
  const app = useApp({ width: 1500, height: 1400 });

  it('refuses Runs = 0 at the field and starts nothing; warns below 5 runs', async () => {
    const { page } = app;
    await app.goto(`#/compare`);
    await page.getByRole('heading', { name: 'Compare configurations' }).waitFor();
    await typeInto(page, 'Runs each', '0');
    await page.keyboard.press('Tab');
    const msg = page.locator('.field-msg').first();
    await waitFor('the runs message', async () => /Runs must be a whole number from 1 to 100/.test(await msg.textContent() ?? ''));
    await page.getByRole('button', { name: 'Run experiment' }).click();
    await page.waitForTimeout(500);
    expect(await page.locator('.exp-list li').count()).toBe(0);
    await page.screenshot({ path: artifact('compare-runs-zero.png'), fullPage: true });
    await typeInto(page, 'Runs each', '3');
    await page.keyboard.press('Tab');
    await waitFor('the few-runs warning', async () => /Fewer than 5 runs rarely show a difference/.test(await msg.textContent() ?? ''));
    // Host contention is judged at its field by the spec's limit, and 0 (none) is where it stays.
    await typeInto(page, 'Busy host processes', '65');
    await page.keyboard.press('Tab');
    const busy = page.locator(`#${await page.getByLabel('Busy host processes').getAttribute('aria-describedby')}`);
    await waitFor('the contention message', async () => (await busy.textContent()) === 'Busy host processes must be a whole number from 0 to 64.');
    await typeInto(page, 'Busy host processes', '2');
    await page.keyboard.press('Tab');
    await waitFor('what 2 busy processes do', async () => /^CPU-bound, on the vCPUs' host CPUs, during every run/.test(await busy.textContent() ?? ''));
    await typeInto(page, 'Busy host processes', '0');
    await page.keyboard.press('Tab');
  });

  it('marks the QEMU row that ran at the host default and gives every pair a verdict', async () => {
    const { page } = app;
    await page.getByRole('button', { name: 'halt polling 0 vs default' }).click();
    await typeInto(page, 'Workload', 'pio');
    await typeInto(page, 'Workload parameters', 'count=2000');
    await typeInto(page, 'Runs each', '5');
    // "Also under QEMU" is on by default, and the form says before the run what QEMU cannot do.
    expect(await page.getByLabel('Also under QEMU').isChecked()).toBe(true);
    expect(await page.locator('.qemu-hint').textContent()).toMatch(/QEMU has no per-VM halt polling/);
    await page.getByRole('button', { name: 'Run experiment' }).click();
    const panel = page.locator('section.experiment');
    await waitFor('the progress to count every run', async () => /of 20\b/.test(await panel.textContent() ?? '') || (await panel.getAttribute('data-state')) !== 'running', 30_000);
    const state = await waitFor('the experiment to finish', async () => {
      const s = await panel.getAttribute('data-state');
      return s === 'running' ? '' : s;
    }, 300_000, 500);
    expect(state, await panel.textContent() ?? '').toBe('done');
    const table = page.getByTestId('results-table');
    await table.waitFor();
    expect(await table.locator('tbody tr').count()).toBe(4);
    // The QEMU row labelled halt-poll 0 ran at the host's polling: marked, with the reason.
    const qemu0 = table.locator('tr[data-runner="qemu"][data-config="halt-poll 0"]');
    expect(await qemu0.locator('.ran-as').textContent()).toMatch(/ran differently/);
    expect(await qemu0.locator('.ran-as').getAttribute('title')).toMatch(/QEMU has no per-VM halt-polling option/);
    expect(await table.locator('tr[data-runner="qemu"][data-config="halt-poll default"] .ran-as').count()).toBe(0);
    expect(await table.locator('tr[data-runner="unhalt"] .ran-as').count()).toBe(0);
    expect(await page.locator('ul.caveats').textContent()).toMatch(/halt-poll 0 \(qemu\) ran at the host's halt polling \(\d+ ns\), not halt-poll-ns=0/);
    expect(await page.locator('.bars canvas').getAttribute('aria-label')).toMatch(/halt-poll 0 qemu [\d.]+× \(† ran at the host's halt polling/);
    // A verdict for each compared pair (each config against the first of its VMM).
    for (const runner of ['unhalt', 'qemu']) {
      const row = table.locator(`tr[data-runner="${runner}"][data-config="halt-poll default"]`);
      expect(await row.getAttribute('data-verdict')).toMatch(/^(better|worse|no significant difference)$/);
      expect(await row.locator('td.verdict').textContent()).toMatch(/^(better|worse|no significant difference)$/);
      const line = page.locator(`ul.verdicts li[data-runner="${runner}"][data-config="halt-poll default"]`);
      expect(await line.textContent()).toMatch(new RegExp(`^halt-poll default vs halt-poll 0 \\(${runner}, 5 vs 5 runs\\): [\\d.]+×, 95 % CI [\\d.]+–[\\d.]+, p (=|<) [\\d.]+ — (better|worse|no significant difference)`));
      expect(await table.locator(`tr[data-runner="${runner}"][data-config="halt-poll 0"] td.verdict`).textContent()).toBe('baseline');
    }
    // KVM's halt distributions of each configuration side by side (our VMM's runs): with
    // halt-poll-ns=0 KVM never polls, so that configuration's poll histograms are empty.
    const hists = page.getByTestId('hist-compare');
    expect(await hists.locator('[data-config]').evaluateAll((els) => els.map((e) => e.getAttribute('data-config')))).toEqual(['halt-poll 0', 'halt-poll default']);
    const off = hists.locator('[data-config="halt-poll 0"]');
    expect(Number(await off.getAttribute('data-success-total')) + Number(await off.getAttribute('data-fail-total'))).toBe(0);
    expect(await off.locator('.chart-readout').textContent()).toMatch(/^\d+ slept \(median (–|[\d.]+ (ns|µs|ms|s))\) · 0 polls caught, 0 missed · 5 runs$/);
    await page.screenshot({ path: artifact('compare-verdicts.png'), fullPage: true });
    const id = await page.locator('section.experiment').getAttribute('data-experiment-id');
    const dark = await launchBrowser({ colorScheme: 'dark', width: 1500, height: 1400 });
    try {
      await dark.page.goto(`${app.url}#/compare/${id}`);
      await dark.page.getByTestId('results-table').waitFor();
      await dark.page.locator('ul.verdicts li').first().waitFor();
      await dark.page.screenshot({ path: artifact('compare-verdicts-dark.png'), fullPage: true });
    } finally {
      await dark.close();
    }
  });

  it('cancels a running experiment (its VM and QEMU end) and deletes it', async () => {
    const { page } = app;
    await page.getByRole('button', { name: 'cpu-pm off vs on' }).click();
    await typeInto(page, 'Workload', 'idle');
    // Long enough that the cancel, not the run's end, stops the QEMU run it hits.
    await typeInto(page, 'Workload parameters', `ms=${scaled(8000)}`);
    await typeInto(page, 'Runs each', '5');
    await page.getByRole('button', { name: 'Run experiment' }).click();
    const panel = page.locator('section.experiment[data-state="running"]');
    await panel.waitFor({ timeout: scaled(20_000) });
    const id = (await panel.getAttribute('data-experiment-id'))!;
    // Past the first Unhalt run, into the first QEMU run, and its QEMU process (the progress
    // says "run 1/5" before the server has spawned it: wait for the process, not a fixed time).
    await waitFor('the first QEMU run', async () => /1 of 20 — cpu-pm off \(qemu\) run 1\/5/.test(await panel.textContent() ?? ''), 60_000, 200);
    await waitFor('its QEMU process', () => childrenOf(app.host.proc.pid!, 'qemu-system').length > 0, 20_000, 100);
    expect(childrenOf(app.host.proc.pid!, 'qemu-system')).toHaveLength(1);
    await page.screenshot({ path: artifact('compare-running.png'), fullPage: true });
    const t0 = Date.now();
    await page.getByRole('button', { name: 'Cancel experiment' }).click();
    const done = page.locator(`section.experiment[data-experiment-id="${id}"][data-state="cancelled"]`);
    await done.waitFor({ timeout: scaled(15_000) });
    const cancelMs = Date.now() - t0;
    expect(await done.textContent()).toMatch(/cancelled: cancelled by the user/);
    expect(cancelMs).toBeLessThan(scaled(10_000));
    expect(childrenOf(app.host.proc.pid!, 'qemu-system')).toEqual([]);
    await page.screenshot({ path: artifact('compare-cancelled.png'), fullPage: true });

    const file = join(app.home, 'experiments', `${id}.json`);
    expect(existsSync(file)).toBe(true);
    const item = page.locator('.exp-list li').filter({ has: page.locator('.exp-cancelled') });
    await item.getByRole('button', { name: /^Delete experiment idle/ }).click();
    await item.getByRole('button', { name: 'Delete for good' }).click();
    await waitFor('the experiment to leave the list', async () => (await page.locator('.exp-list .exp-cancelled').count()) === 0);
    expect(existsSync(file)).toBe(false);
    // The finished one stays.
    expect(await page.locator('.exp-list li').count()).toBe(1);
    expect(app.errors.filter((e) => !/favicon|WebSocket/.test(e))).toEqual([]);
    process.stdout.write(`compare e2e: cancel took ${cancelMs} ms\n`);
  });
});

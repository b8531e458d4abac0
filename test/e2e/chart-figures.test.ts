// The live charts say what their numbers are, in headless Chromium against host mode, on a real
// probe VM running the IPI scenario in live mode (a burst of 50 round trips a second, HLT in
// between: long halts, so KVM's halt_wait_ns lands in big lumps):
// - halt wait is a share of time: it never goes above 100 % (it used to show 1,000-10,000 %);
// - the headers say "max … · mean … (…, last 1 min)" over the visible window, and follow the
//   window a person picks; the legends read "mean · max" per series, not the newest sample;
// - the latency legend says a p99 of 50 round trips is their maximum;
// - rates print without an SI "m" (milli) that reads as millions;
// - the library's sparkline reads out the mean over its minute, not the newest sample.
import { describe, expect, it } from 'vitest';
import { artifact, createVmThroughApi, openAndStartVm, skipReason, useApp, waitFor } from './support.ts';
import { scaled } from '../support/time-scale.ts';

const reason = skipReason();
if (reason) console.warn(`[e2e chart figures] skipped: ${reason}`);

describe.skipIf(reason !== null)('live chart figures', () => {
  const app = useApp({ width: 1440, height: 1800 });

  it('shows halt wait within 0-100 %, window max / mean headers and legends, p99 of N, plain units', async () => {
    const { page } = app;
    await app.goto();
    await page.getByRole('heading', { name: 'No virtual machines yet' }).waitFor();
    // The VM itself is set up through the API (the wizard has tests of its own); the rest is clicks.
    const id = await createVmThroughApi(page, { name: 'figures', guest: 'probe', cpus: 2, append: 'scenario=ipi live=1' });
    await openAndStartVm(page, id, 'figures');
    await waitFor('the VM to run', async () => (await page.getByTestId('vm-state').first().textContent()) === 'running', 30_000);

    const wait = page.locator('figure[data-chart="halt-wait"]');
    const exits = page.locator('figure[data-chart="halt-exits"]');
    const latency = page.locator('figure[data-chart="latency"]');
    // Several bursts: each ends a ~1 s halt of vCPU 0 and 1.
    await waitFor('latency points', async () => Number(await latency.getAttribute('data-points') ?? 0) >= 4, 60_000, 250);
    let highest = 0;
    for (let i = 0; i < 12; i++) {
      const max = Number(await wait.getAttribute('data-window-max') || 0);
      highest = Math.max(highest, max);
      await page.waitForTimeout(250);
    }
    // The vCPUs sleep most of each second: a large share, but a share.
    expect(highest).toBeGreaterThan(0.3);
    expect(highest).toBeLessThanOrEqual(1 + 1e-9);
    expect(await wait.locator('.chart-readout').textContent()).toMatch(/^max \d+\.\d % · mean \d+\.\d % \(per vCPU, last 1 min\)$/);
    // The y axis is 0-100 % and every value is within it: nothing is clipped.

    const exitsHeader = await exits.locator('.chart-readout').textContent();
    expect(exitsHeader).toMatch(/^max [\d.]+( k)?\/s per vCPU · mean [\d.]+( k)?\/s all vCPUs \(last 1 min\)$/);
    // Legends: "mean · max" over the window, in the legend's first cell too.
    const legend = await exits.locator('.u-legend .u-series .u-value').allTextContents();
    expect(legend[0]).toBe('each: mean · max, last 1 min');
    for (const v of legend.slice(1)) expect(v).toMatch(/^[\d.]+( k)?\/s · [\d.]+( k)?\/s$/);
    for (const v of [exitsHeader, ...legend]) expect(v).not.toMatch(/\d ?m\//);
    const labels = await latency.locator('.u-legend .u-series .u-label').allTextContents();
    expect(labels).toContain('ipi p99 of 50 (= max)');
    expect(labels).toContain('ipi p50 of 50');
    for (const v of await latency.locator('.u-legend .u-series .u-value').allTextContents()) expect(v).not.toMatch(/k µs/);

    // A person picks a longer window: the headers say so.
    await page.getByRole('button', { name: '5 min' }).click();
    await waitFor('the header to follow the window', async () => /\(last 5 min\)$/.test(await exits.locator('.chart-readout').textContent() ?? ''), 5000);
    await wait.scrollIntoViewIfNeeded();
    await page.screenshot({ path: artifact('charts-figures.png'), fullPage: true });
    // The library's sparkline says what its number is: the mean over the minute it draws.
    await page.getByRole('button', { name: 'Library', exact: true }).click();
    const spark = page.locator(`li.vm-card[data-vm-id="${id}"] .spark-value`);
    await waitFor('the sparkline readout', async () => /^mean [\d.]+( k)?\/s$/.test(await spark.textContent() ?? ''), 10_000);
    expect(app.errors.filter((e) => !/favicon|WebSocket/.test(e))).toEqual([]);
  }, scaled(180_000));
});

// End to end, in headless Chromium against host mode: the VM page's Devices panel. A probe VM
// with virtio-rng on and a raw disk, started with a click, runs the probe's virtio-blk driver
// (4 KiB random reads, then 64 KiB sequential ones): the panel's requests/s, bytes/s and
// notifications charts get non-zero points for the disk, the bytes legend has its read and
// write series, and the totals line counts its requests. A second VM runs the virtio-rng
// scenario, whose ttyS1 report carries notify_p50_ns: the rng device's charts move, and the
// Guest latency chart stays empty (it takes wake-up latencies only). The VMs are set up through
// the API (the wizard has tests of its own); the rest is clicks. Screenshots in
// test/artifacts/device-telemetry/.
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Page } from 'playwright-core';
import { describe, expect, it } from 'vitest';
import { artifact, createVmThroughApi, openAndStartVm, skipReason, useApp, waitFor } from './support.ts';
import { scaled } from '../support/time-scale.ts';

const reason = skipReason();
if (reason) console.warn(`[e2e device telemetry] skipped: ${reason}`);

const shot = (name: string) => artifact(`device-telemetry/${name}.png`);

function telemetry(page: Page, id: string) {
  return page.evaluate((vmId) => {
    const h = (globalThis as unknown as { __unhalt: { telemetry(id: string): { devices: string[]; deviceRows: number; latencySeries: string[] } } }).__unhalt;
    return h.telemetry(vmId);
  }, id);
}

const nonZero = async (page: Page, chart: string) => Number(await page.locator(`figure[data-chart="${chart}"]`).getAttribute('data-nonzero-points') ?? 0);

describe.skipIf(reason !== null)('the Devices panel', () => {
  const app = useApp({ width: 1440, height: 2200 });

  it('shows a disk\'s requests, bytes and notifications per second while the guest reads it', async () => {
    const { page } = app;
    const disks = join(app.home, 'disks');
    mkdirSync(disks);
    const img = join(disks, 'data.img');
    writeFileSync(img, Buffer.alloc(16 * 1024 * 1024, 0x33));
    await app.goto();
    await page.getByRole('heading', { name: 'No virtual machines yet' }).waitFor();
    const id = await createVmThroughApi(page, {
      name: 'disk-io', guest: 'probe', cpus: 1, memoryMiB: 64, rng: true, disks: [{ path: img }],
      append: 'scenario=virtio-blk bench=1 ops=3000 seq_kib=16384',
    });
    await openAndStartVm(page, id, 'disk-io');
    const panel = page.getByTestId('devices-panel');
    await panel.waitFor();
    await panel.getByRole('heading', { name: 'Devices' }).waitFor();
    // Watched as a person watches it: scrolled into view (charts out of view are not drawn, and
    // the VM page's charts above it fill more than a screen).
    await panel.scrollIntoViewIfNeeded();

    // The disk's rates reach the charts while the guest reads.
    await waitFor('non-zero device requests', async () => (await nonZero(page, 'device-requests')) >= 2, 60_000, 250);
    await waitFor('non-zero device bytes', async () => (await nonZero(page, 'device-bytes')) >= 2, 30_000, 250);
    await waitFor('non-zero notifications', async () => (await nonZero(page, 'device-notify')) >= 2, 30_000, 250);
    // Rows are only ever added: read the non-zero count first, then the rows (a first row may
    // already be non-zero, so there can be as few rows as non-zero points, never fewer).
    const requestPoints = await nonZero(page, 'device-requests');
    const t = await telemetry(page, id);
    expect(t.devices).toEqual(['rng', 'blk0']);
    expect(t.deviceRows).toBeGreaterThanOrEqual(requestPoints);
    const bytes = page.locator('figure[data-chart="device-bytes"]');
    expect(await bytes.locator('.u-legend .u-series .u-label').allTextContents()).toEqual(expect.arrayContaining(['rng', 'blk0 (vda) read', 'blk0 (vda) write']));
    await waitFor('the bytes header', async () => /^max [\d.]+ [kMG]?B\/s per series · mean [\d.]+ [kMG]?B\/s all devices \(last 1 min\)$/.test(await bytes.locator('.chart-readout').textContent() ?? ''), 10_000);
    expect(Number(await page.locator('figure[data-chart="device-requests"]').getAttribute('data-window-max'))).toBeGreaterThan(0);
    await waitFor('the totals line', async () => /blk0 \(vda\): [\d.]+ k? ?requests, [\d.]+ [kMG]?B, 0 drops, 0 errors/.test(await page.getByTestId('device-totals').textContent() ?? ''), 10_000);
    await panel.scrollIntoViewIfNeeded();
    await page.screenshot({ path: shot('disk-running'), fullPage: true });

    await waitFor('the VM to power off', async () => (await page.getByTestId('vm-state').first().textContent()) === 'stopped', 120_000, 250);
    // 3000 random reads + 256 sequential ones, all counted.
    await waitFor('the final totals', async () => (await page.getByTestId('device-totals').textContent() ?? '').includes('blk0 (vda): 3.26 k requests'), 10_000);
    expect(await page.getByTestId('device-totals').textContent()).toContain('rng: 0 requests, 0 B, 0 drops, 0 errors');
    await page.screenshot({ path: shot('disk-done'), fullPage: true });
    expect(app.errors.filter((e) => !/favicon|WebSocket/.test(e))).toEqual([]);
  }, scaled(240_000));

  it('the rng device\'s requests show; its notify latency stays off the Guest latency chart', async () => {
    const { page } = app;
    const id = await createVmThroughApi(page, { name: 'rng-io', guest: 'probe', cpus: 1, memoryMiB: 64, rng: true, append: 'scenario=virtio-rng bytes=64 rounds=400' });
    await openAndStartVm(page, id, 'rng-io');
    await waitFor('the VM to power off', async () => (await page.getByTestId('vm-state').first().textContent()) === 'stopped', 120_000, 250);
    await waitFor('the rng totals', async () => (await page.getByTestId('device-totals').textContent() ?? '').includes('rng: 400 requests, 25.6 kB'), 10_000);
    expect(await nonZero(page, 'device-requests')).toBeGreaterThan(0);
    const t = await telemetry(page, id);
    expect(t.devices).toEqual(['rng']);
    // The guest's `@u1 virtio_rng ... notify_p50_ns=...` arrived, and the latency chart took none of it.
    expect(t.latencySeries).toEqual([]);
    const latency = page.locator('figure[data-chart="latency"]');
    expect(await latency.getAttribute('data-points')).toBe('0');
    expect(await latency.locator('.chart-empty').isVisible()).toBe(true);
    await page.getByTestId('devices-panel').scrollIntoViewIfNeeded();
    await page.screenshot({ path: shot('rng'), fullPage: true });
  }, scaled(180_000));
});

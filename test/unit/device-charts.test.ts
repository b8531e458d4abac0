// What the VM page's charts take from the stream (renderer/src/charts): the Guest latency chart
// takes only the wake-up latencies it is about (a virtio scenario's notify_p50_ns used to land on
// it), and the Devices panel's rows, series and totals from device samples.
import { describe, expect, it } from 'vitest';
import type { TelemetryDeviceSample } from '../../electron/service/api.ts';
import { Rows, appendDeviceSamples, type DeviceState } from '../../renderer/src/charts/device-rows.ts';
import { deviceByteSeries, deviceNotifySeries, deviceRequestSeries } from '../../renderer/src/charts/device-series.ts';
import { LATENCY_EVENTS, deviceLabel, deviceTotalsText, isChartedLatency } from '../../renderer/src/charts/labels.ts';

describe('the Guest latency chart', () => {
  it('takes the wake-up latencies of ipi, timer, spinlock, ctx, ctxprobe and pipe, and no device figures', () => {
    expect(isChartedLatency('ipi', 'p50_ns')).toBe(true);
    expect(isChartedLatency('timer', 'p99_ns')).toBe(true);
    expect(isChartedLatency('spinlock', 'handoff_p50_ns')).toBe(true);
    expect(isChartedLatency('ctx', 'per_switch_ns')).toBe(true);
    expect(isChartedLatency('ctxprobe', 'p99_ns')).toBe(true);
    expect(isChartedLatency('pipe', 'per_op_ns')).toBe(true);
    expect(isChartedLatency('pipe', 'total_ns')).toBe(false);
    expect(isChartedLatency('virtio_rng', 'notify_p50_ns')).toBe(false);
    expect(isChartedLatency('virtio_rng', 'request_p99_ns')).toBe(false);
    expect(isChartedLatency('net_udp_rr', 'p50_ns')).toBe(false);
  });

  it('knows no device event as a latency event', () => {
    for (const e of ['virtio_rng', 'virtio_blk', 'virtio_blk_bench', 'net_udp_rr', 'net_connect', 'net_dhcp']) expect(LATENCY_EVENTS.has(e)).toBe(false);
  });
});

describe('the Devices panel', () => {
  const sample = (t: number, device: string, f: Record<string, number | null>): TelemetryDeviceSample => ({ t, device, interval_ms: 100, ...f });

  it('keeps each device\'s rates as columns the charts name, its newest totals, and a gap across a stop', () => {
    const rows = new Rows();
    const t: DeviceState & { devices: Rows } = { devices: rows, deviceNames: [], deviceTotals: {} };
    const add = (s: TelemetryDeviceSample[]) => appendDeviceSamples(rows, t, s);
    const t0 = 1.8e12;
    expect(add([])).toBe(false);
    add([
      sample(t0, 'rng', { requests_per_s: 0, bytes_per_s: 0, notifications_per_s: 0, interrupts_per_s: 0, requests: 0, bytes: 0, drops: 0, errors: 0 }),
      sample(t0, 'blk0', { requests_per_s: 400, read_bytes_per_s: 1.6e6, write_bytes_per_s: 0, notifications_per_s: 400, mmio_notifications_per_s: 0, interrupts_per_s: 400, requests: 40, bytes: 163840, drops: 0, errors: 0 }),
      sample(t0 + 100, 'rng', { requests_per_s: 10, requests: 1 }),
      sample(t0 + 100, 'blk0', { requests_per_s: 300, requests: 70, bytes: 286720, errors: 1 }),
    ]);
    expect(t.deviceNames).toEqual(['rng', 'blk0']);
    expect(t.devices.length).toBe(2);
    expect(Array.from(t.devices.col('requests_per_s@blk0').subarray(0, 2))).toEqual([400, 300]);
    expect(t.devices.col('read_bytes_per_s@blk0')[0]).toBe(1.6e6);
    expect(t.deviceTotals.blk0).toEqual({ requests: 70, bytes: 286720, drops: 0, errors: 1 });
    // The charts' series are columns the store has (or will have): one per device, per direction.
    const keys = [deviceRequestSeries, deviceByteSeries, deviceNotifySeries].flatMap((f) => f(t).map((s) => s.key));
    expect(keys).toEqual(expect.arrayContaining([
      'requests_per_s@rng', 'requests_per_s@blk0', 'bytes_per_s@rng', 'read_bytes_per_s@blk0', 'write_bytes_per_s@blk0',
      'notifications_per_s@blk0', 'mmio_notifications_per_s@blk0', 'interrupts_per_s@blk0',
    ]));
    expect(deviceByteSeries(t).map((s) => s.label)).toEqual(['rng', 'blk0 (vda) read', 'blk0 (vda) write']);
    expect(deviceTotalsText(t.deviceNames, t.deviceTotals)).toBe('rng: 1 requests, 0 B, 0 drops, 0 errors · blk0 (vda): 70 requests, 287 kB, 0 drops, 1 errors');

    // A minute later (the VM ran again): a gap row first, so no line joins the runs.
    add([sample(t0 + 60_000, 'blk0', { requests_per_s: 5 })]);
    expect(t.devices.length).toBe(4);
    expect(t.devices.col('requests_per_s@blk0')[2]).toBeNaN();
    expect(t.devices.col('requests_per_s@blk0')[3]).toBe(5);
  });

  it('labels disks with their guest names', () => {
    expect([deviceLabel('blk0'), deviceLabel('blk2'), deviceLabel('net'), deviceLabel('rng')]).toEqual(['blk0 (vda)', 'blk2 (vdc)', 'net', 'rng']);
  });
});

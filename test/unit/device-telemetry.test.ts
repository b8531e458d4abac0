// The sampler's per-device series (electron/vmm/telemetry/devices.ts) from a counter source the
// test drives: rates over known intervals, per direction for net and blk, totals for drops and
// errors, 32-bit counters unwrapped across a wrap, devices appearing and disappearing with the VM,
// and the `--stats` NDJSON lines they make.
import { describe, expect, it } from 'vitest';
import { PassThrough } from 'node:stream';
import type { VirtioCounters } from '../../electron/vmm/devices/virtio/virtio-pci.ts';
import type { TelemetryEvent } from '../../electron/vmm/telemetry/fields.ts';
import { DEVICE_FIELDS, deviceKind } from '../../electron/vmm/telemetry/devices.ts';
import { NdjsonStatsWriter } from '../../electron/vmm/telemetry/ndjson.ts';
import { Sampler, type SamplerTarget } from '../../electron/vmm/telemetry/sampler.ts';

function counters(queues: number, device?: Record<string, number>): VirtioCounters {
  const z = () => Array<number>(queues).fill(0);
  return {
    mmioNotifies: 0, kicks: 0, interrupts: 0, resets: 0, status: 0, error: 0, lastError: 0, needsResets: 0,
    requests: z(), bytes: z(), drops: z(), readBytes: z(), ...(device ? { device } : {}),
  };
}
const blkDevice = () => ({ reads: 0, writes: 0, bytesRead: 0, bytesWritten: 0, flushes: 0, discards: 0, getIds: 0, ioErrors: 0, unsupported: 0 });

/** A VM of one vCPU without KVM stats, whose devices are whatever `devices` holds at the time. */
function fakeVm() {
  const devices: Partial<Record<string, VirtioCounters>> = {};
  let now = 1000;
  const target: SamplerTarget = {
    startedAt: 1000,
    control: { cpus: 1, counter: () => 0 },
    statsFds: () => ({ vm: -1, vcpus: [-1] }),
    vcpuThreadIds: () => [0],
    virtioCounters: () => devices,
  };
  return { target, devices, clock: () => now, advance: (ms: number) => { now += ms; } };
}

describe('per-device telemetry', () => {
  it('gives each device its requests/s, bytes/s, notifications (MMIO ones apart), interrupts; drops and errors as totals', () => {
    const vm = fakeVm();
    const sampler = new Sampler(vm.target, { now: vm.clock });
    const events: TelemetryEvent[] = [];
    sampler.subscribe((e) => events.push(e));
    expect(events[0]).toMatchObject({ type: 'backfill', records: [], devices: [] });

    // Before the machine is built: no devices, no device records.
    sampler.sampleNow();
    vm.advance(100);
    expect(sampler.sampleNow()).toHaveLength(1);
    expect(sampler.deviceRecords()).toEqual([]);

    // The VM's devices appear: their first instant is a baseline (totals, no rates).
    const rng = vm.devices.rng = counters(1);
    const blk = vm.devices.blk0 = counters(1, blkDevice());
    vm.advance(100);
    sampler.sampleNow();
    const first = (events.at(-1) as Extract<TelemetryEvent, { type: 'sample' }>).devices;
    expect(first.map((d) => [d.t, d.device])).toEqual([[200, 'rng'], [200, 'blk0']]);
    expect(first[1]).toMatchObject({ requests: 0, requests_per_s: null, bytes: 0, drops: 0, errors: 0 });

    // 250 ms: the disk served 50 reads of 4 KiB and 10 writes of 64 KiB, one flush, 61 requests,
    // 61 notifications of which 1 by MMIO exit, 61 MSIs; one I/O error; rng 10 requests of 16 bytes.
    Object.assign(blk, { kicks: 61, mmioNotifies: 1, interrupts: 61, requests: [61] });
    Object.assign(blk.device!, { reads: 50, writes: 10, bytesRead: 50 * 4096, bytesWritten: 10 * 65536, flushes: 1, ioErrors: 1 });
    Object.assign(rng, { kicks: 10, interrupts: 10, requests: [10], bytes: [160], drops: [2] });
    vm.advance(250);
    sampler.sampleNow();
    const [r, b] = (events.at(-1) as Extract<TelemetryEvent, { type: 'sample' }>).devices;
    expect(b).toMatchObject({
      t: 450, device: 'blk0', interval_ms: 250,
      requests: 61, requests_per_s: 244, notifications: 61, notifications_per_s: 244, mmio_notifications_per_s: 4,
      interrupts_per_s: 244, reads_per_s: 200, writes_per_s: 40, read_bytes_per_s: 200 * 4096, write_bytes_per_s: 40 * 65536,
      bytes_per_s: 200 * 4096 + 40 * 65536, flushes_per_s: 4, errors: 1, drops: 0,
    });
    expect(b).not.toHaveProperty('errors_per_s');
    expect(b).not.toHaveProperty('drops_per_s');
    expect(r).toMatchObject({ device: 'rng', requests_per_s: 40, bytes_per_s: 640, bytes: 160, drops: 2 });

    // The disk goes (its VM stopped, say): no records for it; rng goes on.
    delete vm.devices.blk0;
    vm.advance(100);
    sampler.sampleNow();
    expect((events.at(-1) as Extract<TelemetryEvent, { type: 'sample' }>).devices.map((d) => d.device)).toEqual(['rng']);
    // Back again (same name, same counters): the instant after a gap has no rate.
    vm.devices.blk0 = blk;
    vm.advance(100);
    sampler.sampleNow();
    expect((events.at(-1) as Extract<TelemetryEvent, { type: 'sample' }>).devices.find((d) => d.device === 'blk0')).toMatchObject({ requests: 61, requests_per_s: null });
    // All gone with the VM.
    delete vm.devices.rng;
    delete vm.devices.blk0;
    vm.advance(100);
    sampler.sampleNow();
    expect((events.at(-1) as Extract<TelemetryEvent, { type: 'sample' }>).devices).toEqual([]);

    // The stored history says the same, oldest first.
    expect(sampler.deviceRecords().map((d) => `${d.t} ${d.device}`)).toEqual(['200 rng', '200 blk0', '450 rng', '450 blk0', '550 rng', '650 rng', '650 blk0']);
    sampler.stop();
  });

  it('net: frames and bytes per direction (tx bytes from what the device read), drops per direction', () => {
    const vm = fakeVm();
    const sampler = new Sampler(vm.target, { now: vm.clock });
    const net = vm.devices.net = counters(2);
    sampler.sampleNow();
    Object.assign(net, { kicks: 30, interrupts: 12, requests: [12, 20], bytes: [12 * 600, 0], readBytes: [0, 20 * 100], drops: [3, 1] });
    vm.advance(500);
    sampler.sampleNow();
    const [n] = sampler.deviceRecords();
    expect(n).toMatchObject({
      device: 'net', rx_frames_per_s: 24, tx_frames_per_s: 40, requests_per_s: 64, rx_bytes_per_s: 24 * 600, tx_bytes_per_s: 40 * 100,
      bytes_per_s: 24 * 600 + 40 * 100, rx_drops: 3, tx_drops: 1, drops: 4, notifications_per_s: 60, interrupts_per_s: 24,
    });
    sampler.stop();
  });

  it('unwraps the transport\'s 32-bit counters: totals rise past 4 GiB and the rate stays right', () => {
    const vm = fakeVm();
    const sampler = new Sampler(vm.target, { now: vm.clock });
    const rng = vm.devices.rng = counters(1);
    rng.bytes = [0xffff_ff00];
    sampler.sampleNow();
    rng.bytes = [0x100]; // 512 bytes later, the word wrapped
    vm.advance(100);
    sampler.sampleNow();
    const [d] = sampler.deviceRecords();
    expect(d!.bytes).toBe(0x1_0000_0100);
    expect(d!.bytes_per_s).toBe(5120);
    sampler.stop();
  });

  it('names each kind\'s fields once; an unknown device gets the transport\'s', () => {
    expect([deviceKind('rng'), deviceKind('net'), deviceKind('blk0'), deviceKind('blk7'), deviceKind('gpu')]).toEqual(['rng', 'net', 'blk', 'blk', 'virtio']);
    for (const fields of Object.values(DEVICE_FIELDS)) {
      const names = fields.map((f) => f.name);
      expect(new Set(names).size).toBe(names.length);
      for (const n of ['notifications', 'mmio_notifications', 'interrupts', 'requests', 'bytes', 'drops', 'errors']) expect(names).toContain(n);
    }
  });

  it('writes device lines to the NDJSON after each instant\'s vCPU lines, in the backfill and live', async () => {
    const vm = fakeVm();
    const sampler = new Sampler(vm.target, { now: vm.clock });
    vm.devices.rng = counters(1);
    vm.devices.blk0 = counters(1, blkDevice());
    const out = new PassThrough();
    let text = '';
    out.on('data', (b: Buffer) => { text += b.toString(); });
    const writer = new NdjsonStatsWriter(out);
    sampler.sampleNow();
    vm.advance(100);
    sampler.sampleNow();
    writer.attach(sampler); // backfill: one instant
    sampler.markEvent('halt-poll-ns=0');
    vm.devices.blk0.requests = [7];
    vm.advance(100);
    sampler.sampleNow();
    sampler.stop();
    await writer.close();
    const lines = text.trim().split('\n').map((l) => JSON.parse(l));
    expect(lines.map((l) => [l.t, l.vcpu ?? l.device ?? l.marker])).toEqual([
      [100, 0], [100, 'rng'], [100, 'blk0'], [100, 'halt-poll-ns=0'], [200, 0], [200, 'rng'], [200, 'blk0'],
    ]);
    expect(lines[6]).toMatchObject({ device: 'blk0', interval_ms: 100, requests: 7, requests_per_s: 70 });
    expect(lines[6]).not.toHaveProperty('vcpu');
  });
});

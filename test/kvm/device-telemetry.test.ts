// Per-device telemetry on real KVM: a probe VM with virtio-rng on and a raw disk runs the probe's
// virtio-blk driver (scenario virtio-blk bench=1: 4 KiB random reads, then 64 KiB sequential
// reads); the sampler's device series show the disk's requests and bytes as they happen, totals
// that end at the device's own counters, rates that add up to them, and the idle rng device at 0.
// `unhalt run --stats` writes the same device objects into its NDJSON.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { resolveMachine } from '../../electron/vmm/config/resolve.ts';
import { validateConfig } from '../../electron/vmm/config/vm-config.ts';
import { probeHost } from '../../electron/vmm/machine/host-caps.ts';
import type { DeviceRecord } from '../../electron/vmm/telemetry/fields.ts';
import { Sampler } from '../../electron/vmm/telemetry/sampler.ts';
import { VirtualMachine } from '../../electron/vmm/vm.ts';
import { runCli } from '../support/cli.ts';
import { kvmAvailable, watch } from '../support/probe.ts';

const dir = mkdtempSync(join(tmpdir(), 'unhalt-device-telemetry-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const OPS = 400;
const SEQ_KIB = 2048;
const REQUESTS = OPS + SEQ_KIB / 64;
const BYTES = OPS * 4096 + SEQ_KIB * 1024;

function image(name: string, bytes = 8 * 1024 * 1024): string {
  const p = join(dir, name);
  writeFileSync(p, Buffer.alloc(bytes, 0x5a));
  return p;
}

/** Σ rate × interval over the records: what the rates say happened between the first and the last. */
const integrate = (rs: DeviceRecord[], f: string) => rs.slice(1).reduce((a, r) => a + ((r[`${f}_per_s`] as number) * (r.interval_ms as number)) / 1000, 0);

describe.skipIf(!kvmAvailable)('per-device telemetry on a real VM', () => {
  it('publishes the disk\'s requests and bytes per interval, next to an idle rng device', async () => {
    const img = image('bench.img');
    const { spec } = resolveMachine(validateConfig({
      guest: 'probe', cpus: 1, memoryMiB: 64, name: 'devtel', rng: true, disks: [{ path: img }],
      append: `scenario=virtio-blk bench=1 ops=${OPS} seq_kib=${SEQ_KIB}`,
    }), probeHost());
    const g = watch(await VirtualMachine.start(spec));
    const sampler = Sampler.forVm(g.vm, { intervalMs: 50 });
    const live: DeviceRecord[] = [];
    sampler.subscribe((e) => { if (e.type !== 'marker') live.push(...e.devices); });
    const exit = await g.vm.ended;
    expect(exit.kind).toBe('poweroff');
    expect(g.events.find((e) => e.event === 'virtio_blk_bench')?.fields).toMatchObject({ ops: OPS, seq_kib: SEQ_KIB });

    const records = sampler.deviceRecords();
    expect(live.map((r) => `${r.t} ${r.device}`)).toEqual(records.map((r) => `${r.t} ${r.device}`));
    const blk = records.filter((r) => r.device === 'blk0');
    const rng = records.filter((r) => r.device === 'rng');
    expect(blk.length).toBeGreaterThan(3);
    expect(rng.map((r) => r.t)).toEqual(blk.map((r) => r.t)); // the same instants
    // The vCPU series shares them too.
    expect(sampler.records().map((r) => r.t)).toEqual(blk.map((r) => r.t));

    // The last sample (taken as the VM stopped) holds the device's own final counters.
    const c = g.vm.virtioCounters().blk0!;
    const last = blk.at(-1)!;
    expect(c.requests[0]).toBe(REQUESTS);
    expect(c.device).toMatchObject({ reads: REQUESTS, bytesRead: BYTES, writes: 0 });
    expect(last).toMatchObject({
      requests: REQUESTS, reads: REQUESTS, read_bytes: BYTES, bytes: BYTES, writes: 0, write_bytes: 0,
      notifications: c.kicks, mmio_notifications: c.mmioNotifies, interrupts: c.interrupts, errors: 0, drops: 0,
    });
    // The rates add up to what happened between the first sample and the last.
    for (const f of ['requests', 'reads', 'read_bytes', 'interrupts', 'notifications']) {
      // Within the rounding of interval_ms to 1 µs: each sample's share is off by at most its rate
      // times 0.5 µs (a short last interval, taken as the VM stops, weighs most).
      const happened = (last[f] as number) - (blk[0]![f] as number);
      const rounding = blk.slice(1).reduce((a, r) => a + Math.abs(r[`${f}_per_s`] as number) * 0.5e-6, 0);
      expect(Math.abs(integrate(blk, f) - happened), f).toBeLessThanOrEqual(rounding * 1.01 + 1e-6);
    }
    // The guest was reading for several samples: the rates show it while it lasted.
    const busy = blk.filter((r) => ((r.requests_per_s as number | null) ?? 0) > 0);
    expect(busy.length).toBeGreaterThanOrEqual(2);
    expect(busy.every((r) => (r.read_bytes_per_s as number) >= 4096 * (r.reads_per_s as number) - 1e-6)).toBe(true);
    expect(Math.max(...blk.map((r) => r.write_bytes_per_s as number))).toBe(0);
    // One MSI per request here; notifications by ioeventfd, so none as MMIO exits where KVM has them.
    expect(c.interrupts).toBe(REQUESTS);
    console.log(`blk0: ${blk.length} samples, peak ${Math.max(...blk.map((r) => r.requests_per_s as number)).toFixed(0)} requests/s, `
      + `${(Math.max(...blk.map((r) => r.bytes_per_s as number)) / 2 ** 20).toFixed(1)} MiB/s; mmio notifications ${c.mmioNotifies} of ${c.kicks}`);
    // The rng device was there and idle.
    expect(rng.at(-1)).toMatchObject({ requests: 0, bytes: 0, notifications: 0, interrupts: 0 });
    expect(rng.every((r) => r.requests_per_s === null || r.requests_per_s === 0)).toBe(true);
  }, 120_000);

  it('unhalt run --stats writes one object per device per sample after the vCPUs\'', async () => {
    const img = image('cli.img');
    const stats = join(dir, 'stats.ndjson');
    const r = await runCli(['run', '--guest', 'probe', '--memory', '64', '--rng', 'on', '--disk', img,
      '--append', `scenario=virtio-blk bench=1 ops=${OPS} seq_kib=${SEQ_KIB}`, '--stats', stats, '--stats-interval', '100']);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    const lines = readFileSync(stats, 'utf8').trim().split('\n').map((l) => JSON.parse(l));
    const vcpus = lines.filter((l) => 'vcpu' in l);
    const devices = lines.filter((l) => 'device' in l);
    expect(vcpus.length).toBeGreaterThan(0);
    expect(new Set(devices.map((d) => d.device))).toEqual(new Set(['rng', 'blk0']));
    // Each instant: the vCPU line, then its devices, at the same t.
    lines.forEach((l, i) => {
      if ('device' in l) expect(lines[i - 1].t).toBe(l.t);
    });
    const blk = devices.filter((d) => d.device === 'blk0');
    expect(blk.at(-1)).toMatchObject({ requests: REQUESTS, read_bytes: BYTES, bytes: BYTES, interval_ms: expect.any(Number) });
    expect(blk.some((d) => d.requests_per_s > 0 && d.bytes_per_s > 0)).toBe(true);
  }, 120_000);
});

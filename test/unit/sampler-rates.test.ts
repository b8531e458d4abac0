import { describe, expect, it } from 'vitest';
import { PassThrough } from 'node:stream';
import { BINARY_STATS_UNAVAILABLE } from '../../native/kvm/stats.ts';
import { COUNTER } from '../../electron/vmm/shared/control.ts';
import type { TelemetryEvent } from '../../electron/vmm/telemetry/fields.ts';
import { NdjsonStatsWriter } from '../../electron/vmm/telemetry/ndjson.ts';
import { RateCalculator } from '../../electron/vmm/telemetry/rates.ts';
import { Sampler, type SamplerTarget } from '../../electron/vmm/telemetry/sampler.ts';
import { SampleSeries } from '../../electron/vmm/telemetry/series.ts';
import { parseSchedstat, parseStatCpuTicks, parseStatusSwitches } from '../../electron/vmm/telemetry/thread-stats.ts';

const FIELDS = [
  'halt_exits', 'halt_successful_poll', 'halt_attempted_poll', 'halt_poll_success_ns', 'halt_poll_fail_ns',
  'halt_wait_ns', 'io_exits', 'host_cpu_ns',
];
const snap = (t: number, values: number[]) => ({ t, values: Float64Array.from(values) });

describe('rates from two snapshots', () => {
  const calc = new RateCalculator(FIELDS);

  it('computes per-second rates, ns deltas, hit rate and polling CPU from known deltas', () => {
    //                    halt  succ att  succ_ns  fail_ns  wait_ns      io  cpu_ns
    const a = snap(1000, [100, 10, 20, 1_000_000, 500_000, 10_000_000, 7, 40_000_000]);
    const b = snap(1500, [350, 40, 60, 21_000_000, 5_500_000, 260_000_000, 7, 90_000_000]);
    const r = calc.derive(2, a, b);
    expect(r).toMatchObject({ t: 1500, vcpu: 2, interval_ms: 500 });
    expect(r.halt_exits).toBe(350);
    expect(r.halt_exits_per_s).toBe(500); // 250 in 0.5 s
    expect(r.halt_successful_poll_per_s).toBe(60);
    expect(r.halt_attempted_poll_per_s).toBe(80);
    expect(r.poll_hit_rate).toBe(0.75); // 30 of 40
    expect(r.halt_poll_success_ns_delta).toBe(20_000_000);
    expect(r.halt_poll_fail_ns_delta).toBe(5_000_000);
    expect(r.poll_cpu_fraction).toBeCloseTo(0.05, 12); // 25 ms of polling in 500 ms
    expect(r.halt_wait_ns_delta).toBe(250_000_000);
    expect(r.io_exits_per_s).toBe(0);
    expect(r.host_cpu_ns_delta).toBe(50_000_000);
    expect(r.host_cpu_fraction).toBeCloseTo(0.1, 12);
  });

  it('gives a null hit rate when no poll was attempted', () => {
    const a = snap(0, [0, 5, 5, 0, 0, 0, 0, 0]);
    const b = snap(100, [10, 5, 5, 0, 0, 1000, 0, 0]);
    const r = calc.derive(0, a, b);
    expect(r.poll_hit_rate).toBeNull();
    expect(r.poll_cpu_fraction).toBe(0);
    expect(r.halt_exits_per_s).toBe(100);
  });

  it('gives null for unknown values and for counters that went backwards', () => {
    const a = snap(0, [50, 0, 0, 0, 0, 0, 0, NaN]);
    const b = snap(100, [10, 0, 0, 0, 0, 0, 0, NaN]);
    const r = calc.derive(0, a, b);
    expect(r.halt_exits).toBe(10);
    expect(r.halt_exits_per_s).toBeNull();
    expect(r.host_cpu_ns).toBeNull();
    expect(r.host_cpu_fraction).toBeNull();
  });

  it('prefers schedstat run time for host_cpu_fraction', () => {
    const c = new RateCalculator(['host_cpu_ns', 'host_run_ns']);
    expect(c.derive(0, snap(0, [0, 0]), snap(100, [10_000_000, 3_000_000])).host_cpu_fraction).toBeCloseTo(0.03, 12);
    expect(c.derive(0, snap(0, [0, NaN]), snap(100, [10_000_000, NaN])).host_cpu_fraction).toBeCloseTo(0.1, 12);
  });

  it('omits derived fields whose inputs this host lacks', () => {
    const r = new RateCalculator(['exits']).derive(0, snap(0, [1]), snap(1000, [3]));
    expect(r).toEqual({ t: 1000, vcpu: 0, interval_ms: 1000, exits: 3, exits_per_s: 2 });
  });
});

describe('the bounded series', () => {
  const calc = new RateCalculator(['exits']);

  it('keeps the newest `capacity` records per vCPU and yields them oldest first, vCPU 0 first', () => {
    const series = new SampleSeries(2, 1, 3);
    expect(series.records(calc)).toEqual([]);
    for (let i = 0; i < 10; i++) {
      const at = series.push(i * 100);
      series.data[at] = i * 10; // vCPU 0
      series.data[at + 1] = i * 20; // vCPU 1
    }
    expect(series.length).toBe(3);
    const recs = series.records(calc);
    expect(recs.map((r) => [r.t, r.vcpu, r.exits])).toEqual([
      [700, 0, 70], [700, 1, 140], [800, 0, 80], [800, 1, 160], [900, 0, 90], [900, 1, 180],
    ]);
    expect(recs[0]!.exits_per_s).toBe(100);
    expect(recs[1]!.exits_per_s).toBe(200);
    expect(series.oldestT).toBe(700);
    expect(series.latest(calc).map((r) => r.t)).toEqual([900, 900]);
    expect(series.data.length).toBe(4 * 3); // (capacity + 1) rows of t + 2 vCPUs × 1 field: fixed
  });
});

/** A VM whose host has no KVM binary stats: only the VMM's counters (and no threads to read). */
function fakeVm(cpus: number) {
  const counters = new Float64Array(cpus * 8);
  const target: SamplerTarget = {
    startedAt: 1000,
    control: { cpus, counter: (v, which) => counters[v * 8 + which]! },
    statsFds: () => ({ vm: -1, vcpus: Array(cpus).fill(-1) }),
    vcpuThreadIds: () => Array(cpus).fill(0),
  };
  let now = 1000;
  return { target, counters, clock: () => now, advance: (ms: number) => { now += ms; } };
}

describe('the sampler without KVM binary stats', () => {
  it('says so and keeps sampling the VMM\'s own counters', () => {
    const vm = fakeVm(2);
    const sampler = new Sampler(vm.target, { now: vm.clock, capacity: 4 });
    expect(sampler.kvmStats.available).toBe(false);
    expect(sampler.kvmStats.available || sampler.kvmStats.reason).toContain(BINARY_STATS_UNAVAILABLE);
    expect(sampler.fields).not.toContain('halt_exits');
    expect(sampler.fields).toContain('vmm_io_exits');
    expect(sampler.vmStats()).toBeNull();

    const events: TelemetryEvent[] = [];
    expect(sampler.sampleNow()).toEqual([]); // the baseline
    vm.counters[0 * 8 + COUNTER.io] = 50;
    vm.advance(100);
    sampler.sampleNow();
    sampler.markEvent('halt-poll-ns=0');
    sampler.subscribe((e) => events.push(e));
    expect(events[0]).toMatchObject({ type: 'backfill', markers: [{ t: 100, label: 'halt-poll-ns=0' }] });
    const backfill = events[0]!.type === 'backfill' ? events[0]!.records : [];
    expect(backfill.map((r) => [r.t, r.vcpu, r.vmm_io_exits_per_s])).toEqual([[100, 0, 500], [100, 1, 0]]);
    expect(backfill[0]!.host_cpu_ns).toBeNull(); // no thread to read

    vm.counters[1 * 8 + COUNTER.mmio] = 5;
    vm.advance(50);
    sampler.sampleNow();
    sampler.markEvent('restart');
    expect(events.slice(1).map((e) => e.type)).toEqual(['sample', 'marker']);
    const sample = events[1]!.type === 'sample' ? events[1]!.records : [];
    expect(sample.map((r) => [r.t, r.vcpu, r.interval_ms])).toEqual([[150, 0, 50], [150, 1, 50]]);
    expect(sample[1]!.vmm_mmio_exits_per_s).toBe(100);

    for (let i = 0; i < 10; i++) { vm.advance(100); sampler.sampleNow(); }
    expect(sampler.records().length).toBe(2 * 4); // capacity 4 per vCPU
    sampler.stop();
    expect(sampler.sampleNow()).toEqual([]);
    expect(sampler.cost().ticks).toBe(13);
  });

  it('writes NDJSON: one object per vCPU per sample, markers on their own lines', async () => {
    const vm = fakeVm(2);
    const sampler = new Sampler(vm.target, { now: vm.clock });
    const out = new PassThrough();
    let text = '';
    out.on('data', (b: Buffer) => { text += b.toString(); });
    const writer = new NdjsonStatsWriter(out);
    sampler.sampleNow();
    vm.advance(100);
    sampler.sampleNow();
    writer.attach(sampler); // backfill: one sample
    sampler.markEvent('cpu-pm=on');
    vm.counters[COUNTER.exits] = 3;
    vm.advance(100);
    sampler.sampleNow();
    sampler.stop();
    await writer.close();
    const lines = text.trim().split('\n').map((l) => JSON.parse(l));
    expect(lines.map((l) => [l.t, l.vcpu, l.marker])).toEqual([
      [100, 0, undefined], [100, 1, undefined], [100, undefined, 'cpu-pm=on'], [200, 0, undefined], [200, 1, undefined],
    ]);
    expect(lines[3].vmm_exits).toBe(3);
    expect(lines[3].vmm_exits_per_s).toBe(30);
  });
});

describe('/proc thread parsing', () => {
  it('reads utime+stime even when the thread name holds spaces and parentheses', () => {
    const line = '4242 (vcpu (0) x) S 1 2 3 0 -1 4194560 100 0 0 0 123 45 0 0 20 0 1 0 99 0 0\n';
    expect(parseStatCpuTicks(Buffer.from(line))).toBe(168);
    expect(parseStatCpuTicks(Buffer.from('garbage'))).toBeNaN();
  });

  it('reads context switches and schedstat', () => {
    const status = Buffer.from('Name:\tnode\nState:\tS (sleeping)\nvoluntary_ctxt_switches:\t1234\nnonvoluntary_ctxt_switches:\t56\n');
    expect(parseStatusSwitches(status)).toEqual([1234, 56]);
    expect(parseStatusSwitches(Buffer.from('Name:\tx\n'))).toEqual([NaN, NaN]);
    expect(parseSchedstat(Buffer.from('900060546 142770454 143\n'))).toEqual([900060546, 142770454]);
  });
});

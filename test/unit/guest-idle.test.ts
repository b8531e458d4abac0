// The guest's own idle and steal time on the VM page (renderer/src/charts/guest-idle.ts): the
// Linux agent's per-vCPU `gidle` lines become shares of each interval (a long halt spread back,
// never above 100 %) and rates, a guest's nonsense is dropped, the ready line's cpuidle facts
// become the chart's note, and each empty chart says why it is empty.
import { describe, expect, it } from 'vitest';
import type { VmRecord } from '../../electron/service/api.ts';
import { MAX_CPUS } from '../../electron/vmm/config/limits.ts';
import { GUEST_IDLE_COLUMNS, GuestIdleRows, guestIdleFacts, guestIdleSeries, stealSeries } from '../../renderer/src/charts/guest-idle.ts';
import { guestChartEmpty, guestIdleNote } from '../../renderer/src/charts/guest-idle-text.ts';
import { binRows } from '../../renderer/src/charts/bins.ts';
import { metricsBackfill } from '../../electron/service/vm-supervisor.ts';

const S = 1e9;
const T0 = 1.8e9; // epoch seconds
const READY = { nproc: 2, cpus_possible: 2, kvm: 1, kvm_features: 0x1ffb, kvm_hints: 0, pv_unhalt: 1, pv_spinlocks: 1, pv_spinlocks_reason: 0, kvmclock: 1 };
const line = (cpu: number, f: Record<string, number> = {}) => ({
  cpu, interval_ns: S, cpuidle: 1, poll_count: 0, poll_ns: 0, halt_count: 0, halt_ns: 0, steal_ns: 0, ...f,
});
const col = (g: GuestIdleRows, key: string) => Array.from(g.rows.col(key).subarray(0, g.rows.length));

describe('the guest idle rows', () => {
  it('puts a round\'s lines in one row: shares of the interval and entries per second', () => {
    const g = new GuestIdleRows();
    expect(g.add(line(0, { poll_count: 400, poll_ns: 0.1 * S, halt_count: 100, halt_ns: 0.6 * S, steal_ns: 0.02 * S }), T0)).toBe(true);
    expect(g.add(line(1, { halt_count: 50, halt_ns: 0.9 * S }), T0 + 0.003)).toBe(true);
    expect(g.rows.length).toBe(1);
    expect(g.add(line(0, { interval_ns: 0.5 * S, poll_count: 10, poll_ns: 0.25 * S }), T0 + 0.5)).toBe(true);
    expect(g.rows.length).toBe(2);
    expect(col(g, 'guest_poll_share#0')).toEqual([0.1, 0.5]);
    expect(col(g, 'guest_halt_share#0')).toEqual([0.6, 0]);
    expect(col(g, 'steal_share#0')).toEqual([0.02, 0]);
    expect(col(g, 'guest_polls_per_s#0')).toEqual([400, 20]);
    expect(col(g, 'guest_halts_per_s#0')).toEqual([100, 0]);
    expect(col(g, 'guest_halt_share#1')[0]).toBeCloseTo(0.9, 12);
    expect(col(g, 'guest_halts_per_s#1')[0]).toBe(50);
  });

  it('spreads a halt that ends after several intervals back over them, each at most 100 %', () => {
    const g = new GuestIdleRows();
    for (let i = 0; i < 4; i++) g.add(line(0), T0 + i);
    g.add(line(0, { halt_ns: 2.5 * S, halt_count: 1 }), T0 + 4);
    expect(col(g, 'guest_halt_share#0')).toEqual([0, 0, 0.5, 1, 1]);
  });

  it('keeps no poll or halt share where the vCPU has no cpuidle driver, and no steal without kvm-steal-time', () => {
    const g = new GuestIdleRows();
    g.add(line(0, { cpuidle: 0, steal_ns: 0.1 * S }), T0);
    expect(g.rows.cols.has('guest_poll_share#0')).toBe(false);
    expect(g.rows.cols.has('guest_halt_share#0')).toBe(false);
    expect(col(g, 'steal_share#0')).toEqual([0.1]);
    g.facts = guestIdleFacts('ready', { ...READY, kvm_features: 0x1ffb & ~(1 << 5) });
    g.add(line(1, { steal_ns: 0.1 * S }), T0);
    expect(g.rows.cols.has('steal_share#1')).toBe(false);
  });

  it('ignores what no guest can mean: no interval, bad cpus, non-numbers, negative and absurd values', () => {
    const g = new GuestIdleRows();
    for (const bad of [
      line(0, { interval_ns: 0 }), line(0, { interval_ns: -S }), line(0, { interval_ns: NaN }), line(0, { interval_ns: Infinity }),
      line(0, { interval_ns: 1e20 }), line(-1), line(0.5), line(MAX_CPUS), line(Number.MAX_VALUE),
      { ...line(0), cpu: '0' }, { ...line(0), interval_ns: '1000000000' }, { poll_ns: 5 },
    ]) expect(g.add(bad as Record<string, unknown>, T0), JSON.stringify(bad)).toBe(false);
    expect(g.rows.length).toBe(0);
    expect(g.rows.cols.size).toBe(0);
    // A believable line keeps its good fields and drops the rest.
    g.add({ ...line(0), poll_ns: -5, halt_ns: 'x', steal_ns: 1e30, poll_count: 1.5, halt_count: 2 * S } as Record<string, unknown>, T0);
    expect(g.rows.length).toBe(1);
    for (const k of ['guest_poll_share#0', 'guest_halt_share#0', 'steal_share#0', 'guest_polls_per_s#0', 'guest_halts_per_s#0']) {
      expect(Number.isNaN(g.rows.col(k)[0]!), k).toBe(true);
    }
    for (const c of g.rows.cols.values()) for (let i = 0; i < g.rows.length; i++) expect(Number.isFinite(c[i]!) || Number.isNaN(c[i]!)).toBe(true);
  });

  it('breaks the line where the probe restarted or stopped for a while: nothing joins or spreads across it', () => {
    const g = new GuestIdleRows();
    g.add(line(0), T0);
    g.add(line(0), T0 + 1);
    g.breakLine();
    g.add(line(0, { halt_ns: 3 * S }), T0 + 1.2);
    expect(col(g, 'guest_halt_share#0')).toEqual([0, 0, NaN, 1]);
    // Ten seconds without lines (a probe off): a gap row of its own.
    g.add(line(0), T0 + 12);
    expect(g.rows.length).toBe(6);
    expect(Number.isNaN(g.rows.col('guest_interval_ns#0')[4]!)).toBe(true);
    const binned = binRows(g.rows.x, [g.rows.col('guest_halt_share#0')], 0, g.rows.length, 1);
    expect(binned.mean[0]!.filter((v) => v === null).length).toBeGreaterThanOrEqual(2);
  });
});

describe('the guest idle facts and texts', () => {
  it('reads the ready line\'s cpuidle set-up and kvm-steal-time', () => {
    expect(guestIdleFacts('ready', { ...READY, haltpoll: 1, cpuidle: 1, haltpoll_gov: 0, guest_halt_poll_ns: -1 }))
      .toEqual({ cpuidle: true, haltpoll: true, haltpollGov: false, guestHaltPollNs: null, stealTime: true });
    expect(guestIdleFacts('info', { ...READY, haltpoll: 0, cpuidle: 0, haltpoll_gov: 0, guest_halt_poll_ns: 200000, kvm_features: 0 }))
      .toEqual({ cpuidle: false, haltpoll: false, haltpollGov: false, guestHaltPollNs: 200000, stealTime: false });
    // An agent from before the gidle lines says only haltpoll.
    expect(guestIdleFacts('ready', { ...READY, haltpoll: 0 })?.cpuidle).toBeNull();
    expect(guestIdleFacts('ready', { ...READY, haltpoll: 1 })?.cpuidle).toBe(true);
    expect(guestIdleFacts('ready', { ...READY, kvm: 0 })?.stealTime).toBe(false);
    expect(guestIdleFacts('gidle', READY)).toBeNull();
  });

  it('says the guest\'s driver and governor, and whether guest_halt_poll_ns applies', () => {
    const facts = (f: Record<string, number>) => guestIdleFacts('ready', { ...READY, ...f });
    expect(guestIdleNote(facts({ haltpoll: 1, cpuidle: 1, haltpoll_gov: 1, guest_halt_poll_ns: 200000 })))
      .toBe('guest: cpuidle-haltpoll driver, haltpoll governor, guest_halt_poll_ns 200 µs');
    expect(guestIdleNote(facts({ haltpoll: 1, cpuidle: 1, haltpoll_gov: 0, guest_halt_poll_ns: -1 })))
      .toBe('guest: cpuidle-haltpoll driver, the kernel\'s default governor (this kernel has no haltpoll governor: guest_halt_poll_ns does not apply)');
    expect(guestIdleNote(facts({ haltpoll: 0, cpuidle: 1, haltpoll_gov: 0, guest_halt_poll_ns: 200000 })))
      .toMatch(/^guest: a cpuidle driver other than cpuidle-haltpoll, .*not the haltpoll governor/);
    expect(guestIdleNote(facts({ haltpoll: 0, cpuidle: 0, haltpoll_gov: 0, guest_halt_poll_ns: -1 }))).toMatch(/^guest: no cpuidle driver/);
    expect(guestIdleNote(facts({ haltpoll: 0 }))).toBeUndefined();
    expect(guestIdleNote(null)).toBeUndefined();
  });

  it('says why a chart is empty: no agent (the probe guest), no cpuidle driver, no steal time, or waiting', () => {
    const vm = (guest: string, state: string, agent?: string) => ({
      config: { guest, disks: [] }, status: { id: 'x', state, ...(agent ? { agent } : {}) },
    }) as unknown as Pick<VmRecord, 'config' | 'status'>;
    const facts = (f: Record<string, number>) => guestIdleFacts('ready', { ...READY, haltpoll: 0, cpuidle: 1, haltpoll_gov: 0, guest_halt_poll_ns: -1, ...f });
    expect(guestChartEmpty('guest-idle', vm('probe', 'running'), null)).toMatch(/^no guest idle: this VM has no Unhalt agent/);
    expect(guestChartEmpty('steal', vm('probe', 'running'), null)).toMatch(/^no steal time: this VM has no Unhalt agent/);
    expect(guestChartEmpty('guest-idle', vm('linux', 'running', 'probing'), facts({ cpuidle: 0 })))
      .toBe('the guest kernel idles without a cpuidle driver: boot it with cpuidle_haltpoll.force=1 (the VM\'s guest-halt-poll-ns knob) to see its states');
    expect(guestChartEmpty('steal', vm('linux', 'running', 'probing'), facts({ cpuidle: 0 }))).toMatch(/^waiting for the agent's probe/);
    expect(guestChartEmpty('steal', vm('linux', 'running', 'probing'), facts({ kvm_features: 0 }))).toMatch(/no kvm-steal-time/);
    expect(guestChartEmpty('guest-idle', vm('linux', 'running', 'probing'), guestIdleFacts('ready', { ...READY, haltpoll: 0 }))).toMatch(/older than the app/);
    expect(guestChartEmpty('guest-idle', vm('linux', 'stopped'), null)).toMatch(/start the VM/);
    expect(guestChartEmpty('guest-idle', vm('linux', 'running'), null)).toMatch(/has not reported on ttyS1/);
  });
});

describe('what the store hands on, and the charts draw', () => {
  const metric = (t: number, event: string, fields: Record<string, number>) => ({ t, event, fields });
  const vcpus = { vcpuSeries: () => 2 };
  /** The store's path for a guest metric (telemetry-store.ts addMetric): epoch ms in, epoch s on the rows. */
  const feed = (g: GuestIdleRows, m: ReturnType<typeof metric>) => g.addMetric(m.event, m.fields, m.t / 1000);

  it('keeps gidle lines and the ready facts, gives the charts a series per vCPU from them, and clears them', () => {
    const g = new GuestIdleRows();
    expect(feed(g, metric(T0 * 1000, 'ready', { ...READY, haltpoll: 1, cpuidle: 1, haltpoll_gov: 1, guest_halt_poll_ns: 200000 }))).toBe(true);
    expect(feed(g, metric(T0 * 1000 + 10, 'probe', { on: 1, interval_ms: 1000, rounds: 100 }))).toBe(false);
    expect(feed(g, metric(T0 * 1000 + 20, 'ctxprobe', { rounds: 100, p50_ns: 9000, p99_ns: 20000, max_ns: 30000 }))).toBe(false);
    for (let i = 1; i <= 3; i++) {
      for (const cpu of [0, 1]) expect(feed(g, metric((T0 + i) * 1000 + cpu, 'gidle', line(cpu, { poll_ns: 0.2 * S, halt_ns: 0.7 * S, steal_ns: 0.01 * S })))).toBe(true);
    }
    expect(g.facts?.haltpollGov).toBe(true);
    expect(g.rows.length).toBe(3);
    expect(g.rows.x[2]).toBe(T0 + 3); // a round's row is at its first line
    expect(guestIdleSeries(vcpus).map((s) => s.label)).toEqual(['vCPU 0 polling', 'vCPU 0 halted', 'vCPU 1 polling', 'vCPU 1 halted']);
    expect(stealSeries(vcpus).map((s) => s.label)).toEqual(['vCPU 0', 'vCPU 1']);
    // The charts' series are columns the rows have, each value a share within 0-100 %.
    for (const s of [...guestIdleSeries(vcpus), ...stealSeries(vcpus)]) {
      const c = g.rows.cols.get(s.key);
      expect(c, s.key).toBeDefined();
      const values = Array.from(c!.subarray(0, g.rows.length));
      expect(values.every((v) => v >= 0 && v <= 1), `${s.key}: ${values}`).toBe(true);
    }
    const names = new Set([...g.rows.cols.keys()].map((k) => k.split('#')[0]));
    expect([...names].sort()).toEqual([...GUEST_IDLE_COLUMNS, 'guest_interval_ns'].sort());

    g.clear();
    expect(g.rows.length).toBe(0);
    expect(g.facts).toBeNull();
  });

  it('gets the ready facts on a page opened after the probe lines pushed the ready line out of the kept metrics', () => {
    const ready = metric(T0 * 1000, 'ready', { ...READY, haltpoll: 0, cpuidle: 0, haltpoll_gov: 0, guest_halt_poll_ns: -1 });
    const kept = Array.from({ length: 1000 }, (_, i) => metric((T0 + 1 + i / 2) * 1000, 'gidle', line(i % 2, { cpuidle: 0 })));
    const backfill = metricsBackfill(kept, ready);
    expect(backfill[0]).toBe(ready);
    expect(metricsBackfill([ready, ...kept], ready).filter((m) => m === ready)).toHaveLength(1);
    expect(metricsBackfill(kept, undefined)).toEqual(kept);
    const g = new GuestIdleRows();
    for (const m of backfill) feed(g, m);
    expect(g.facts?.cpuidle).toBe(false);
    expect(g.rows.cols.has('guest_halt_share#0')).toBe(false);
    expect(g.rows.cols.has('steal_share#1')).toBe(true);
  });
});

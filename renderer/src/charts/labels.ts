// Series labels that say what a figure is of (pure; unit-tested without a browser).
import { si } from '../lib/format.ts';

/**
 * "ipi p99 of 50 (= max)": a percentile says how many measurements it is of; one that cannot be
 * told from the maximum with that many (p99 of fewer than 100) says so.
 */
export function latencyLabel(key: string, count: number | undefined): string {
  const base = key.replace(/_(ns|us)$/, '');
  const p = /(?:^|[ _])p(\d{1,3})$/.exec(base);
  if (!p || !count) return base;
  // The guest's nearest rank (native/guest/probe/stats.c): ceil(count * P / 100).
  const pct = Number(p[1]);
  const rank = Math.floor((count * pct + 99) / 100);
  return `${base} of ${count}${pct > 50 && rank >= count ? ' (= max)' : ''}`;
}


/**
 * The guest events whose latencies the Guest latency chart plots: wake-up and hand-off times that
 * halt polling moves (the probe's ipi, timer and spinlock scenarios; the Linux agent's ctx, pipe and
 * its live ctxprobe). Device scenarios report latencies too (virtio_rng's notify_p50_ns, the net
 * round trip): they are the device's, not a wake-up's, and stay off the chart.
 */
export const LATENCY_EVENTS: ReadonlySet<string> = new Set(['ipi', 'timer', 'spinlock', 'ctx', 'ctxprobe', 'pipe']);

/**
 * A latency field a guest reports: percentiles and means (`p50_ns`, `handoff_p99_ns`, `mean_ns`,
 * `max_us`) and per-operation times (`per_op_ns`, `per_switch_ns`); not totals or elapsed times.
 */
const LATENCY_FIELD = /(^|_)(p\d{1,3}|avg|mean|median|min|max|lat|latency|per_[a-z]+)(_[a-z0-9]+)?_(ns|us)$/;
const NOT_LATENCY = /^(total|elapsed)_/;

/** Whether field `key` of guest event `event` is a point of the Guest latency chart. */
export function isChartedLatency(event: string, key: string): boolean {
  return LATENCY_EVENTS.has(event) && LATENCY_FIELD.test(key) && !NOT_LATENCY.test(key);
}

/** A device's label on the charts: its board name, and a disk's name in the guest (vda, vdb...). */
export function deviceLabel(name: string): string {
  const disk = /^blk(\d+)$/.exec(name);
  return disk ? `${name} (vd${String.fromCharCode(97 + Number(disk[1]))})` : name;
}

/** "blk0 (vda): 432 requests, 3.74 MB, 0 drops, 0 errors · rng: …": each device's newest totals. */
export function deviceTotalsText(names: readonly string[], totals: Readonly<Record<string, Partial<Record<string, number>>>>): string {
  const n = (v: number | undefined) => (v === undefined ? '—' : v < 1000 ? String(v) : si(v));
  return names.map((d) => {
    const x = totals[d] ?? {};
    return `${deviceLabel(d)}: ${n(x.requests)} requests, ${x.bytes === undefined ? '—' : si(x.bytes, 'B')}, ${n(x.drops)} drops, ${n(x.errors)} errors`;
  }).join(' · ');
}

// QEMU's KVM stats through QMP (query-stats, QEMU 7.1+), per vCPU under the names our own sampler
// uses: they are the same KVM binary stats, so a watched VM's records read like ours. The schema
// (query-stats-schemas) says which stats are counts, states or histograms and their unit; only
// the stats our records carry are kept, in our column order.
import { INSTANT_COUNTERS, KVM_VCPU_COUNTERS, KVM_VCPU_HISTOGRAMS } from '../vmm/telemetry/fields.ts';
import { QmpError, type QmpClient } from './qmp-client.ts';

interface SchemaEntry {
  name: string;
  type: string;
  unit?: string;
  base?: number;
  exponent?: number;
}

/** One vCPU at one read: counters in `fields` order (NaN: absent this time), histograms cumulative. */
export interface VcpuStatsRead {
  vcpu: number;
  values: Float64Array;
  hists: Map<string, number[]>;
}

export interface QemuStatsPlan {
  /** The counters both QEMU's KVM and our records have, in our order. */
  fields: readonly string[];
  /** Multiplier to our unit (ns for `*_ns`), from the schema's base and exponent. */
  scale: readonly number[];
  /** KVM's log2 halt histograms QEMU reports (the same buckets as ours). */
  histograms: readonly string[];
}

/** What the schema offers for the vCPU target, reduced to what our records carry. */
export async function planFromSchema(qmp: QmpClient): Promise<QemuStatsPlan> {
  const providers = await qmp.execute('query-stats-schemas', { provider: 'kvm' }) as { provider: string; target: string; stats: SchemaEntry[] }[];
  const vcpu = providers.find((p) => p.provider === 'kvm' && p.target === 'vcpu');
  if (!vcpu) throw new QmpError(`QEMU ${qmp.version} on ${qmp.path} reports no KVM vCPU stats (query-stats needs QEMU 7.1 or later running with -accel kvm)`);
  const byName = new Map(vcpu.stats.map((s) => [s.name, s]));
  const fields: string[] = [];
  const scale: number[] = [];
  for (const name of KVM_VCPU_COUNTERS) {
    const s = byName.get(name);
    const wanted = INSTANT_COUNTERS.has(name) ? 'instant' : 'cumulative';
    if (!s || s.type !== wanted) continue;
    fields.push(name);
    scale.push(name.endsWith('_ns') ? toNs(s) : 1);
  }
  // A linear histogram would have other buckets than ours: left out rather than misread.
  const histograms = KVM_VCPU_HISTOGRAMS.filter((h) => byName.get(h)?.type === 'log2-histogram');
  return { fields, scale, histograms };
}

/** A time stat's multiplier to ns (KVM's are 10^-9 s already). */
function toNs(s: SchemaEntry): number {
  if (s.unit !== 'seconds' || (s.base ?? 10) !== 10) return Number.NaN;
  return 10 ** ((s.exponent ?? 0) + 9);
}

/** qom-path -> cpu-index, from query-cpus-fast (query-stats names vCPUs by their QOM path). */
export async function vcpuIndexByPath(qmp: QmpClient): Promise<Map<string, number>> {
  const cpus = await qmp.execute('query-cpus-fast') as { 'qom-path': string; 'cpu-index': number }[];
  return new Map(cpus.map((c) => [c['qom-path'], c['cpu-index']]));
}

/** One query-stats of every vCPU, mapped to cpu-index order; `paths` is refreshed on an unknown vCPU. */
export async function readVcpuStats(qmp: QmpClient, plan: QemuStatsPlan, paths: Map<string, number>): Promise<VcpuStatsRead[]> {
  const names = [...plan.fields, ...plan.histograms];
  const results = await qmp.execute('query-stats', { target: 'vcpu', providers: [{ provider: 'kvm', names }] }) as
    { provider: string; 'qom-path'?: string; stats: { name: string; value: unknown }[] }[];
  if (results.some((r) => r['qom-path'] !== undefined && !paths.has(r['qom-path']))) {
    const fresh = await vcpuIndexByPath(qmp);
    paths.clear();
    for (const [k, v] of fresh) paths.set(k, v);
  }
  const out: VcpuStatsRead[] = [];
  for (const r of results) {
    const vcpu = r['qom-path'] === undefined ? undefined : paths.get(r['qom-path']);
    if (r.provider !== 'kvm' || vcpu === undefined) continue;
    out.push(mapVcpu(vcpu, r.stats, plan));
  }
  return out.sort((a, b) => a.vcpu - b.vcpu);
}

/** One vCPU's stats list into our columns; booleans (blocking) count as 0/1. Pure. */
export function mapVcpu(vcpu: number, stats: readonly { name: string; value: unknown }[], plan: QemuStatsPlan): VcpuStatsRead {
  const values = new Float64Array(plan.fields.length).fill(Number.NaN);
  const hists = new Map<string, number[]>();
  const column = new Map(plan.fields.map((f, i) => [f, i]));
  for (const s of stats) {
    const i = column.get(s.name);
    if (i !== undefined) {
      const v = typeof s.value === 'boolean' ? Number(s.value) : s.value;
      if (typeof v === 'number') values[i] = v * plan.scale[i]!;
    } else if (plan.histograms.includes(s.name) && Array.isArray(s.value) && s.value.every((x) => typeof x === 'number')) {
      hists.set(s.name, s.value as number[]);
    }
  }
  return { vcpu, values, hists };
}

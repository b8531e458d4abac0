// An experiment's summary: its runs as rows (medians, ratios, counters) per configuration and
// VMM, and the runs that gave no value. Pure (the verdicts on the rows are stats.ts's).
import type { ExperimentResultRow, RunFailure, RunRecord } from './types.ts';
import { median } from './stats.ts';
import type { Workload } from './workloads.ts';

/** The config name of the bare-metal rows. */
export const BARE_CONFIG = 'bare';

/** The failed runs, one line each (the error text is one line already; newlines would break the formats). */
export function failuresOf(raw: readonly RunRecord[]): RunFailure[] {
  return raw.filter((r) => r.value === null || r.error)
    .map((r) => ({ config: r.config, runner: r.runner, run: r.run, error: (r.error ?? 'no value').replace(/\s*\n\s*/g, ' ') }));
}

function medianOrNull(xs: number[]): number | null {
  return xs.length ? median(xs) : null;
}

function mean(xs: number[]): number | null {
  return xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : null;
}

export function summarize(configs: string[], runners: readonly string[], raw: RunRecord[], work: Pick<Workload, 'unit' | 'secondary'>): ExperimentResultRow[] {
  const rows: ExperimentResultRow[] = [];
  for (const runner of runners) {
    // The bare-metal reference has one row of its own.
    for (const config of runner === 'bare' ? [BARE_CONFIG] : configs) {
      const all = raw.filter((r) => r.config === config && r.runner === runner);
      // Counters of failed runs would mix a boot that hung into the figures: successful runs only.
      const recs = all.filter((r) => r.value !== null && Number.isFinite(r.value));
      const values = recs.map((r) => r.value!);
      // A config without any value has no row; ExperimentResult.failures says why.
      if (!values.length) continue;
      const numbers = (k: 'haltExitsPerS' | 'pollHitRate' | 'haltExits' | 'hypercalls') => recs.map((r) => r[k]).filter((v): v is number => typeof v === 'number');
      const row: ExperimentResultRow = {
        config, runner, unit: work.unit, median: median(values), min: Math.min(...values), max: Math.max(...values),
        ratioToFirst: null, ratioToReference: null,
        haltExitsPerS: mean(numbers('haltExitsPerS')),
        pollHitRate: mean(numbers('pollHitRate')),
        runs: values,
        haltExits: medianOrNull(numbers('haltExits')),
        hypercalls: medianOrNull(numbers('hypercalls')),
        failedRuns: all.length - recs.length,
      };
      const sec = work.secondary;
      if (sec) {
        const xs = recs.map((r) => sec.value({ event: '', fields: r.fields }))
          .filter((v) => Number.isFinite(v));
        if (xs.length) row.secondary = { unit: sec.unit, median: median(xs) };
      }
      rows.push(row);
    }
  }
  const bare = rows.find((r) => r.runner === 'bare');
  for (const row of rows) {
    const first = rows.find((r) => r.runner === row.runner);
    if (first && first.median !== 0) row.ratioToFirst = row.median / first.median;
    // The reference: QEMU on the same config where there is one, else the bare-metal row.
    const ref = row.runner === 'unhalt' ? rows.find((r) => r.runner === 'qemu' && r.config === row.config) ?? bare
      : row.runner === 'qemu' ? bare : undefined;
    if (ref && ref.median !== 0) row.ratioToReference = row.median / ref.median;
  }
  return rows;
}

// An experiment's halt distributions side by side: per configuration, KVM's halt-wait and poll
// histograms summed over its runs (RunRecord.haltHists), on the same buckets, so a change of
// knob shows where the wake-ups moved, not only the medians.
import type { ExperimentDetail } from '../../../../electron/service/api.ts';
import { HIST_NAMES, histTotal, type HistCounts } from '../../../../electron/vmm/telemetry/hist-bins.ts';
import { HistBars, POLL_SERIES, WAIT_SERIES } from '../../charts/HistBars.tsx';
import { fmtDuration, histBars, histMedianNs } from '../../charts/hist-view.ts';

/** Each configuration's histograms summed over its runs under our VMM (QEMU's and bare runs have none). */
export function histogramsByConfig(raw: ExperimentDetail['raw']): { config: string; runs: number; counts: HistCounts }[] {
  const out = new Map<string, { config: string; runs: number; counts: HistCounts }>();
  for (const r of raw ?? []) {
    if (r.runner !== 'unhalt' || !r.haltHists) continue;
    const e = out.get(r.config) ?? { config: r.config, runs: 0, counts: {} };
    e.runs++;
    for (const name of HIST_NAMES) {
      const c = r.haltHists[name];
      if (!c) continue;
      const into = e.counts[name] ??= [];
      c.forEach((n, i) => { into[i] = (into[i] ?? 0) + n; });
    }
    out.set(r.config, e);
  }
  return [...out.values()];
}

export function HistCompare({ detail }: { detail: ExperimentDetail }) {
  const groups = histogramsByConfig(detail.raw);
  if (!groups.length) return null;
  return (
    <section className="hist-compare" aria-label="Halt distributions per configuration" data-testid="hist-compare">
      <h3>Halt distributions</h3>
      <p className="muted small">KVM's histograms summed over each configuration's runs: how long halted vCPUs slept, and how long polls ran.</p>
      <div className="hist-compare-grid">
        {groups.map((g) => {
          const median = histMedianNs(g.counts.halt_wait_hist);
          const bars = histBars(g.counts);
          return (
            <div key={g.config} className="chart" data-config={g.config} data-wait-total={histTotal(g.counts.halt_wait_hist)}
              data-success-total={histTotal(g.counts.halt_poll_success_hist)} data-fail-total={histTotal(g.counts.halt_poll_fail_hist)}>
              <div className="chart-title">{g.config}</div>
              <p className="chart-readout">
                {histTotal(g.counts.halt_wait_hist)} slept (median {median === null ? '–' : fmtDuration(median)}) ·{' '}
                {histTotal(g.counts.halt_poll_success_hist)} polls caught, {histTotal(g.counts.halt_poll_fail_hist)} missed · {g.runs} run{g.runs === 1 ? '' : 's'}
              </p>
              {histTotal(g.counts.halt_wait_hist) > 0 && <HistBars title="Halt wait" bars={bars} series={WAIT_SERIES} pollNs={null} />}
              {histTotal(g.counts.halt_poll_success_hist) + histTotal(g.counts.halt_poll_fail_hist) > 0
                && <HistBars title="Poll duration" bars={bars} series={POLL_SERIES} pollNs={null} />}
            </div>
          );
        })}
      </div>
    </section>
  );
}

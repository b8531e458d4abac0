// KVM's halt histograms of one VM over the chart window: how long halted vCPUs slept (the
// distribution that decides whether polling can help), with the VM's halt-poll-ns drawn across
// it, and how long the polls that caught or missed a wake-up ran. Redrawn at most once a second.
import { useEffect, useState } from 'react';
import type { HistCounts } from '../../../electron/vmm/telemetry/hist-bins.ts';
import { histTotal } from '../../../electron/vmm/telemetry/hist-bins.ts';
import { fmtDuration, histBars, histMedianNs } from './hist-view.ts';
import { HistBars as Bars, POLL_SERIES, WAIT_SERIES } from './HistBars.tsx';
import { telemetryFor } from './telemetry-store.ts';
import { HaltPollAdvice } from './HaltPollAdvice.tsx';
import type { HaltPollParams } from '../../../electron/experiments/halt-poll-model.ts';

const REDRAW_MS = 1000;

export function HaltHistograms({ vmId, vcpus, windowSec, pollNs, params, onApply, unavailable }: {
  vmId: string;
  vcpus: number;
  windowSec: number;
  /** The VM's halt-poll-ns in effect now (null: not known). */
  pollNs: number | null;
  /** The host KVM's grow / shrink parameters, for the prediction. */
  params: HaltPollParams;
  /** Sets halt-poll-ns on the running VM (the prediction's suggestions); absent when it cannot. */
  onApply?: (ns: number) => void;
  /** Why this host has no histograms, when it has none. */
  unavailable?: string;
}) {
  const [vcpu, setVcpu] = useState<number | undefined>(undefined);
  // What is drawn, with the vCPU it is of: a pick shows as picked at once, its counts a read later.
  // spanSec: the seconds of the window that have histograms (a VM started 20 s ago has 20 s of a minute).
  const [shown, setShown] = useState<{ vcpu: number | undefined; counts: HistCounts; spanSec: number }>({ vcpu: undefined, counts: {}, spanSec: 0 });
  const { counts, spanSec } = shown;
  useEffect(() => {
    const t = telemetryFor(vmId);
    let timer: ReturnType<typeof setTimeout> | undefined;
    let last = 0;
    const read = () => {
      timer = undefined;
      last = performance.now();
      const bins = t.histograms.all();
      const end = Math.max(t.newestX(), ...bins.slice(-1).map((b) => b.t + 1));
      const first = bins.find((b) => b.t + 1 > end - windowSec)?.t;
      setShown({ vcpu, counts: t.histograms.sum(end - windowSec, vcpu), spanSec: first === undefined ? 0 : Math.min(windowSec, end - first) });
    };
    read();
    const off = t.listen(() => {
      if (!timer) timer = setTimeout(read, Math.max(0, last + REDRAW_MS - performance.now()));
    });
    return () => {
      off();
      if (timer) clearTimeout(timer);
    };
  }, [vmId, windowSec, vcpu]);

  const bars = histBars(counts);
  const waits = histTotal(counts.halt_wait_hist);
  const caught = histTotal(counts.halt_poll_success_hist);
  const missed = histTotal(counts.halt_poll_fail_hist);
  const median = histMedianNs(counts.halt_wait_hist);
  const window = windowSec >= 60 ? `${windowSec / 60} min` : `${windowSec} s`;
  const summary = unavailable ?? (waits + caught + missed === 0
    ? `no halts in the last ${window}${shown.vcpu === undefined ? '' : ` on vCPU ${shown.vcpu}`}`
    : `last ${window}${shown.vcpu === undefined ? ', all vCPUs' : `, vCPU ${shown.vcpu}`}: ${waits} halts slept (median ${median === null ? '–' : fmtDuration(median)}); `
      + `polls: ${caught} caught a wake-up, ${missed} missed`);
  return (
    <section className="chart halt-hists" aria-labelledby={`hh-${vmId}`} data-testid="halt-histograms"
      data-wait-total={waits} data-success-total={caught} data-fail-total={missed} data-vcpu={shown.vcpu ?? 'all'}
      data-poll-ns={pollNs ?? ''}>
      <div className="chart-head">
        <span className="chart-title" id={`hh-${vmId}`}>Halt wait and polling: KVM's histograms</span>
        <div className="panel-actions" role="group" aria-label="vCPU shown">
          <button type="button" className="btn small" aria-pressed={vcpu === undefined} onClick={() => setVcpu(undefined)}>All vCPUs</button>
          {vcpus > 1 && Array.from({ length: vcpus }, (_, v) => (
            <button key={v} type="button" className="btn small" aria-pressed={vcpu === v} onClick={() => setVcpu(v)}>vCPU {v}</button>
          ))}
        </div>
      </div>
      <p className="chart-help">
        How long halted vCPUs slept (halts that blocked, from the end of polling to the wake-up), and how long
        polls ran that caught or missed a wake-up. A wake-up within the dashed halt-poll-ns line can be caught by polling.
      </p>
      <p className="chart-readout" data-testid="halt-hist-summary">{summary}</p>
      <Bars title="Halt wait (share of halts that slept)" bars={bars} series={WAIT_SERIES} pollNs={pollNs} />
      <Bars title="Poll duration (share of polls)" bars={bars}
        series={POLL_SERIES} pollNs={pollNs} />
      {!unavailable && spanSec > 0 && (
        <HaltPollAdvice counts={counts} pollNs={pollNs} params={params} onApply={onApply}
          seconds={spanSec} vcpus={shown.vcpu === undefined ? vcpus : 1} />
      )}
    </section>
  );
}

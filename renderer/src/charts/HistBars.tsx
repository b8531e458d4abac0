// Bars of KVM's log2 halt histograms (hist-view.ts), one series or several side by side per
// bucket, as shares of their total, with a halt-poll-ns drawn across them where one is given.
import { barPosition, fmtDuration, type HistBar } from './hist-view.ts';

const W = 560;
const H = 150;
const PAD = { left: 36, right: 8, top: 10, bottom: 30 };

export type HistSeries = { key: 'wait' | 'success' | 'fail'; cls: string; label: string };
export const WAIT_SERIES: HistSeries[] = [{ key: 'wait', cls: 'hh-wait', label: 'slept' }];
export const POLL_SERIES: HistSeries[] = [{ key: 'success', cls: 'hh-success', label: 'caught' }, { key: 'fail', cls: 'hh-fail', label: 'missed' }];

export function HistBars({ title, bars, series, pollNs }: {
  title: string;
  bars: readonly HistBar[];
  series: readonly HistSeries[];
  pollNs: number | null;
}) {
  const total = series.reduce((s, x) => s + bars.reduce((a, b) => a + b[x.key], 0), 0);
  const max = Math.max(1e-9, ...bars.flatMap((b) => series.map((x) => (total ? b[x.key] / total : 0))));
  const plotW = W - PAD.left - PAD.right;
  const plotH = H - PAD.top - PAD.bottom;
  const bw = plotW / Math.max(1, bars.length);
  const sw = (bw - 2) / series.length;
  const y = (share: number) => PAD.top + plotH * (1 - share / max);
  const ticks = bars.map((b, i) => ({ i, b })).filter(({ i }) => i === 0 || i % 5 === 0 || i === bars.length - 1);
  const pollX = pollNs !== null && pollNs > 0 ? PAD.left + barPosition(pollNs, bars) * bw : null;
  return (
    <figure className="hh-figure" aria-label={title}>
      <figcaption className="small">
        {title}
        {series.length > 1 && series.map((s) => <span key={s.key} className={`hh-key ${s.cls}`}>{s.label}</span>)}
      </figcaption>
      <svg viewBox={`0 0 ${W} ${H}`} role="img" aria-label={`${title}: ${total} in all`} className="hh-svg">
        <line x1={PAD.left} x2={W - PAD.right} y1={PAD.top + plotH} y2={PAD.top + plotH} className="hh-axis" />
        <text x={PAD.left - 4} y={PAD.top + 8} textAnchor="end" className="hh-tick">{total ? `${Math.round(max * 100)}%` : ''}</text>
        {bars.map((b, i) => series.map((s, k) => {
          const share = total ? b[s.key] / total : 0;
          if (share <= 0) return null;
          return (
            <rect key={`${i}-${s.key}`} className={s.cls} data-low-ns={b.lowNs} data-count={b[s.key]} x={PAD.left + i * bw + 1 + k * sw} width={sw} y={y(share)} height={PAD.top + plotH - y(share)}>
              <title>{`${b.label}: ${b[s.key]} (${(share * 100).toFixed(1)} %)`}</title>
            </rect>
          );
        }))}
        {ticks.map(({ i, b }) => (
          <text key={i} x={PAD.left + i * bw} y={H - 12} className="hh-tick" textAnchor="start">{b.lowNs === 0 ? '0' : fmtDuration(b.lowNs)}</text>
        ))}
        {total === 0 && <text x={PAD.left + plotW / 2} y={PAD.top + plotH / 2} textAnchor="middle" className="hh-empty">none in this window</text>}
        {pollX !== null && (
          <g className="hh-poll">
            <line x1={pollX} x2={pollX} y1={PAD.top - 4} y2={PAD.top + plotH} />
            <text x={pollX + 3} y={PAD.top + 6}>{`halt-poll-ns ${fmtDuration(pollNs!)}`}</text>
          </g>
        )}
      </svg>
    </figure>
  );
}

// How a chart's axes read (pure; unit-tested without a browser).

/** Axis numbers: 0.25, 2.5, 40, 1.2k, 3M. */
export function axisNum(v: number): string {
  const a = Math.abs(v);
  if (a >= 1e6) return `${+(v / 1e6).toFixed(1)}M`;
  if (a >= 1e3) return `${+(v / 1e3).toFixed(1)}k`;
  if (a >= 10 || a === 0) return String(Math.round(v));
  return String(+v.toFixed(2));
}

/** Latency ticks (values in µs) in one unit for the whole axis, chosen by its largest tick: "0 ms, 5 ms, 10 ms", never "0 µs" beside "10 ms". */
export function usAxisLabels(splits: readonly number[]): string[] {
  const top = Math.max(0, ...splits.map((v) => Math.abs(v)));
  const [div, unit] = top >= 1e6 ? [1e6, 's'] : top >= 1e3 ? [1e3, 'ms'] : [1, 'µs'];
  return splits.map((v) => `${axisNum(v / div)} ${unit}`);
}

/** Wall-clock tick labels (HH:MM:SS, or HH:MM for ticks whole minutes apart), one line. */
export function clockLabel(v: number, minutes = false): string {
  const d = new Date(v * 1000);
  const p = (n: number) => String(n).padStart(2, '0');
  return minutes ? `${p(d.getHours())}:${p(d.getMinutes())}` : `${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}`;
}

/**
 * Steps between time ticks, in seconds. uPlot's own jump from 1 min to 5 min left a 5-minute
 * window in a narrow chart with a single label; 2 and 3 minutes in between give it several.
 */
export const TIME_INCRS = [1, 2, 5, 10, 15, 20, 30, 60, 120, 180, 300, 600, 900, 1800, 3600];

export function niceMax(max: number): number {
  const m = max * 1.1;
  const p = 10 ** Math.floor(Math.log10(m));
  const n = m / p;
  return (n <= 1 ? 1 : n <= 2 ? 2 : n <= 2.5 ? 2.5 : n <= 5 ? 5 : 10) * p;
}

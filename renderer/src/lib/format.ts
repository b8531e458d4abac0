// Number formatting shared by tables, axes and readouts.

/**
 * 1234 -> "1.23k", 0.012 s -> "12.0 ms"; SI prefixes, three significant digits. Without a unit a
 * small number is a plain decimal (0.012 -> "0.012"): a bare "12.0m" reads as twelve million.
 */
export function si(v: number | null | undefined, unit = ''): string {
  if (v === null || v === undefined || !Number.isFinite(v)) return '—';
  const a = Math.abs(v);
  if (a === 0) return `0${unit && ' ' + unit}`;
  if (!unit && a < 0.9995) return a >= 0.1 ? v.toFixed(2) : a >= 1e-4 ? String(+v.toPrecision(2)) : v.toExponential(1);
  const prefixes: [number, string][] = [[1e9, 'G'], [1e6, 'M'], [1e3, 'k'], [1, ''], [1e-3, 'm'], [1e-6, 'µ'], [1e-9, 'n']];
  for (const [f, p] of prefixes) {
    if (a >= f * 0.9995) return `${trim3(v / f)}${unit || p ? ' ' : ''}${p}${unit}`;
  }
  return `${v.toExponential(2)}${unit && ' ' + unit}`;
}

function trim3(x: number): string {
  const a = Math.abs(x);
  return a >= 100 ? x.toFixed(0) : a >= 10 ? x.toFixed(1) : x.toFixed(2);
}

export function pct(v: number | null | undefined, digits = 1): string {
  if (v === null || v === undefined || !Number.isFinite(v)) return '—';
  return `${(v * 100).toFixed(digits)} %`;
}

export function ratio(v: number | null | undefined): string {
  if (v === null || v === undefined || !Number.isFinite(v)) return '—';
  return `${Math.abs(v) < 0.1 && v !== 0 ? v.toFixed(3) : v.toFixed(2)}×`;
}

export function ns(v: number | null | undefined): string {
  if (v === null || v === undefined || !Number.isFinite(v)) return '—';
  if (v === 0) return '0';
  if (v >= 1e9) return `${+(v / 1e9).toFixed(2)} s`;
  if (v >= 1e6) return `${+(v / 1e6).toFixed(2)} ms`;
  if (v >= 1e3) return `${+(v / 1e3).toFixed(1)} µs`;
  return `${v} ns`;
}

export function mib(v: number): string {
  return v >= 1024 && v % 1024 === 0 ? `${v / 1024} GiB` : `${v} MiB`;
}

export function ago(at: number | undefined, now = Date.now()): string {
  if (!at) return '';
  const s = Math.round((now - at) / 1000);
  if (s < 60) return `${s}s ago`;
  if (s < 3600) return `${Math.round(s / 60)} min ago`;
  if (s < 86400) return `${Math.round(s / 3600)} h ago`;
  return new Date(at).toLocaleDateString();
}

export function clock(at: number): string {
  return new Date(at).toLocaleString();
}

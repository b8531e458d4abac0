// Series labels that say what a figure is of (pure; unit-tested without a browser).

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


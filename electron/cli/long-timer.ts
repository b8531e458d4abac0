// setTimeout takes at most 2^31-1 ms (~24.8 days); a longer delay silently becomes 1 ms, so
// `--timeout 3000000` stopped a VM at once. Long delays are chained through shorter timers.

export const MAX_TIMER_MS = 2 ** 31 - 1;

/** Calls `fn` once after `ms` (any length); returns the cancel function. */
export function setLongTimeout(fn: () => void, ms: number): () => void {
  const due = Date.now() + ms;
  let timer: NodeJS.Timeout | undefined;
  const arm = (left: number) => {
    timer = setTimeout(() => {
      const rest = due - Date.now();
      if (rest > 0) arm(rest);
      else fn();
    }, Math.min(Math.max(left, 0), MAX_TIMER_MS));
  };
  arm(ms);
  return () => clearTimeout(timer);
}

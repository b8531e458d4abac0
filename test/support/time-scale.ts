// Liveness deadlines in tests follow this host's measured speed, never a fixed wall-clock figure
// alone: the same checks run on an ordinary machine and inside the nested lane's L1, where QEMU's
// software emulation makes everything 10-50x slower. The clock is a fixed amount of plain
// JavaScript work (integer mixing; no allocation, no I/O), timed once per process; the factor is
// its time over what it takes on an ordinary x86-64 core, never below 1. Deadlines only grow with
// it: a fast host keeps the deadlines the tests were written with.

/** The work below takes about this long on an ordinary 2020s x86-64 core (measured ~25-40 ms). */
const REFERENCE_MS = 40;

function clockWorkMs(): number {
  const t0 = performance.now();
  let x = 0x9e3779b9;
  for (let i = 0; i < 20_000_000; i++) x = Math.imul(x ^ (x >>> 15), 0x2c1b3c6d) + i | 0;
  const ms = performance.now() - t0;
  if (x === 42) console.log('(never)'); // keeps the loop observable
  return ms;
}

function measure(): number {
  const fromEnv = Number(process.env.UNHALT_TIME_SCALE);
  if (fromEnv >= 1) return fromEnv;
  const best = Math.min(clockWorkMs(), clockWorkMs(), clockWorkMs());
  const scale = Math.min(100, Math.max(1, best / REFERENCE_MS));
  // Worker processes of the test runner inherit it instead of measuring again.
  process.env.UNHALT_TIME_SCALE = scale.toFixed(2);
  return scale;
}

export const TIME_SCALE = measure();

/** A liveness deadline for this host: `ms` as written for an ordinary machine, times TIME_SCALE. */
export const scaled = (ms: number): number => Math.round(ms * TIME_SCALE);

// Where a start's (and a stop's) time goes: named steps published on a diagnostics channel, with
// the absolute time (performance.timeOrigin + now(), comparable across processes) at which each
// was reached. Free when nobody listens (one hasSubscribers check). `UNHALT_TRACE_STARTS=1 unhalt
// serve` prints them on stderr; bench/app-start.ts --breakdown reads them from there.
import { channel, subscribe } from 'node:diagnostics_channel';

export const START_TRACE_CHANNEL = 'unhalt:start-trace';
const ch = channel(START_TRACE_CHANNEL);

export interface StartTraceStep {
  step: string;
  /** Epoch ms (fractional): performance.timeOrigin + performance.now(), or the time given. */
  at: number;
}

/** Marks a step reached now (or at `at`, epoch ms, for a time taken elsewhere: a vCPU thread's). */
export function traceStep(step: string, at?: number): void {
  if (ch.hasSubscribers) ch.publish({ step, at: at ?? performance.timeOrigin + performance.now() } satisfies StartTraceStep);
}

/** Prefix of a trace line on stderr: `@trace STEP EPOCH_MS`. */
export const TRACE_LINE_PREFIX = '@trace ';

/** Writes every step to stderr as `@trace STEP EPOCH_MS` lines (UNHALT_TRACE_STARTS=1). */
export function traceStepsToStderr(): void {
  subscribe(START_TRACE_CHANNEL, (m) => {
    const { step, at } = m as StartTraceStep;
    process.stderr.write(`${TRACE_LINE_PREFIX}${step} ${at.toFixed(3)}\n`);
  });
}

// stdout for every command: a reader that goes away (`unhalt doctor | head -c1`) or a full disk
// (`> /dev/full`) arrives as an 'error' event on process.stdout, which — unhandled — is a stack
// trace. Here it is handled once: EPIPE means the reader had enough (not an error of ours);
// anything else loses output and must end the command non-zero with a message.
import { describeIoError, errnoCode } from '../service/io-errors.ts';

let failure: unknown;
let reported = false;
const listeners = new Set<(e: unknown) => void>();

export function guardStdout(): void {
  process.stdout.on('error', (e) => {
    failure ??= e;
    for (const l of listeners) l(e);
  });
  // stderr is where failures are said; one it cannot take (EIO from a terminal that hung up,
  // EPIPE) has nowhere to be said, and must not turn a clean stop into an uncaught exception.
  process.stderr.on('error', () => {});
}

/** Calls `listener` on a stdout error (the run command stops its VM); returns the unsubscribe. */
export function onStdoutError(listener: (e: unknown) => void): () => void {
  listeners.add(listener);
  return () => { listeners.delete(listener); };
}

export function readerClosed(e: unknown): boolean {
  return errnoCode(e) === 'EPIPE';
}

/** The one line for a stdout failure that lost output (undefined if none, or if the reader left). */
export function stdoutProblem(): string | undefined {
  if (failure === undefined || readerClosed(failure)) return undefined;
  return `cannot write to stdout: ${describeIoError(failure)}; output was lost`;
}

/** The command has said it already (so main does not say it twice). */
export function markStdoutProblemReported(): void {
  reported = true;
}

export function stdoutProblemReported(): boolean {
  return reported;
}

/**
 * Resolves once what was written so far has reached stdout's file, pipe or terminal (or failed),
 * with the failure noted: a write's callback has it before the 'error' event, which Node emits a
 * tick later (`unhalt machines > /dev/full` exited 0 when only the event was listened to).
 */
export function flushStdout(): Promise<void> {
  const note = (e: unknown) => {
    const errored = (process.stdout as { errored?: Error | null }).errored;
    failure ??= e ?? errored ?? undefined;
  };
  if (process.stdout.destroyed || !process.stdout.writable) {
    note(undefined);
    return Promise.resolve();
  }
  return new Promise((resolve) => process.stdout.write('', (e) => {
    note(e);
    resolve();
  }));
}

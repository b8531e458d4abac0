// SIGHUP/SIGINT/SIGTERM for the long-running commands (`run`, `serve`...): the first asks for a clean stop
// (the caller's), a second one ends the process now. "Now" cannot be process.exit(): Node joins
// every worker thread on exit, and a vCPU thread stuck in KVM_RUN (a guest hung in a hypercall on
// PVM) never returns, so the exit waited forever. _exit(2) ends every thread at once; the kernel
// closes the KVM fds and frees the guest's memory.
import { libc } from '../../native/kvm/libc.ts';
import { SIGNAL_EXIT_CODES, say } from './args.ts';

export type StopSignal = keyof typeof SIGNAL_EXIT_CODES;

/**
 * Calls `onFirst` for the first SIGHUP/SIGINT/SIGTERM; any later one exits with 128 + its number.
 * Returns the function that removes the handlers.
 */
export function onStopSignals(onFirst: (signal: StopSignal) => void, again = 'exiting without waiting for the VM'): () => void {
  let first: StopSignal | undefined;
  const handler = (signal: StopSignal) => {
    if (first === undefined) {
      first = signal;
      onFirst(signal);
      return;
    }
    exitNow(SIGNAL_EXIT_CODES[signal], `${signal} again: ${again}`);
  };
  // A terminal that closes (SIGHUP) would otherwise end the process at once: VMs, conversions
  // and files cut off mid-way.
  const signals = Object.keys(SIGNAL_EXIT_CODES) as StopSignal[];
  for (const s of signals) process.on(s, handler);
  return () => {
    for (const s of signals) process.off(s, handler);
  };
}

/** Ends the process with `code` without waiting for anything (stderr is synchronous for files, pipes and TTYs). */
export function exitNow(code: number, message: string): never {
  say(message);
  libc._exit(code);
  // Not reached; keeps `never` honest if the call ever returned.
  process.exit(code);
}

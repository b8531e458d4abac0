// Kicking a vCPU thread out of KVM_RUN: set kvm_run.immediate_exit and send the thread a
// real-time signal whose handler does nothing harmful. Either half alone can miss: the flag
// alone is not seen while the vCPU is already inside the guest, the signal alone is lost if it
// lands just before KVM_RUN is entered.
import { OsError, errno, libc } from './libc.ts';

/** SIGRTMIN+6 in glibc's numbering (glibc reserves 32 and 33); unused by Node and V8. */
export const KICK_SIGNAL = 40;

let installed = false;

/**
 * Installs a no-op handler for KICK_SIGNAL, process-wide. The handler is libc's getpid: a C
 * function that is async-signal-safe. A koffi callback must never be a signal handler.
 */
export function installKickHandler(): void {
  if (installed) return;
  const handler = libc.dlsym(0, 'getpid');
  if (!handler) throw new Error('cannot find getpid for the vCPU kick signal handler');
  const act = Buffer.alloc(152); // struct sigaction (glibc x86-64): handler, mask[128], flags, restorer
  act.writeBigUInt64LE(BigInt(handler), 0);
  act.writeInt32LE(0, 136); // no SA_RESTART: KVM_RUN must return EINTR
  const old = Buffer.alloc(152);
  if (libc.sigaction(KICK_SIGNAL, act, old) < 0) throw new OsError('sigaction', errno());
  installed = true;
}

export function kickThread(tid: number): void {
  if (libc.tgkill(libc.getpid(), tid, KICK_SIGNAL) < 0) {
    const err = errno();
    if (err !== 3 /* ESRCH: the thread is already gone */) throw new OsError('tgkill', err);
  }
}

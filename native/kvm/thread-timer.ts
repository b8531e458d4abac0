// A periodic POSIX timer that signals one thread (SIGEV_THREAD_ID) with the kick signal: how a
// thread that runs a vCPU for a bounded slice gets out of KVM_RUN even while the guest sits in
// HLT with no exit to give (the main thread running vCPU 0 at start, see
// electron/vmm/runtime/main-thread-vcpu.ts). The signal's handler is the kick's no-op one
// (kick.ts), so KVM_RUN returns EINTR and nothing else happens.
import type { LibraryHandle } from 'koffi';
import koffi from './koffi.ts';
import { OsError, errno, libc } from './libc.ts';
import { KICK_SIGNAL, installKickHandler } from './kick.ts';

const CLOCK_MONOTONIC = 1;
const SIGEV_THREAD_ID = 4;
/** struct sigevent (x86-64): value @0, signo @8, notify @12, _tid @16; 64 bytes in all. */
const SIGEVENT_BYTES = 64;

interface TimerCalls {
  create: (clock: number, sev: Buffer, out: Buffer) => number;
  settime: (timer: bigint, flags: number, spec: Buffer, old: null) => number;
  remove: (timer: bigint) => number;
}

let calls: TimerCalls | undefined;

/** glibc >= 2.34 has the timer calls in libc; older ones in librt. Bound on first use. */
function timerCalls(): TimerCalls {
  if (calls) return calls;
  const bind = (lib: LibraryHandle): TimerCalls => ({
    create: lib.func('int timer_create(int clock, const uint8_t *sev, _Out_ uint8_t *timer)') as TimerCalls['create'],
    settime: lib.func('int timer_settime(uint64 timer, int flags, const uint8_t *spec, uint8_t *old)') as TimerCalls['settime'],
    remove: lib.func('int timer_delete(uint64 timer)') as TimerCalls['remove'],
  });
  try {
    calls = bind(koffi.load('libc.so.6'));
  } catch {
    calls = bind(koffi.load('librt.so.1'));
  }
  return calls;
}

export class ThreadTimer {
  private readonly id: bigint;
  private readonly spec = Buffer.alloc(32);
  private readonly off = Buffer.alloc(32);
  private closed = false;

  /** A disarmed timer that will signal the calling thread with KICK_SIGNAL. */
  constructor() {
    installKickHandler();
    const sev = Buffer.alloc(SIGEVENT_BYTES);
    sev.writeInt32LE(KICK_SIGNAL, 8);
    sev.writeInt32LE(SIGEV_THREAD_ID, 12);
    sev.writeInt32LE(libc.gettid(), 16);
    const out = Buffer.alloc(8);
    if (timerCalls().create(CLOCK_MONOTONIC, sev, out) < 0) throw new OsError('timer_create', errno());
    this.id = out.readBigUInt64LE(0);
  }

  /** Signals every `periodMs` from now on (a signal that lands between two KVM_RUNs is followed by the next). */
  arm(periodMs: number): void {
    const ns = BigInt(Math.max(1, Math.round(periodMs * 1e6)));
    const sec = ns / 1_000_000_000n;
    const nsec = ns % 1_000_000_000n;
    this.spec.writeBigInt64LE(sec, 0);
    this.spec.writeBigInt64LE(nsec, 8);
    this.spec.writeBigInt64LE(sec, 16);
    this.spec.writeBigInt64LE(nsec, 24);
    if (timerCalls().settime(this.id, 0, this.spec, null) < 0) throw new OsError('timer_settime', errno());
  }

  /** No more signals: the thread is back in the event loop, where a stray EINTR has no business. */
  disarm(): void {
    if (timerCalls().settime(this.id, 0, this.off, null) < 0) throw new OsError('timer_settime', errno());
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    timerCalls().remove(this.id);
  }
}

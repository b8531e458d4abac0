// The I/O thread's hold of the bus lock: interrupts its devices raise while it holds the lock
// go out right after it lets go, never under it.
//
// Why: a guest woken by an interrupt touches a device register at once (Linux's virtio driver
// reads or notifies, the probe's driver selects its next queue), and that access is an MMIO exit
// whose vCPU thread takes the bus lock. Sent under the lock, KVM_SIGNAL_MSI (which kicks the
// target vCPU out of its wait) woke a vCPU that then waited for the same ioctl to return and the
// lock to be let go, past its short spin and into a futex sleep, whose wake-up is one more
// cross-CPU round trip. QEMU's irqfd is written outside its device locks for the same reason.
//
// What is deferred is only the sending: the vector's table entry and mask are read under the
// lock (MsixTable.raise) and a masked vector is left pending there, as before. An MSI that a
// guest masks or a reset forgets in the moment between the unlock and the send arrives once,
// late, as it can from an irqfd (Linux takes such an interrupt as spurious).
import type { SharedLock } from '../shared-lock.ts';

/** What a back end holds the bus with (io-back-end.ts): a SharedLock, or this thread's deferring hold of it. */
export interface BusLock {
  lock(): void;
  unlock(): void;
}

export class DeferringBusLock implements BusLock {
  private readonly shared: SharedLock;
  private readonly send: (address: number, data: number) => void;
  private held = false;
  /** address, data pairs raised while held, in order. */
  private readonly pending: number[] = [];

  /** `send`: KVM_SIGNAL_MSI (or a test's recorder). */
  constructor(shared: SharedLock, send: (address: number, data: number) => void) {
    this.shared = shared;
    this.send = send;
  }

  lock(): void {
    this.shared.lock();
    this.held = true;
  }

  unlock(): void {
    this.held = false;
    this.shared.unlock();
    // Taken one by one: a send that throws (the VM fd gone at a stop) leaves the rest queued for the next unlock's try, never resent.
    while (this.pending.length > 0) {
      const address = this.pending.shift()!;
      this.send(address, this.pending.shift()!);
    }
  }

  /** An MSI a device raised on this thread: sent now, or after the unlock when the lock is held here. */
  signal(address: number, data: number): void {
    if (this.held) this.pending.push(address, data);
    else this.send(address, data);
  }

  /** MSIs waiting for the unlock (for tests). */
  get deferred(): number {
    return this.pending.length / 2;
  }
}

// What a device back end with state of its own (a network link, a disk file) plugs into the I/O
// thread's loop (io-worker.ts): it serves its device's chains in place of the device type, may add
// fds and a timeout to the thread's one poll(2), and is told after each wake-up. The loop itself
// knows nothing of any particular back end.
import type { PollSet } from '../../../../native/kvm/poll-set.ts';
import type { BusLock } from './io-bus-lock.ts';
import type { GuestRam } from './guest-ram.ts';
import type { QueueServer } from './virtio-device-type.ts';
import type { VirtioPci } from './virtio-pci.ts';

/** What a back end reaches: its device (its words are shared: take `lock` to touch them), guest RAM. */
export interface IoBackEndContext {
  device: VirtioPci;
  ram: GuestRam;
  lock: BusLock;
}

export interface IoBackEnd extends QueueServer {
  /** After the device's queues were served for a notification (the bus lock is free again; never while the VM is paused). */
  afterKick(): void;
  /** Adds the back end's fds to the next wait; returns how long it may wait at most (ms, -1: no limit). */
  fillPoll(set: PollSet): number;
  /**
   * After every wait, whatever woke it: serve the fds it added, run its timers. `serving` false:
   * the VM is paused (or stopping): keep the host side going but touch neither guest RAM nor the
   * device (no ring written, no interrupt); what comes for the guest waits for a later call.
   */
  afterPoll(set: PollSet, serving: boolean): void;
  /** Releases everything it holds (sockets, fds); idempotent. */
  close(): void;
}

/** The shorter of two poll timeouts (-1: none). */
export function minTimeout(a: number, b: number): number {
  if (a < 0) return b;
  if (b < 0) return a;
  return Math.min(a, b);
}

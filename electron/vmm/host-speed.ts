// How fast this host runs ordinary code, measured once per process: the one clock every
// guest-side deadline of an experiment is scaled by.
//
// Why a measured clock and not fixed deadlines: the same guest takes under a second to boot on
// a real VMX/SVM machine and 15-20 s in a KVM nested under QEMU TCG (docs/nested.md: 10-50x slower),
// and a loaded CI box is somewhere in between. A fixed 120 s is far too long on the first (a hung
// guest is noticed late) and too short on the second (a healthy guest is killed). A CPU-bound
// loop in this process slows down by about the same factor as the guest does, because both run
// on the same emulated or contended CPUs, so its time relative to a reference says how much
// longer than on hardware everything guest-side may take.
//
// Except where the host CPU itself is emulated (QEMU TCG running the KVM we use): there the
// loop is translated once and runs only 1.5-3x slower than on hardware, while a guest's exits,
// boots and wake-ups pay for emulated VMRUNs and page walks and run 10-50x slower (a stock
// Linux boots to its agent in 15-40 s in the nested lane's L1, against under 1 s on hardware; a
// run of 2026-12-02 measured the clock at 1.8x and was killed 37 s into a healthy boot). So the
// slowdown that guest-side deadlines use has a floor there (guestSlowdown).
//
// The loop is integer-only (xorshift) so no FPU, memory or allocator effects enter; the fastest
// of several repetitions is used so that one preemption or JIT warm-up does not read as a slow
// host. Measuring takes about 20 ms on hardware and about a second under TCG.

import { hostVirtualization } from './host.ts';

/** Iterations of one repetition of the reference loop. */
const LOOP_ITERATIONS = 1_000_000;
const REPETITIONS = 7;
/**
 * The fastest repetition's time on an ordinary x86-64 core at ~3 GHz (measured with Node 24 on
 * this project's development hosts, whose guest ring 3 and host user space run at native speed:
 * 2.5-2.7 ms; rounded up so an ordinary machine measures a slowdown of 1).
 */
export const REFERENCE_LOOP_MS = 3;

export interface HostSpeed {
  /** The fastest repetition of the reference loop, ms. */
  loopMs: number;
  /** How many times slower than the reference this host is; never below 1. */
  slowdown: number;
  /** How many times slower than on hardware a guest (boot, exits, wake-ups) is expected to run: what guest-side deadlines scale by. */
  guestSlowdown: number;
}

/**
 * The guest slowdown never assumed below where the host CPU is emulated: 4 s (the hardware base
 * of a Linux boot to its agent, itself 4x the real figure) x 15 = 60 s expected against the 15-40 s
 * measured in the nested lane.
 */
export const EMULATED_GUEST_SLOWDOWN = 15;

/** The guest slowdown for a measured clock slowdown on this kind of host. */
export function guestSlowdownFor(slowdown: number, cpuEmulated: boolean): number {
  return cpuEmulated ? Math.max(slowdown, EMULATED_GUEST_SLOWDOWN) : slowdown;
}

function referenceLoop(n: number): number {
  let x = 0x9e3779b9 | 0;
  for (let i = 0; i < n; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
  }
  return x;
}

/** The slowdown for a measured loop time: never below 1, so fast hosts keep the hardware bases. */
export function slowdownFor(loopMs: number, referenceMs: number = REFERENCE_LOOP_MS): number {
  return Number.isFinite(loopMs) && loopMs > referenceMs ? loopMs / referenceMs : 1;
}

export function measureHostSpeed(now: () => number = () => performance.now(), cpuEmulated = hostVirtualization().platform === 'emulated'): HostSpeed {
  let best = Infinity;
  let sink = 0;
  for (let r = 0; r < REPETITIONS; r++) {
    const t0 = now();
    sink ^= referenceLoop(LOOP_ITERATIONS);
    best = Math.min(best, now() - t0);
  }
  // Keep the loop's result alive so no compiler can drop the work.
  if (sink === 0x7fffffff) best += 0;
  const slowdown = slowdownFor(best);
  return { loopMs: best, slowdown, guestSlowdown: guestSlowdownFor(slowdown, cpuEmulated) };
}

let measured: HostSpeed | undefined;

/** This host's speed, measured on first use and kept for the life of the process. */
export function hostSpeed(): HostSpeed {
  measured ??= measureHostSpeed();
  return measured;
}

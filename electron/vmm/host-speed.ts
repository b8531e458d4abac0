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
// The loop is integer-only (xorshift) so no FPU, memory or allocator effects enter; the fastest
// of several repetitions is used so that one preemption or JIT warm-up does not read as a slow
// host. Measuring takes about 20 ms on hardware and about a second under TCG.

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

export function measureHostSpeed(now: () => number = () => performance.now()): HostSpeed {
  let best = Infinity;
  let sink = 0;
  for (let r = 0; r < REPETITIONS; r++) {
    const t0 = now();
    sink ^= referenceLoop(LOOP_ITERATIONS);
    best = Math.min(best, now() - t0);
  }
  // Keep the loop's result alive so no compiler can drop the work.
  if (sink === 0x7fffffff) best += 0;
  return { loopMs: best, slowdown: slowdownFor(best) };
}

let measured: HostSpeed | undefined;

/** This host's speed, measured on first use and kept for the life of the process. */
export function hostSpeed(): HostSpeed {
  measured ??= measureHostSpeed();
  return measured;
}

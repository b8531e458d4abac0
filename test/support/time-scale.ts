// Liveness deadlines in tests follow this host's measured speed, never a fixed wall-clock figure
// alone: the same checks run on an ordinary machine and inside the nested lane's L1, where QEMU's
// software emulation makes everything 10-50x slower. The clock is the VMM's own
// (electron/vmm/host-speed.ts, which also paces experiments): deadlines only grow with it, so a
// fast host keeps the deadlines the tests were written with.
import { hostSpeed } from '../../electron/vmm/host-speed.ts';

function measure(): number {
  const fromEnv = Number(process.env.UNHALT_TIME_SCALE);
  if (fromEnv >= 1) return fromEnv;
  const scale = Math.min(100, hostSpeed().slowdown);
  // Nothing has scaled deadlines for guests yet: this process sets the runner's workers' scale.
  process.env.UNHALT_GUEST_TIME_SCALE ??= Math.min(100, hostSpeed().guestSlowdown).toFixed(2);
  // The test runner's workers inherit it instead of measuring again.
  process.env.UNHALT_TIME_SCALE = scale.toFixed(2);
  return scale;
}

export const TIME_SCALE = measure();

/** A liveness deadline for this host: `ms` as written for an ordinary machine, times TIME_SCALE. */
export const scaled = (ms: number): number => Math.round(ms * TIME_SCALE);

/**
 * The scale for tests that wait on guests through the whole app (the e2e lane): the guest
 * slowdown, which has a floor where the host CPU is emulated (the nested lane's L1: guests there
 * run 10-50x slower while the clock reads under 2x). Given to that lane's workers as their
 * UNHALT_TIME_SCALE by vitest.config.ts.
 */
export const GUEST_TIME_SCALE = Math.max(TIME_SCALE, Number(process.env.UNHALT_GUEST_TIME_SCALE) || TIME_SCALE);

/** A liveness deadline for work a guest or KVM does (a VM's start or stop), grown with GUEST_TIME_SCALE. */
export const guestScaled = (ms: number): number => Math.round(ms * GUEST_TIME_SCALE);

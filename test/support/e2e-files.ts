// Which end-to-end UI files start VMs, and where they run. One list for vitest's e2e lane and the
// nested lane: on a host with a /dev/kvm the e2e lane runs them here; on a host without one they
// run inside the nested lane's L1 (hardware-semantics KVM under QEMU TCG), driving a Chromium on
// this host over the DevTools protocol (test/e2e/support.ts), so the e2e lane skips nothing.
import { accessSync, constants } from 'node:fs';

/** The e2e files whose checks start a VM (a guest, an experiment, a tune): they need a KVM. */
export const E2E_VM_FILES = [
  'test/e2e/app.test.ts',
  'test/e2e/chart-drawing.test.ts',
  'test/e2e/chart-figures.test.ts',
  'test/e2e/halt-histograms.test.ts',
  'test/e2e/compare.test.ts',
  'test/e2e/compare-own.test.ts',
  'test/e2e/device-telemetry.test.ts',
  'test/e2e/fields.test.ts',
  'test/e2e/net.test.ts',
  'test/e2e/tune.test.ts',
  'test/e2e/virtio-blk.test.ts',
  'test/e2e/virtio-rng.test.ts',
  'test/e2e/vm-manage.test.ts',
  'test/e2e/wizard-net.test.ts',
];

/**
 * The UI files that boot the built-in Linux: a stock Linux reaches user space only on a KVM with
 * hardware semantics, so on a PVM host they skip, as the Linux lane's files do, and run in the
 * nested lane's L1 with them (test/nested/inner-report.ts NESTED_LINUX_FILES); on a host with no
 * KVM the e2e lane leaves them out.
 */
export const LINUX_E2E_FILES = ['test/e2e/linux-vm-page.test.ts'];

/**
 * The full own-guest set: the user's own cloud image booted again and again (a systemd boot is
 * ~2 min in L1), an A/B on it from the CLI and from the app. CI boots one (test/linux/import-boot);
 * these run by their own command in the nested lane (`npm run test:own-guest`, README), never in
 * the default lanes, which leave them out (inside L1 they run when selected).
 */
export const OWN_GUEST_FILES = ['test/linux/import-ab.test.ts', 'test/e2e/import-compare.test.ts'];

/** True where this host has a KVM device this user may open to start VMs (UNHALT_KVM_DEVICE overrides /dev/kvm). */
export function hostHasKvm(env: NodeJS.ProcessEnv = process.env): boolean {
  try {
    accessSync(env.UNHALT_KVM_DEVICE ?? '/dev/kvm', constants.R_OK | constants.W_OK);
    return true;
  } catch {
    return false;
  }
}

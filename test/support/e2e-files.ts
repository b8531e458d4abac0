// Which end-to-end UI files start VMs, and where they run. One list for vitest's e2e lane and the
// nested lane: on a host with a /dev/kvm the e2e lane runs them here; on a host without one they
// run inside the nested lane's L1 (hardware-semantics KVM under QEMU TCG), driving a Chromium on
// this host over the DevTools protocol (test/e2e/support.ts), so the e2e lane skips nothing.
import { accessSync, constants, existsSync } from 'node:fs';

/** The e2e files whose checks start a VM (a guest, an experiment, a tune): they need a KVM. */
export const E2E_VM_FILES = [
  'test/e2e/app.test.ts',
  'test/e2e/chart-drawing.test.ts',
  'test/e2e/chart-figures.test.ts',
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
 * The e2e files that boot a stock Linux (a distribution's cloud image): they need a KVM with
 * hardware semantics, so the e2e lane runs them only where /dev/kvm is kvm_intel or kvm_amd,
 * and the nested lane runs them in L1 always (with the Linux files).
 */
export const E2E_LINUX_FILES = ['test/e2e/import-compare.test.ts'];

/** True where /dev/kvm is usable and has hardware semantics (its module is kvm_intel or kvm_amd, not PVM's). */
export function hostHasHardwareKvm(env: NodeJS.ProcessEnv = process.env, sysModule = '/sys/module'): boolean {
  if (!hostHasKvm(env) || existsSync(`${sysModule}/kvm_pvm`)) return false;
  return existsSync(`${sysModule}/kvm_intel`) || existsSync(`${sysModule}/kvm_amd`);
}

/** True where this host has a KVM device this user may open to start VMs (UNHALT_KVM_DEVICE overrides /dev/kvm). */
export function hostHasKvm(env: NodeJS.ProcessEnv = process.env): boolean {
  try {
    accessSync(env.UNHALT_KVM_DEVICE ?? '/dev/kvm', constants.R_OK | constants.W_OK);
    return true;
  } catch {
    return false;
  }
}

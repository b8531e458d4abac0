import { defineConfig } from 'vitest/config';
import { GUEST_TIME_SCALE, scaled } from './test/support/time-scale.ts';
import { LONG_LIVED_V8_FLAGS } from './bin/v8-flags.mjs';
import { E2E_VM_FILES, LINUX_E2E_FILES, OWN_GUEST_FILES, hostHasKvm } from './test/support/e2e-files.ts';

// Lanes (npm test runs them one after another, see scripts/test.mjs):
// - unit:  pure tests, in parallel;
// - kvm:   real KVM with the probe guest, plus QEMU side-by-side checks — one file at a time:
//          the machine has 2 CPUs and guests are timing-sensitive;
// - e2e:   the app in headless Chromium against host mode; the files that start VMs run here only
//          where this host has a /dev/kvm, and in the nested lane's L1 otherwise (test/support/e2e-files.ts);
// - linux: the long Linux boot lane (minutes on a PVM host), alone;
// - nested: a hardware-semantics KVM nested under QEMU TCG, running the KVM-semantics checks
//           inside it (test/nested/, docs/nested.md).
// A test file runs dozens of VMs in one process: it runs with the V8 flags of Unhalt's long-lived
// processes (bin/v8-flags.mjs: V8's JIT-page registry on hosts with memory protection keys).
const execArgv = [...LONG_LIVED_V8_FLAGS];
// The full own-guest set runs by its own command (npm run test:own-guest), in L1 only when selected.
const ownGuestExcluded = process.env.UNHALT_NESTED_LANE === '1' ? [] : OWN_GUEST_FILES;

export default defineConfig({
  test: {
    projects: [
      { test: { name: 'unit', include: ['test/unit/**/*.test.ts'], execArgv } },
      {
        test: {
          name: 'kvm',
          execArgv,
          include: ['test/kvm/**/*.test.ts', 'test/qemu/**/*.test.ts'],
          fileParallelism: false,
          // Liveness deadlines grow with the host's measured slowness (test/support/time-scale.ts).
          testTimeout: scaled(60_000),
          hookTimeout: scaled(60_000),
        },
      },
      {
        test: {
          name: 'e2e',
          execArgv,
          include: ['test/e2e/**/*.test.ts'],
          exclude: [...(hostHasKvm() ? [] : [...E2E_VM_FILES, ...LINUX_E2E_FILES]), ...ownGuestExcluded],
          fileParallelism: false,
          // The UI waits on guests through the whole app: its deadlines follow the guest slowdown,
          // but no check may hold the lane longer than 10 min (in the nested lane's L1 a hang must
          // end well inside L1's own deadline, or every lane's results in that L1 are lost).
          env: { UNHALT_TIME_SCALE: GUEST_TIME_SCALE.toFixed(2) },
          testTimeout: Math.min(Math.round(180_000 * GUEST_TIME_SCALE), 600_000),
          hookTimeout: Math.min(Math.round(120_000 * GUEST_TIME_SCALE), 600_000),
        },
      },
      {
        test: {
          name: 'linux',
          execArgv,
          include: ['test/linux/**/*.test.ts'],
          exclude: ownGuestExcluded,
          fileParallelism: false,
          testTimeout: scaled(900_000),
          hookTimeout: scaled(120_000),
        },
      },
      {
        test: {
          name: 'nested',
          execArgv,
          include: ['test/nested/**/*.test.ts'],
          fileParallelism: false,
          testTimeout: 3_600_000,
          hookTimeout: 120_000,
        },
      },
    ],
  },
});

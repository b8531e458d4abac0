import { defineConfig } from 'vitest/config';
import { scaled } from './test/support/time-scale.ts';

// Lanes (npm test runs them one after another, see scripts/test.mjs):
// - unit:  pure tests, in parallel;
// - kvm:   real KVM with the probe guest, plus QEMU side-by-side checks — one file at a time:
//          the machine has 2 CPUs and guests are timing-sensitive;
// - e2e:   the app in headless Chromium against host mode;
// - linux: the long Linux boot lane (minutes on a PVM host), alone;
// - nested: a hardware-semantics KVM nested under QEMU TCG, running the KVM-semantics checks
//           inside it (test/nested/, docs/nested.md).
export default defineConfig({
  test: {
    projects: [
      { test: { name: 'unit', include: ['test/unit/**/*.test.ts'] } },
      {
        test: {
          name: 'kvm',
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
          include: ['test/e2e/**/*.test.ts'],
          fileParallelism: false,
          testTimeout: 180_000,
          hookTimeout: 120_000,
        },
      },
      {
        test: {
          name: 'linux',
          include: ['test/linux/**/*.test.ts'],
          fileParallelism: false,
          testTimeout: scaled(900_000),
          hookTimeout: scaled(120_000),
        },
      },
      {
        test: {
          name: 'nested',
          include: ['test/nested/**/*.test.ts'],
          fileParallelism: false,
          testTimeout: 3_600_000,
          hookTimeout: 120_000,
        },
      },
    ],
  },
});

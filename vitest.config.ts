import { defineConfig } from 'vitest/config';

// Lanes (npm test runs them one after another, see scripts/test.mjs):
// - unit:  pure tests, in parallel;
// - kvm:   real KVM with the probe guest, plus QEMU side-by-side checks — one file at a time:
//          the machine has 2 CPUs and guests are timing-sensitive;
// - e2e:   the app in headless Chromium against host mode;
// - linux: the long Linux boot lane (minutes on a PVM host), alone.
export default defineConfig({
  test: {
    projects: [
      { test: { name: 'unit', include: ['test/unit/**/*.test.ts'] } },
      {
        test: {
          name: 'kvm',
          include: ['test/kvm/**/*.test.ts', 'test/qemu/**/*.test.ts'],
          fileParallelism: false,
          testTimeout: 60_000,
          hookTimeout: 60_000,
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
          testTimeout: 900_000,
          hookTimeout: 120_000,
        },
      },
    ],
  },
});

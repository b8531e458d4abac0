import { defineConfig } from 'vitest/config';

// Three lanes: fast pure unit tests, real-KVM tests with the probe guest, and QEMU side-by-side checks.
// KVM lanes run files one at a time: the machine has 2 CPUs and guests are timing-sensitive.
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
    ],
  },
});

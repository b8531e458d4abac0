import { describe, it, expect } from 'vitest';
import { Worker } from 'node:worker_threads';
import { SharedLock } from '../../electron/vmm/devices/shared-lock.ts';

describe('SharedLock', () => {
  it('locks, unlocks and releases on throw', () => {
    const cells = new Int32Array(new SharedArrayBuffer(8));
    const lock = new SharedLock(cells, 1);
    lock.lock();
    expect(cells[1]).toBe(1);
    lock.unlock();
    expect(cells[1]).toBe(0);
    expect(lock.withLock(() => 42)).toBe(42);
    expect(() => lock.withLock(() => { throw new Error('boom'); })).toThrow('boom');
    expect(cells[1]).toBe(0);
  });

  it('rejects non-shared memory', () => {
    expect(() => new SharedLock(new Int32Array(1))).toThrow(TypeError);
  });

  it('serializes threads: no lost updates', async () => {
    const sab = new SharedArrayBuffer(16);
    const times = 100_000;
    const workers = [0, 1, 2].map(
      () => new Worker(new URL('./helpers/lock-counter.ts', import.meta.url), { workerData: { sab, times } }),
    );
    // The main thread takes part too (Node allows Atomics.wait on it).
    const cells = new Int32Array(sab);
    const lock = new SharedLock(cells, 0);
    for (let i = 0; i < times; i++) lock.withLock(() => { cells[1] = cells[1] + 1; });
    await Promise.all(workers.map((w) => new Promise((resolve, reject) => {
      w.on('error', reject);
      w.on('exit', resolve);
    })));
    expect(cells[1]).toBe(4 * times);
    expect(cells[0]).toBe(0);
  }, 30_000);
});

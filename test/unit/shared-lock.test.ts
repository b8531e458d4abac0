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

  it('tryLock never waits: it fails while another holder has the lock, and succeeds once it is free', () => {
    const cells = new Int32Array(new SharedArrayBuffer(8));
    const lock = new SharedLock(cells, 0);
    lock.lock();
    expect(lock.tryLock()).toBe(false);
    expect(lock.tryWithLock(() => 1)).toBeUndefined();
    lock.unlock();
    expect(lock.tryWithLock(() => 7)).toBe(7);
    expect(cells[0]).toBe(0);
  });

  it('lockAsync waits without blocking the event loop and still excludes the workers: no lost updates', async () => {
    const sab = new SharedArrayBuffer(16);
    const times = 50_000;
    const workers = [0, 1].map(
      () => new Worker(new URL('./helpers/lock-counter.ts', import.meta.url), { workerData: { sab, times } }),
    );
    const done = Promise.all(workers.map((w) => new Promise((resolve, reject) => { w.on('error', reject); w.on('exit', resolve); })));
    const cells = new Int32Array(sab);
    const lock = new SharedLock(cells, 0);
    // A timer that must keep firing while the main thread contends for the lock.
    let ticks = 0;
    const ticker = setInterval(() => { ticks++; }, 1);
    let mine = 0;
    let skipped = 0;
    const start = performance.now();
    while (mine < times) {
      if (mine % 2 === 0) {
        await lock.withLockAsync(() => { cells[1] = cells[1] + 1; });
        mine++;
      } else if (lock.tryWithLock(() => { cells[1] = cells[1] + 1; return true; }) === undefined) {
        skipped++;
        await new Promise((r) => setImmediate(r));
      } else mine++;
      if (mine % 1000 === 0) await new Promise((r) => setImmediate(r));
    }
    await done;
    clearInterval(ticker);
    expect(cells[1]).toBe(3 * times);
    expect(cells[0]).toBe(0);
    expect(ticks).toBeGreaterThan(0);
    process.stdout.write(`lockAsync: ${times} main-thread sections against 2 workers in ${(performance.now() - start).toFixed(0)} ms, ${skipped} busy tryLocks, ${ticks} timer ticks\n`);
  }, 30_000);
});

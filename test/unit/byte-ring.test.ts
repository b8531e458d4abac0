import { describe, it, expect } from 'vitest';
import { Worker } from 'node:worker_threads';
import { ByteRing } from '../../electron/vmm/devices/byte-ring.ts';

describe('ByteRing', () => {
  it('requires a power-of-two capacity', () => {
    expect(() => ByteRing.create(1000)).toThrow(RangeError);
    expect(new ByteRing(ByteRing.create()).capacity).toBe(65536);
  });

  it('writes bytes and single bytes, drains in order, wraps around', () => {
    const ring = new ByteRing(ByteRing.create(8));
    expect(ring.write(new Uint8Array([1, 2, 3, 4, 5, 6]))).toBe(6);
    expect([...ring.drain()]).toEqual([1, 2, 3, 4, 5, 6]);
    expect(ring.write(new Uint8Array([7, 8, 9, 10, 11]))).toBe(5); // crosses the end
    expect(ring.write(12)).toBe(1);
    expect(ring.available()).toBe(6);
    expect([...ring.drain()]).toEqual([7, 8, 9, 10, 11, 12]);
    expect(ring.drain().length).toBe(0);
    expect(ring.dropped()).toBe(0);
  });

  it('drops what does not fit and counts it', () => {
    const ring = new ByteRing(ByteRing.create(8));
    expect(ring.write(new Uint8Array(10).map((_, i) => i))).toBe(8);
    expect(ring.dropped()).toBe(2);
    expect(ring.write(99)).toBe(0);
    expect(ring.dropped()).toBe(3);
    expect(ring.space()).toBe(0);
    expect([...ring.drain()]).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
    expect(ring.space()).toBe(8);
  });

  it('waitForData resolves on a write and times out otherwise', async () => {
    const ring = new ByteRing(ByteRing.create(16));
    const t0 = performance.now();
    await ring.waitForData(30);
    expect(performance.now() - t0).toBeGreaterThanOrEqual(25);
    setTimeout(() => ring.write(5), 10);
    const t1 = performance.now();
    await ring.waitForData(5000);
    expect(performance.now() - t1).toBeLessThan(2000);
    expect([...ring.drain()]).toEqual([5]);
    ring.write(6);
    await ring.waitForData(5000); // data already there: immediate
    expect([...ring.drain()]).toEqual([6]);
  });

  async function runWriter(capacity: number, total: number, backoff: boolean) {
    const sab = ByteRing.create(capacity);
    const ring = new ByteRing(sab);
    const worker = new Worker(new URL('./helpers/ring-writer.ts', import.meta.url), {
      workerData: { sab, total, backoff },
    });
    let done = false;
    const exited = new Promise<void>((resolve, reject) => {
      worker.on('message', () => (done = true));
      worker.on('error', reject);
      worker.on('exit', () => resolve());
    });
    const got: Uint8Array[] = [];
    let received = 0;
    while (!done || ring.available() > 0) {
      await ring.waitForData(20);
      const chunk = ring.drain();
      got.push(chunk);
      received += chunk.length;
    }
    await exited;
    const last = ring.drain();
    got.push(last);
    received += last.length;
    const all = new Uint8Array(received);
    let o = 0;
    for (const c of got) {
      all.set(c, o);
      o += c.length;
    }
    return { all, dropped: ring.dropped() };
  }

  it('carries bytes from a worker thread to the main thread intact', async () => {
    const total = 300_000;
    const { all, dropped } = await runWriter(1024, total, true);
    expect(dropped).toBe(0);
    expect(all.length).toBe(total);
    let bad = -1;
    for (let i = 0; i < total; i++) if (all[i] !== (i & 0xff)) { bad = i; break; }
    expect(bad).toBe(-1);
  }, 30_000);

  it('accounts for every byte when a fast writer overruns the reader', async () => {
    const total = 500_000;
    const { all, dropped } = await runWriter(256, total, false);
    expect(all.length + dropped).toBe(total);
  }, 30_000);
});

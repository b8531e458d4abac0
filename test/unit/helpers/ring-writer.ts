// Worker for byte-ring.test.ts: writes `total` bytes (i & 0xff) into a ByteRing, in chunks
// and single bytes. With `backoff`, waits for space instead of dropping.
import { workerData, parentPort } from 'node:worker_threads';
import { ByteRing } from '../../../electron/vmm/devices/byte-ring.ts';

const { sab, total, backoff } = workerData as { sab: SharedArrayBuffer; total: number; backoff: boolean };
const ring = new ByteRing(sab);
const nap = new Int32Array(new SharedArrayBuffer(4));
let i = 0;
while (i < total) {
  const n = Math.min(total - i, (i % 7) + 1); // mix of chunk sizes, including single bytes
  if (backoff) {
    while (ring.space() < n) Atomics.wait(nap, 0, 0, 0.05);
  }
  if (n === 1) {
    ring.write(i & 0xff);
  } else {
    const chunk = new Uint8Array(n);
    for (let k = 0; k < n; k++) chunk[k] = (i + k) & 0xff;
    ring.write(chunk);
  }
  i += n;
}
parentPort?.postMessage('done');

// Worker for shared-lock.test.ts: increments cells[1] non-atomically `times` times under the
// lock (lost updates would show without mutual exclusion).
import { workerData, parentPort } from 'node:worker_threads';
import { SharedLock } from '../../../electron/vmm/devices/shared-lock.ts';

const { sab, times } = workerData as { sab: SharedArrayBuffer; times: number };
const cells = new Int32Array(sab);
const lock = new SharedLock(cells, 0);
for (let i = 0; i < times; i++) {
  lock.lock();
  const v = cells[1];
  cells[2] = v; // widen the window between the read and the write
  cells[1] = v + 1;
  lock.unlock();
}
parentPort?.postMessage('done');

// Locks guest RAM in host memory (mlock(2), mem-lock=on) on a thread of its own: mlock faults in
// every page first, which for a few GiB takes seconds, and the main thread answers every client
// meanwhile (docs/architecture.md, "Threads"). mlock acts on the whole process's address space,
// so locking from here is the same as locking from the main thread. errno is per thread, which
// is why this is a worker and not an asynchronous koffi call: the error is read where it happened.
import { parentPort, workerData } from 'node:worker_threads';
import { errno, libc } from '../../../native/kvm/libc.ts';

export interface LockRequest {
  ranges: { address: number; size: number }[];
}
/** 0: every range locked; otherwise the errno of the range that failed (none stays locked). */
export interface LockResult {
  errno: number;
}

const { ranges } = workerData as LockRequest;
let failed = 0;
const locked: typeof ranges = [];
for (const r of ranges) {
  if (libc.mlock(r.address, r.size) < 0) { failed = errno(); break; }
  locked.push(r);
}
if (failed) for (const r of locked) libc.munlock(r.address, r.size);
parentPort!.postMessage({ errno: failed } satisfies LockResult);

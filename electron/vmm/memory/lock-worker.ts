// Locks guest RAM in host memory (mlock(2), mem-lock=on) on a thread of its own: mlock faults in
// every page first, which for a few GiB takes seconds, and the main thread answers every client
// meanwhile (docs/architecture.md, "Threads"). mlock acts on the whole process's address space,
// so locking from here is the same as locking from the main thread. errno is per thread, which
// is why this is a worker and not an asynchronous koffi call: the error is read where it happened.
// The pages are faulted in by touching them first (a page fault takes only its VMA's lock), so
// the mlock itself finds them present and holds the process's mmap lock only briefly: a long
// populate under that lock would stall the main thread's own mmaps and KVM ioctls meanwhile.
import { parentPort, workerData } from 'node:worker_threads';
import { errno, libc } from '../../../native/kvm/libc.ts';

export interface LockRequest {
  /** Guest RAM; `offset` is where each range starts inside it. */
  sab: SharedArrayBuffer;
  ranges: { address: number; size: number; offset: number }[];
}
/** 0: every range locked; otherwise the errno of the range that failed (none stays locked). */
export interface LockResult {
  errno: number;
}

const PAGE = 4096;
const { sab, ranges } = workerData as LockRequest;
const words = new Int32Array(sab);
for (const r of ranges) {
  // A write fault per page, changing nothing: adding 0 atomically keeps whatever the builder
  // already loaded there (the kernel, the ACPI tables).
  for (let at = r.offset; at < r.offset + r.size; at += PAGE) Atomics.add(words, at >> 2, 0);
}
let failed = 0;
const locked: typeof ranges = [];
for (const r of ranges) {
  if (libc.mlock(r.address, r.size) < 0) { failed = errno(); break; }
  locked.push(r);
}
if (failed) for (const r of locked) libc.munlock(r.address, r.size);
parentPort!.postMessage({ errno: failed } satisfies LockResult);

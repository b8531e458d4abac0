// Worker for io-bus-lock.test.ts: a "vCPU" that takes the board's bus lock with the real
// SharedLock, as a register access in an MMIO exit does. flags[0] = 1 once it runs (before it
// asks for the lock), flags[1] = 1 once it holds the lock; then it lets go and ends.
import { workerData } from 'node:worker_threads';
import { SharedLock } from '../../../electron/vmm/devices/shared-lock.ts';

const { sab, lockWord, flagSab } = workerData as { sab: SharedArrayBuffer; lockWord: number; flagSab: SharedArrayBuffer };
const flags = new Int32Array(flagSab);
const lock = new SharedLock(new Int32Array(sab), lockWord);
Atomics.store(flags, 0, 1);
Atomics.notify(flags, 0);
lock.lock();
Atomics.store(flags, 1, 1);
Atomics.notify(flags, 1);
lock.unlock();

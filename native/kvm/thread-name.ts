// The calling thread's name as the OS shows it (/proc/PID/task/TID/comm, top -H, perf): what a
// reused vCPU worker thread is doing now (vcpu-N of its VM, or idle; worker-pool.ts). Linux keeps
// 15 bytes of it.
import { readFileSync, writeFileSync } from 'node:fs';

export function nameCurrentThread(name: string): void {
  writeFileSync('/proc/thread-self/comm', name.slice(0, 15));
}

/** The name of thread `tid` of this process ('' once it has ended). */
export function threadName(tid: number): string {
  try {
    return readFileSync(`/proc/self/task/${tid}/comm`, 'utf8').trim();
  } catch {
    return '';
  }
}

// CPU affinity of the calling thread (vCPU pinning).
import { OsError, errno, libc } from './libc.ts';

const CPU_SET_BYTES = 128; // room for 1024 CPUs, glibc's cpu_set_t

export function pinCurrentThread(hostCpu: number): void {
  setThreadAffinity(0, [hostCpu]);
}

/** Sets the host CPUs a thread (by tid; 0 = the caller) may run on. */
export function setThreadAffinity(tid: number, hostCpus: readonly number[]): void {
  const mask = Buffer.alloc(CPU_SET_BYTES);
  for (const c of hostCpus) mask[c >> 3]! |= 1 << (c & 7);
  if (libc.sched_setaffinity(tid, CPU_SET_BYTES, mask) < 0) {
    throw new OsError(`pinning thread ${tid || 'self'} to host CPUs ${hostCpus.join(',')}`, errno());
  }
}

/** Host CPUs this process may run on. */
export function allowedHostCpus(): number[] {
  const mask = Buffer.alloc(CPU_SET_BYTES);
  if (libc.sched_getaffinity(0, CPU_SET_BYTES, mask) < 0) throw new OsError('sched_getaffinity', errno());
  const cpus: number[] = [];
  for (let i = 0; i < CPU_SET_BYTES * 8; i++) if (mask[i >> 3]! & (1 << (i & 7))) cpus.push(i);
  return cpus;
}

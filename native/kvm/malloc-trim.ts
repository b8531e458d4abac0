// Gives memory that glibc's malloc holds free back to the OS: malloc_trim(0) walks every arena
// (each thread that allocated has one), releasing the free top of each and madvising free pages
// inside them away. A vCPU worker thread reused across VMs (worker-pool.ts) calls it after each
// VM it leaves: without it those threads' arenas kept ~26 MiB that nothing used. Elsewhere than
// glibc (musl has no malloc_trim) it does nothing.
import koffi from './koffi.ts';

let trim: ((pad: number) => number) | null | undefined;

/** Whether anything was returned (false also where there is no malloc_trim). */
export function returnFreedMallocMemory(): boolean {
  if (trim === undefined) {
    try {
      trim = koffi.load('libc.so.6').func('int malloc_trim(size_t pad)') as (pad: number) => number;
    } catch {
      trim = null;
    }
  }
  return trim ? trim(0) === 1 : false;
}

// Host contention, an experiment's condition: N CPU-bound processes on the host CPUs the VM's
// vCPUs may run on, so vCPUs get preempted by other work (the condition under which the seeds
// measured kvm-pv-unhalt and halt polling). Started before each run and ended after it, for every
// configuration and VMM alike, so the alternation holds; each run records the CPU they took.
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { allowedHostCpus, setThreadAffinity } from '../../native/kvm/affinity.ts';
import { CLOCK_TICKS_PER_S, parseStatCpuTicks } from '../vmm/telemetry/thread-stats.ts';

/** The host CPUs contention runs on for a configuration: its vCPUs' pinning, else every CPU allowed. */
export function contentionCpus(pin: readonly number[] | undefined): number[] {
  return pin?.length ? [...new Set(pin)].sort((a, b) => a - b) : allowedHostCpus();
}

/** One sentence for the record and the tables. */
export function contentionText(threads: number, cpus: readonly number[]): string {
  return `host contention: ${threads} CPU-bound process${threads === 1 ? '' : 'es'} on host CPU${cpus.length === 1 ? '' : 's'} ${cpus.join(',')}, during every run`;
}

export class Contention {
  private readonly children: ChildProcess[];
  private stopped?: Promise<number>;

  private constructor(children: ChildProcess[]) {
    this.children = children;
  }

  /**
   * Starts `threads` busy processes, each pinned to `cpus`: a shell's loop (one thread, no I/O)
   * that ends by itself once this process is gone, so a service or CLI that dies leaves none.
   */
  static start(threads: number, cpus: readonly number[]): Contention {
    const children: ChildProcess[] = [];
    const loop = busyLoop(process.pid);
    try {
      for (let i = 0; i < threads; i++) {
        const child = spawn('/bin/sh', ['-c', loop], { stdio: 'ignore' });
        child.on('error', () => { /* a failed spawn has no pid: refused below, not a crash later */ });
        children.push(child);
        if (child.pid === undefined) throw new Error('cannot start a busy process for host contention (/bin/sh)');
        setThreadAffinity(child.pid, cpus);
      }
    } catch (e) {
      for (const c of children) c.kill('SIGKILL');
      throw e;
    }
    return new Contention(children);
  }

  /** Ends them (once; again returns the same); the CPU time they took (ns), read just before the end. */
  stop(): Promise<number> {
    this.stopped ??= this.end();
    return this.stopped;
  }

  private async end(): Promise<number> {
    let cpuNs = 0;
    for (const c of this.children) cpuNs += cpuOf(c.pid);
    await Promise.all(this.children.map((c) => new Promise<void>((resolve) => {
      if (c.exitCode !== null || c.signalCode !== null) { resolve(); return; }
      c.once('exit', () => resolve());
      c.kill('SIGKILL');
    })));
    return cpuNs;
  }
}

function cpuOf(pid: number | undefined): number {
  if (pid === undefined) return 0;
  try {
    const ticks = parseStatCpuTicks(readFileSync(`/proc/${pid}/stat`));
    return Number.isFinite(ticks) ? (ticks / CLOCK_TICKS_PER_S) * 1e9 : 0;
  } catch {
    return 0; // gone already
  }
}

/** The busy loop's shell text: spins while process `parent` lives (kill -0 is dash's builtin: no fork). */
export function busyLoop(parent: number): string {
  return `while kill -0 ${parent} 2>/dev/null; do :; done`;
}

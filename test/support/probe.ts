// Test support: boot the probe guest in-process and watch its two serial lines.
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import type { AgentEvent } from '../../electron/vmm/agent/line-protocol.ts';
import { validateConfig } from '../../electron/vmm/config/vm-config.ts';
import { resolveMachine } from '../../electron/vmm/config/resolve.ts';
import { probeHost } from '../../electron/vmm/machine/host-caps.ts';
import { VirtualMachine } from '../../electron/vmm/vm.ts';
import { IDLE_VCPU_THREAD_NAME } from '../../electron/vmm/vcpu/worker-pool.ts';
import { consoleMirror } from './console-mirror.ts';
import { scaled } from './time-scale.ts';

export const kvmAvailable = existsSync(process.env.UNHALT_KVM_DEVICE ?? '/dev/kvm');

export interface Watched {
  vm: VirtualMachine;
  console(): string;
  events: AgentEvent[];
  waitForConsole(pattern: RegExp | string, timeoutMs?: number): Promise<void>;
  waitForEvent(event: string, timeoutMs?: number): Promise<AgentEvent>;
  /** How the VM ended (`kind: message`), once it has; undefined while it runs. */
  ended(): string | undefined;
}

export async function startProbe(opts: { cpus?: number; memoryMiB?: number; append?: string; name?: string; config?: Record<string, unknown> } = {}): Promise<Watched> {
  const { spec } = resolveMachine(validateConfig({
    guest: 'probe', cpus: opts.cpus ?? 1, memoryMiB: opts.memoryMiB ?? 64, append: opts.append ?? 'scenario=hello',
    name: opts.name ?? 'test', ...opts.config,
  }), probeHost());
  const vm = await VirtualMachine.start(spec);
  return watch(vm);
}

export function watch(vm: VirtualMachine): Watched {
  let text = '';
  const events: AgentEvent[] = [];
  const waiters = new Set<() => void>();
  const poke = () => { for (const w of [...waiters]) w(); };
  const mirror = consoleMirror(`VM ${vm.spec.name} of this process`);
  vm.on('console', (b) => { mirror.write(b); text += Buffer.from(b).toString('latin1'); poke(); });
  const agentMirror = consoleMirror(`the agent's events (ttyS1) of VM ${vm.spec.name}`);
  vm.on('agent', (e) => {
    agentMirror.write(`@u1 ${e.event}${Object.entries(e.fields).map(([k, v]) => ` ${k}=${v}`).join('')}\n`);
    events.push(e);
    poke();
  });
  let endedWith: string | undefined;
  vm.on('end', (e: { kind: string; message: string }) => {
    endedWith = `${e.kind}: ${e.message}`;
    mirror.write(`\n[the VM ended: ${endedWith}]`);
    mirror.end();
    poke();
  });
  const until = <T>(check: () => T | undefined, what: string, timeoutMs: number) =>
    new Promise<T>((resolve, reject) => {
      const tryIt = () => {
        const v = check();
        if (v !== undefined) { cleanup(); resolve(v); return true; }
        if (vm.state === 'stopped') { cleanup(); reject(new Error(`VM stopped before ${what}${endedWith ? ` (${endedWith})` : ''}; console: ${JSON.stringify(text.slice(-400))}`)); return true; }
        return false;
      };
      const timer = setTimeout(() => { cleanup(); reject(new Error(`timed out waiting for ${what}; console: ${JSON.stringify(text.slice(-400))}`)); }, timeoutMs);
      const cleanup = () => { clearTimeout(timer); waiters.delete(w); };
      const w = () => { tryIt(); };
      if (!tryIt()) waiters.add(w);
    });
  return {
    vm,
    console: () => text,
    events,
    waitForConsole: (pattern, timeoutMs = scaled(20_000)) => until(
      () => ((typeof pattern === 'string' ? text.includes(pattern) : pattern.test(text)) ? true : undefined),
      `console ${pattern}`, timeoutMs,
    ).then(() => undefined),
    waitForEvent: (event, timeoutMs = scaled(20_000)) => until(() => events.find((e) => e.event === event), `@u1 ${event}`, timeoutMs),
    ended: () => endedWith ?? (vm.state === 'stopped' ? 'stopped' : undefined),
  };
}

export function openFdCount(): number {
  return readdirSync('/proc/self/fd').length;
}

/**
 * Threads of this process, less the idle vCPU workers: a worker that has left its VM waits in the
 * pool for the next one (worker-pool.ts, bounded), named vcpu-idle, instead of ending, so "no
 * thread left behind by a VM" means no thread but those. A worker still in a VM is named vcpu-N
 * and counts, as does every other thread.
 */
export function threadCount(): number {
  return threadNames().filter((n) => n !== IDLE_VCPU_THREAD_NAME).length;
}

/** The names (comm) of this process's threads, or `pid`'s; a thread that ends meanwhile is left out. */
export function threadNames(pid: number | 'self' = 'self'): string[] {
  const names: string[] = [];
  for (const t of readdirSync(`/proc/${pid}/task`)) {
    try {
      names.push(readFileSync(`/proc/${pid}/task/${t}/comm`, 'utf8').trim());
    } catch { /* it ended meanwhile */ }
  }
  return names;
}

/** Threads that are vCPU workers in a VM (named vcpu-N, for their vCPU). */
export function vcpuThreadCount(): number {
  return threadNames().filter((n) => /^vcpu-\d+$/.test(n)).length;
}

/** vCPU workers waiting in the pool for a VM. */
export function idleVcpuThreadCount(): number {
  return threadNames().filter((n) => n === IDLE_VCPU_THREAD_NAME).length;
}

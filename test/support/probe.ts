// Test support: boot the probe guest in-process and watch its two serial lines.
import { existsSync, readdirSync } from 'node:fs';
import type { AgentEvent } from '../../electron/vmm/agent/line-protocol.ts';
import { validateConfig } from '../../electron/vmm/config/vm-config.ts';
import { resolveMachine } from '../../electron/vmm/config/resolve.ts';
import { probeHost } from '../../electron/vmm/machine/host-caps.ts';
import { VirtualMachine } from '../../electron/vmm/vm.ts';
import { scaled } from './time-scale.ts';

export const kvmAvailable = existsSync(process.env.UNHALT_KVM_DEVICE ?? '/dev/kvm');

export interface Watched {
  vm: VirtualMachine;
  console(): string;
  events: AgentEvent[];
  waitForConsole(pattern: RegExp | string, timeoutMs?: number): Promise<void>;
  waitForEvent(event: string, timeoutMs?: number): Promise<AgentEvent>;
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
  vm.on('console', (b) => { text += Buffer.from(b).toString('latin1'); poke(); });
  vm.on('agent', (e) => { events.push(e); poke(); });
  let ended = '';
  vm.on('exit', (e: { kind: string; message: string }) => { ended = ` (${e.kind}: ${e.message})`; poke(); });
  const until = <T>(check: () => T | undefined, what: string, timeoutMs: number) =>
    new Promise<T>((resolve, reject) => {
      const tryIt = () => {
        const v = check();
        if (v !== undefined) { cleanup(); resolve(v); return true; }
        if (vm.state === 'stopped') { cleanup(); reject(new Error(`VM stopped before ${what}${ended}; console: ${JSON.stringify(text.slice(-400))}`)); return true; }
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
  };
}

export function openFdCount(): number {
  return readdirSync('/proc/self/fd').length;
}

export function threadCount(): number {
  return readdirSync('/proc/self/task').length;
}

// Host mode for benchmarks: an `unhalt serve` of a tree on a temporary home, and a WebSocket
// client of its API (requests by id, events to listeners). Shared by the benchmarks that measure
// the app's side (bench/vm-memory.ts).
import { spawn, type ChildProcess } from 'node:child_process';
import { WebSocket } from 'ws';
import type { ApiEvent, ServerMessage } from '../electron/service/api.ts';
import { removeDir, tempDir } from './lib.ts';

export interface HostMode {
  proc: ChildProcess;
  call(method: string, ...params: unknown[]): Promise<unknown>;
  on(listener: (e: ApiEvent) => void): void;
  close(): Promise<void>;
}

/** Starts `node BIN serve --no-open` on a fresh home and connects to its API. */
export async function openHostMode(bin: string, env: Record<string, string> = {}): Promise<HostMode> {
  const home = tempDir('host-mode');
  const proc = spawn(process.execPath, [bin, 'serve', '--no-open'], {
    env: { ...process.env, UNHALT_HOME: home, DISPLAY: '', WAYLAND_DISPLAY: '', ...env }, stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  proc.stderr!.on('data', (d) => { stderr += d; });
  const url = await new Promise<URL>((resolve, reject) => {
    let out = '';
    proc.stdout!.on('data', (d) => { out += d; if (out.includes('\n')) resolve(new URL(out.trim())); });
    proc.once('exit', (code) => reject(new Error(`unhalt serve exited with ${code}: ${stderr}`)));
  });
  const ws = new WebSocket(`ws://${url.host}/api?token=${url.searchParams.get('token')}`, { origin: url.origin });
  await new Promise((resolve, reject) => { ws.once('open', resolve); ws.once('error', reject); });
  const waiting = new Map<number, (m: ServerMessage) => void>();
  const listeners: ((e: ApiEvent) => void)[] = [];
  ws.on('message', (d) => {
    const m = JSON.parse(d.toString()) as ServerMessage & { event?: ApiEvent };
    if ('id' in m && typeof m.id === 'number') { waiting.get(m.id)?.(m); waiting.delete(m.id); return; }
    const e = (m.event ?? m) as ApiEvent;
    for (const f of listeners) f(e);
  });
  let nextId = 1;
  return {
    proc,
    call(method, ...params) {
      const id = nextId++;
      return new Promise((resolve, reject) => {
        waiting.set(id, (m) => ('error' in m && m.error ? reject(new Error(`${method}: ${JSON.stringify(m.error)}`)) : resolve((m as { result?: unknown }).result)));
        ws.send(JSON.stringify({ id, method, params }));
      });
    },
    on: (f) => { listeners.push(f); },
    async close() {
      ws.close();
      proc.kill('SIGTERM');
      if (proc.exitCode === null) await new Promise((r) => proc.once('exit', r));
      removeDir(home);
    },
  };
}

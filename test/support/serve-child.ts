// Test support: a real `unhalt serve` child process on a given UNHALT_HOME, and a WebSocket
// client of its API ({ id, method, params } in, { id, result | error } out).
import { spawn, type ChildProcess } from 'node:child_process';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { WebSocket } from 'ws';
import type { ApiEvent, ServerMessage } from '../../electron/service/api.ts';
import { UNHALT_BIN } from './cli.ts';

export interface ServeChild {
  child: ChildProcess;
  stderr(): string;
  /** The URL it printed (with token), or undefined if it exited first; `code` is then set. */
  url: Promise<URL | undefined>;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

export function serveEnv(home: string): NodeJS.ProcessEnv {
  return { ...process.env, UNHALT_HOME: home, NODE_COMPILE_CACHE: join(tmpdir(), 'unhalt-compile-cache'), DISPLAY: '', WAYLAND_DISPLAY: '' };
}

export function startServe(home: string, args: string[] = []): ServeChild {
  const child = spawn(process.execPath, [UNHALT_BIN, 'serve', '--no-open', ...args], { env: serveEnv(home), stdio: ['ignore', 'pipe', 'pipe'] });
  let err = '';
  child.stderr!.on('data', (d) => { err += d; });
  // 'close', not 'exit': 'exit' can come before the last bytes of the child's stdout and stderr
  // have been read, and callers read stderr() (and the URL) once this resolves.
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.on('close', (code, signal) => resolve({ code, signal })));
  const url = new Promise<URL | undefined>((resolve) => {
    let out = '';
    child.stdout!.on('data', (d) => { out += d; if (out.includes('\n')) resolve(new URL(out.trim())); });
    void exited.then(() => resolve(undefined));
  });
  // Never leak a child past a failed test.
  const killer = setTimeout(() => child.kill('SIGKILL'), 120_000);
  void exited.then(() => clearTimeout(killer));
  return { child, stderr: () => err, url, exited };
}

export interface ApiClient {
  call(method: string, ...params: unknown[]): Promise<ServerMessage>;
  /** Events the server pushes (those of subscribed VMs among them). */
  onEvent(listener: (event: ApiEvent) => void): void;
  close(): void;
}

export async function apiClient(url: URL): Promise<ApiClient> {
  const ws = new WebSocket(`ws://${url.host}/api?token=${url.searchParams.get('token')}`, { origin: url.origin });
  await new Promise((resolve, reject) => { ws.once('open', resolve); ws.once('error', reject); });
  const waiting = new Map<number, (m: ServerMessage) => void>();
  const listeners: ((event: ApiEvent) => void)[] = [];
  ws.on('message', (d) => {
    const m = JSON.parse(d.toString()) as ServerMessage;
    if ('id' in m) { waiting.get(m.id)?.(m); waiting.delete(m.id); } else if ('event' in m) for (const l of listeners) l(m.event);
  });
  let nextId = 1;
  return {
    call(method, ...params) {
      const id = nextId++;
      return new Promise((resolve) => { waiting.set(id, resolve); ws.send(JSON.stringify({ id, method, params })); });
    },
    onEvent: (listener) => { listeners.push(listener); },
    close: () => ws.close(),
  };
}

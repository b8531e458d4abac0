// A small QMP client over a unix socket, for watching a QEMU that someone else runs: greeting,
// qmp_capabilities, then commands with ids whose replies are matched by id (events are dropped).
// It only ever sends the read-only commands of READ_ONLY_COMMANDS: watching must never change the
// watched VM, so anything else is refused here, before a byte is written.
import { connect, type Socket } from 'node:net';
import { lstatSync } from 'node:fs';

/** The only commands this client sends (after qmp_capabilities, which only opens the session). */
export const READ_ONLY_COMMANDS: ReadonlySet<string> = new Set([
  'query-stats', 'query-stats-schemas', 'query-status', 'query-cpus-fast', 'query-version', 'query-name',
]);

/** A reply line longer than this ends the session: a broken or hostile peer cannot grow our memory. */
export const MAX_LINE_BYTES = 4 * 1024 * 1024;
const GREETING_TIMEOUT_MS = 2000;
const COMMAND_TIMEOUT_MS = 5000;

/** One line for the user: what went wrong, naming the socket, and what to do. */
export class QmpError extends Error {
  override name = 'QmpError';
}

export interface QmpOptions {
  greetingTimeoutMs?: number;
  commandTimeoutMs?: number;
  maxLineBytes?: number;
}

interface Pending {
  resolve(value: unknown): void;
  reject(e: Error): void;
  timer: NodeJS.Timeout;
}

export class QmpClient {
  readonly path: string;
  /** QEMU's version from the greeting, e.g. "7.2.22". */
  readonly version: string;
  /** Resolves when the connection is gone, with why (QEMU exited, or we closed it). */
  readonly closed: Promise<string>;
  private readonly socket: Socket;
  private readonly pending = new Map<string, Pending>();
  private readonly commandTimeoutMs: number;
  private nextId = 1;
  private gone?: string;
  private peerEnded = false;

  private constructor(path: string, socket: Socket, version: string, lines: LineReader, commandTimeoutMs: number) {
    this.path = path;
    this.socket = socket;
    this.version = version;
    this.commandTimeoutMs = commandTimeoutMs;
    let markClosed!: (why: string) => void;
    this.closed = new Promise((resolve) => { markClosed = resolve; });
    lines.onLine = (line) => this.onLine(line);
    lines.onError = (what) => { this.end(`${path} sent ${what}: not a QMP server this client will read`); socket.destroy(); };
    socket.on('close', () => {
      if (!this.gone) this.peerEnded = true;
      this.end(`QEMU closed its QMP socket ${path} (the VM exited)`);
      markClosed(this.gone!);
    });
  }

  /** Connects, reads the greeting and opens the session; every failure is one QmpError line. */
  static async connect(path: string, options: QmpOptions = {}): Promise<QmpClient> {
    checkSocketPath(path);
    const greetingMs = options.greetingTimeoutMs ?? GREETING_TIMEOUT_MS;
    const socket = connect(path);
    const lines = new LineReader(socket, options.maxLineBytes ?? MAX_LINE_BYTES);
    let greeting: Record<string, unknown>;
    try {
      greeting = await new Promise<Record<string, unknown>>((resolve, reject) => {
        const timer = setTimeout(() => reject(new QmpError(`no QMP greeting on ${path} within ${greetingMs} ms: another client holds the socket (QEMU serves one at a time; libvirt keeps its own) — give this QEMU a second -qmp socket to watch it`)), greetingMs);
        const fail = (e: Error) => { clearTimeout(timer); reject(e); };
        socket.once('error', (e) => fail(connectError(path, e as NodeJS.ErrnoException)));
        socket.once('close', () => fail(new QmpError(`${path} closed the connection before its QMP greeting: another client holds it, or it is not a QMP socket`)));
        lines.onError = (what) => fail(new QmpError(`${path} sent ${what}: not a QMP server this client will read`));
        lines.onLine = (line) => {
          clearTimeout(timer);
          const msg = parseObject(line);
          if (!msg || typeof msg.QMP !== 'object') reject(new QmpError(`${path} is not a QMP socket (its first line is not a QMP greeting)`));
          else resolve(msg.QMP as Record<string, unknown>);
        };
      });
    } catch (e) {
      socket.destroy();
      throw e;
    }
    socket.removeAllListeners('error');
    socket.removeAllListeners('close');
    socket.on('error', () => { /* 'close' follows and says it */ });
    const client = new QmpClient(path, socket, versionOf(greeting), lines, options.commandTimeoutMs ?? COMMAND_TIMEOUT_MS);
    try {
      await client.send('qmp_capabilities');
    } catch (e) {
      client.close();
      throw e;
    }
    return client;
  }

  /** True once QEMU closed the connection (it exited), as opposed to us closing it or giving up on it. */
  get peerClosed(): boolean {
    return this.peerEnded;
  }

  /** Runs one read-only command; anything off READ_ONLY_COMMANDS is refused without being sent. */
  execute(command: string, args?: Record<string, unknown>): Promise<unknown> {
    if (!READ_ONLY_COMMANDS.has(command)) {
      return Promise.reject(new QmpError(`"${command.slice(0, 60)}" is not a read-only QMP command; watching sends only ${[...READ_ONLY_COMMANDS].join(', ')}`));
    }
    return this.send(command, args);
  }

  /** Ends the session (idempotent); commands still waiting are rejected. */
  close(): void {
    this.end(`closed the QMP connection to ${this.path}`);
    this.socket.destroy();
  }

  private send(command: string, args?: Record<string, unknown>): Promise<unknown> {
    if (this.gone) return Promise.reject(new QmpError(this.gone));
    const id = `unhalt-${this.nextId++}`;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(id);
        reject(new QmpError(`QEMU did not answer ${command} on ${this.path} within ${this.commandTimeoutMs} ms`));
      }, this.commandTimeoutMs);
      this.pending.set(id, { resolve, reject, timer });
      this.socket.write(`${JSON.stringify(args ? { execute: command, arguments: args, id } : { execute: command, id })}\n`);
    });
  }

  private onLine(line: string): void {
    const msg = parseObject(line);
    if (!msg || typeof msg.id !== 'string') return; // events, and anything not ours
    const p = this.pending.get(msg.id);
    if (!p) return;
    this.pending.delete(msg.id);
    clearTimeout(p.timer);
    if ('return' in msg) { p.resolve(msg.return); return; }
    const err = msg.error as { class?: unknown; desc?: unknown } | undefined;
    p.reject(new QmpError(`QEMU refused: ${String(err?.desc ?? 'no reason given').slice(0, 200)}${err?.class ? ` (${String(err.class)})` : ''}`));
  }

  private end(why: string): void {
    this.gone ??= why;
    for (const p of this.pending.values()) { clearTimeout(p.timer); p.reject(new QmpError(this.gone)); }
    this.pending.clear();
  }
}

/** Splits the socket's bytes into lines, refusing a line longer than the bound. */
class LineReader {
  onLine: (line: string) => void = () => {};
  /** Told what was wrong ("a line over N bytes"); the reader stops reading. */
  onError: (what: string) => void = () => {};
  private chunks: Buffer[] = [];
  private size = 0;

  constructor(socket: Socket, maxLineBytes: number) {
    socket.on('data', (data: Buffer) => {
      let start = 0;
      for (let nl = data.indexOf(10); nl >= 0; nl = data.indexOf(10, start)) {
        this.chunks.push(data.subarray(start, nl));
        const line = Buffer.concat(this.chunks).toString('utf8');
        this.chunks = [];
        this.size = 0;
        start = nl + 1;
        this.onLine(line);
      }
      const rest = data.subarray(start);
      this.size += rest.length;
      if (this.size > maxLineBytes) {
        this.chunks = [];
        this.size = 0;
        socket.pause();
        this.onError(`a line over ${maxLineBytes} bytes`);
        return;
      }
      if (rest.length) this.chunks.push(Buffer.from(rest));
    });
  }
}

/** A missing path or one that is not a socket, said before connecting (connect's errno is vaguer). */
function checkSocketPath(path: string): void {
  let isSocket: boolean;
  try {
    isSocket = lstatSync(path).isSocket();
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') throw new QmpError(`no QMP socket at ${path}: start QEMU with -qmp unix:${path},server=on,wait=off (or check the path)`);
    if (code === 'EACCES') throw new QmpError(`permission denied reaching ${path}: run as a user who may open it`);
    throw new QmpError(`cannot reach ${path}: ${(e as Error).message}`);
  }
  if (!isSocket) throw new QmpError(`${path} is not a socket: give the path of QEMU's -qmp unix:PATH,server=on socket`);
}

function connectError(path: string, e: NodeJS.ErrnoException): QmpError {
  switch (e.code) {
    case 'ECONNREFUSED': return new QmpError(`nothing listens on ${path} (connection refused): the QEMU that made it has exited`);
    case 'EACCES': case 'EPERM': return new QmpError(`permission denied opening ${path}: run as the user QEMU runs as (or one in its group)`);
    case 'ENOENT': return new QmpError(`no QMP socket at ${path}: start QEMU with -qmp unix:${path},server=on,wait=off`);
    default: return new QmpError(`cannot connect to ${path}: ${e.code ?? e.message}`);
  }
}

function parseObject(line: string): Record<string, unknown> | undefined {
  try {
    const v: unknown = JSON.parse(line);
    return v !== null && typeof v === 'object' && !Array.isArray(v) ? v as Record<string, unknown> : undefined;
  } catch {
    return undefined;
  }
}

function versionOf(greeting: Record<string, unknown>): string {
  const q = (greeting.version as { qemu?: { major?: number; minor?: number; micro?: number } } | undefined)?.qemu;
  return q ? `${q.major}.${q.minor}.${q.micro}` : 'unknown';
}

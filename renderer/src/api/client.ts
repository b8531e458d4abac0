// One ApiClient implementing UnhaltApi over either transport:
// - Electron: the preload's `window.unhalt = { call(method, ...params), onEvent(listener) }`;
// - host mode: a WebSocket to the page's own origin at /api?token=... (token from the page URL),
//   with request ids, event dispatch, queued calls while (re)connecting and automatic reconnect.
// The methods are installed from api.ts's method table; only types and that plain data come
// from electron/service/api.ts. Errors arrive as { code, message } over both transports.
import { API_ERROR_CODES, API_METHOD_NAMES } from '../../../electron/service/api.ts';
import type {
  ApiErrorCode, ApiErrorDto, ApiEvent, ApiMethod, ClientMessage, ServerMessage, UnhaltApi,
} from '../../../electron/service/api.ts';

/** 'refused': the server answers, but not to this page's key (the token in its URL is wrong or missing). */
export type ConnectionState = 'connecting' | 'open' | 'closed' | 'refused';

/** A rejected call: `code` from the service, or 'disconnected' when the transport dropped it. */
export class ApiError extends Error {
  override name = 'ApiError';
  readonly code: ApiErrorCode | 'disconnected';
  constructor(code: ApiErrorCode | 'disconnected', message: string) {
    super(message);
    this.code = code;
  }
}

/** What Electron's preload exposes (contextBridge). */
export interface PreloadBridge {
  call(method: string, ...params: unknown[]): Promise<unknown>;
  onEvent(listener: (event: ApiEvent) => void): () => void;
}

declare global {
  interface Window {
    unhalt?: PreloadBridge;
  }
}

interface Transport {
  call(method: ApiMethod, params: unknown[]): Promise<unknown>;
  close(): void;
}

type EventListener = (event: ApiEvent) => void;
type ConnectionListener = (state: ConnectionState, error?: string) => void;

const ERROR_CODES: ReadonlySet<string> = new Set(API_ERROR_CODES);

function isApiErrorDto(e: unknown): e is ApiErrorDto {
  if (typeof e !== 'object' || e === null) return false;
  const { code, message } = e as { code?: unknown; message?: unknown };
  return typeof code === 'string' && ERROR_CODES.has(code) && typeof message === 'string';
}

/** A rejection as an ApiError: the service's { code, message } as it came, anything else 'internal'. */
function toApiError(e: unknown): ApiError {
  if (e instanceof ApiError) return e;
  if (isApiErrorDto(e)) return new ApiError(e.code, e.message);
  // Not from the service (a bug in a transport): shown as it is, never parsed.
  return new ApiError('internal', e instanceof Error ? e.message : String(e));
}

class BridgeTransport implements Transport {
  private readonly off: () => void;
  constructor(private readonly bridge: PreloadBridge, onEvent: EventListener) {
    this.off = bridge.onEvent(onEvent);
  }
  async call(method: ApiMethod, params: unknown[]): Promise<unknown> {
    try {
      return await this.bridge.call(method, ...params);
    } catch (e) {
      throw toApiError(e);
    }
  }
  close(): void {
    this.off();
  }
}

interface Pending {
  resolve(value: unknown): void;
  reject(error: ApiError): void;
  method: ApiMethod;
}

const RECONNECT_MIN_MS = 250;
const RECONNECT_MAX_MS = 5000;

class SocketTransport implements Transport {
  private ws: WebSocket | null = null;
  private nextId = 1;
  private readonly pending = new Map<number, Pending>();
  /** Calls made while the socket is not open, sent in order on (re)connect. */
  private queue: { msg: ClientMessage; pending: Pending }[] = [];
  private delay = RECONNECT_MIN_MS;
  private timer: ReturnType<typeof setTimeout> | null = null;
  private closed = false;
  /** Connection attempts that failed since the socket was last open. */
  private failures = 0;
  /** The server said this page's key is wrong: the banner says so until a connection opens. */
  private refused = false;

  constructor(
    private readonly url: string,
    private readonly onEvent: EventListener,
    private readonly onState: ConnectionListener,
  ) {
    this.connect();
  }

  private connect(): void {
    if (!this.refused) this.onState('connecting');
    let ws: WebSocket;
    try {
      ws = new WebSocket(this.url);
    } catch (e) {
      this.onState('closed', (e as Error).message);
      this.scheduleReconnect();
      return;
    }
    this.ws = ws;
    let opened = false;
    ws.onopen = () => {
      opened = true;
      this.refused = false;
      this.delay = RECONNECT_MIN_MS;
      this.failures = 0;
      const queued = this.queue;
      this.queue = [];
      for (const q of queued) this.send(q.msg, q.pending);
      this.onState('open');
    };
    ws.onmessage = (ev) => this.receive(ev.data);
    ws.onclose = (ev) => {
      if (this.ws !== ws) return;
      this.ws = null;
      for (const [id, p] of this.pending) {
        this.pending.delete(id);
        p.reject(new ApiError('disconnected', `connection to Unhalt lost during ${p.method}`));
      }
      this.failures++;
      const reason = ev.code === 1008 || ev.code === 4401 || this.failures >= 3
        ? 'this tab keeps trying; if Unhalt was restarted on another port or with a new token, open the URL `unhalt serve` printed'
        : undefined;
      if (!this.refused) this.onState('closed', reason);
      // Refused before it opened: ask the server whether the key is what it refused.
      if (!opened && !this.closed) void this.checkKey();
      if (!this.closed) this.scheduleReconnect();
    };
    ws.onerror = () => { /* onclose follows */ };
  }

  /** GET /api/key: 401 means the server is there and this key is not the one. */
  private async checkKey(): Promise<void> {
    let status = 0;
    try {
      const url = new URL(this.url);
      url.protocol = url.protocol === 'wss:' ? 'https:' : 'http:';
      url.pathname = '/api/key';
      status = (await fetch(url, { cache: 'no-store' })).status;
    } catch { /* the server is not there: 'closed' says so */ }
    if (this.closed || this.ws?.readyState === WebSocket.OPEN) return;
    if (status === 401) {
      this.refused = true;
      this.onState('refused', keyProblem(new URL(this.url).searchParams.get('token') ?? ''));
    } else if (this.refused) {
      this.refused = false;
      this.onState('closed');
    }
  }

  private scheduleReconnect(): void {
    if (this.timer || this.closed) return;
    this.timer = setTimeout(() => {
      this.timer = null;
      this.connect();
    }, this.delay);
    this.delay = Math.min(RECONNECT_MAX_MS, this.delay * 2);
  }

  private receive(data: unknown): void {
    if (typeof data !== 'string') return;
    let msg: ServerMessage;
    try {
      msg = JSON.parse(data) as ServerMessage;
    } catch {
      return;
    }
    if ('event' in msg) {
      this.onEvent(msg.event);
      return;
    }
    const p = this.pending.get(msg.id);
    if (!p) return;
    this.pending.delete(msg.id);
    if ('error' in msg) p.reject(toApiError(msg.error));
    else p.resolve(msg.result);
  }

  private send(msg: ClientMessage, pending: Pending): void {
    this.pending.set(msg.id, pending);
    this.ws!.send(JSON.stringify(msg));
  }

  call(method: ApiMethod, params: unknown[]): Promise<unknown> {
    return new Promise((resolve, reject) => {
      const msg: ClientMessage = { id: this.nextId++, method, params };
      const pending: Pending = { resolve, reject, method };
      if (this.ws && this.ws.readyState === WebSocket.OPEN) this.send(msg, pending);
      else if (this.closed) reject(new ApiError('disconnected', 'the client is closed'));
      else this.queue.push({ msg, pending });
    });
  }

  close(): void {
    this.closed = true;
    if (this.timer) clearTimeout(this.timer);
    this.ws?.close();
    for (const q of this.queue) q.pending.reject(new ApiError('disconnected', 'the client is closed'));
    this.queue = [];
  }
}

/** What is wrong with a refused key and how to get a good one (the banner's text). */
export function keyProblem(token: string): string {
  const where = 'Open the address `unhalt serve` printed when it started (it ends in /?token=…); the key is also in the file run/host-token '
    + 'in Unhalt\'s home folder (UNHALT_HOME if set, else ~/.local/share/unhalt): `cat ~/.local/share/unhalt/run/host-token`, and open this page\'s address with ?token= and that key.';
  return token
    ? `This link's key is wrong: this Unhalt server does not accept the token in its address (it may be from another server, or cut short). ${where}`
    : `This link has no key: Unhalt's address needs the ?token=… that \`unhalt serve\` prints. ${where}`;
}

/** The host-mode API URL for a page served by `unhalt serve` (same origin, the page's token). */
export function socketUrl(loc: Location = location): string {
  const token = new URLSearchParams(loc.search).get('token') ?? '';
  const scheme = loc.protocol === 'https:' ? 'wss:' : 'ws:';
  return `${scheme}//${loc.host}/api?token=${encodeURIComponent(token)}`;
}

// Every UnhaltApi method exists on ApiClient; the constructor installs them from the table.
// eslint-disable-next-line @typescript-eslint/no-unsafe-declaration-merging
export interface ApiClient extends UnhaltApi {}

export class ApiClient {
  private readonly transport: Transport;
  private readonly listeners = new Set<EventListener>();
  private readonly connListeners = new Set<ConnectionListener>();
  private state: ConnectionState = 'connecting';
  private lastError: string | undefined;
  readonly kind: 'electron' | 'websocket';

  constructor(opts: { bridge?: PreloadBridge; url?: string } = {}) {
    const bridge = opts.bridge ?? (typeof window !== 'undefined' ? window.unhalt : undefined);
    const emit = (ev: ApiEvent) => {
      for (const l of this.listeners) {
        try {
          l(ev);
        } catch (e) {
          console.error('unhalt: event listener failed', e);
        }
      }
    };
    if (bridge && !opts.url) {
      this.kind = 'electron';
      this.transport = new BridgeTransport(bridge, emit);
      this.state = 'open';
    } else {
      this.kind = 'websocket';
      this.transport = new SocketTransport(opts.url ?? socketUrl(), emit, (s, err) => {
        this.state = s;
        this.lastError = err;
        for (const l of this.connListeners) l(s, err);
      });
    }
    const self = this as unknown as Record<ApiMethod, (...params: unknown[]) => Promise<unknown>>;
    for (const m of API_METHOD_NAMES) self[m] = (...params: unknown[]) => this.transport.call(m, trimUndefined(params));
  }

  /** Listens to every ApiEvent; returns the unsubscribe function. */
  onEvent(listener: EventListener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Connection state changes (host mode reconnects; Electron is always 'open'). */
  onConnection(listener: ConnectionListener): () => void {
    this.connListeners.add(listener);
    return () => this.connListeners.delete(listener);
  }

  connection(): { state: ConnectionState; error?: string } {
    return { state: this.state, error: this.lastError };
  }

  close(): void {
    this.transport.close();
    this.listeners.clear();
    this.connListeners.clear();
  }
}

/** Optional trailing parameters left undefined are not sent (JSON would turn them into null). */
function trimUndefined(params: unknown[]): unknown[] {
  let n = params.length;
  while (n > 0 && params[n - 1] === undefined) n--;
  return n === params.length ? params : params.slice(0, n);
}

// ---- console bytes: latin1 "binary strings" on the wire, bytes in xterm ----

/** A binary string (one char per byte, 0-255) to bytes. */
export function binaryToBytes(data: string): Uint8Array {
  const out = new Uint8Array(data.length);
  for (let i = 0; i < data.length; i++) out[i] = data.charCodeAt(i) & 0xff;
  return out;
}

/** Bytes to a binary string, in chunks (String.fromCharCode's argument limit). */
export function bytesToBinary(bytes: Uint8Array): string {
  let s = '';
  for (let i = 0; i < bytes.length; i += 0x8000) {
    s += String.fromCharCode.apply(null, bytes.subarray(i, i + 0x8000) as unknown as number[]);
  }
  return s;
}

const encoder = new TextEncoder();

/** What the user typed or pasted (UTF-16 text) as the UTF-8 bytes of a binary string. */
export function textToBinary(text: string): string {
  // Pure ASCII (the common case: keystrokes) needs no conversion.
  if (/^[\x00-\x7f]*$/.test(text)) return text;
  return bytesToBinary(encoder.encode(text));
}

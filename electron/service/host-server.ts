// Host mode: the built renderer over HTTP and the API over a WebSocket, for a browser on this
// machine. Loopback only (127.0.0.1, never 0.0.0.0). Every WebSocket needs the random token that
// is printed in the URL (compared in constant time) and an Origin equal to this server's own,
// refused with 401/403 before the upgrade. Requests are bounded (no HTTP bodies at all, WebSocket
// messages up to 1 MiB), static files come only from renderer/dist, and the Host header must name
// this server (a DNS-rebinding page on another name gets nothing).
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import { WebSocketServer, type WebSocket } from 'ws';
import type { ServerMessage } from './api.ts';
import { securityHeaders } from '../csp.ts';
import { handleCall, requestId } from './dispatch.ts';
import { ApiError } from './errors.ts';
import { DEFAULT_OUTGOING_LIMITS, Outbox, TOO_FAR_BEHIND, type OutboxCounters, type OutgoingLimits } from './outgoing-budget.ts';
import type { ServiceSession, UnhaltService } from './service.ts';
import { NOT_BUILT_PAGE, RENDERER_DIST, readStatic, rendererBuilt, resolveStatic } from './static-files.ts';

export const LOOPBACK = '127.0.0.1';
export const MAX_MESSAGE_BYTES = 1024 * 1024;
const MAX_CLIENTS = 16;
/** A dropped client that does not read its close frame is cut off after this. */
const CLOSE_GRACE_MS = 1000;

export interface HostServerOptions {
  service: UnhaltService;
  /** 0 (default): any free port. */
  port?: number;
  rendererDir?: string;
  /** The token URLs must carry (`unhalt serve` keeps one per home, host-token.ts); default a fresh random one. */
  token?: string;
  maxMessageBytes?: number;
  /** What one client may have queued (outgoing-budget.ts); tests use small ones. */
  outgoingLimits?: OutgoingLimits;
}

export interface HostServer {
  url: string;
  origin: string;
  port: number;
  token: string;
  /** Streamed events skipped for slow clients so far. */
  readonly droppedEvents: number;
  /** Clients dropped for falling too far behind. */
  readonly droppedClients: number;
  /** The most bytes ever queued for one client (what the outgoing limits bound). */
  readonly peakQueuedBytes: number;
  close(): Promise<void>;
}

export async function startHostServer(options: HostServerOptions): Promise<HostServer> {
  const token = options.token ?? randomBytes(32).toString('base64url');
  const tokenDigest = digest(token);
  const root = options.rendererDir ?? RENDERER_DIST;
  const maxPayload = options.maxMessageBytes ?? MAX_MESSAGE_BYTES;
  let port = 0;
  let droppedClients = 0;
  const counters: OutboxCounters = { skippedEvents: 0, peakWaitingBytes: 0 };
  const limits = options.outgoingLimits ?? DEFAULT_OUTGOING_LIMITS;
  const allowedHosts = () => new Set([`${LOOPBACK}:${port}`, `localhost:${port}`]);
  const allowedOrigins = () => new Set([`http://${LOOPBACK}:${port}`, `http://localhost:${port}`]);
  const headers = () => securityHeaders({ connect: `ws://${LOOPBACK}:${port} ws://localhost:${port}` });

  const wss = new WebSocketServer({ noServer: true, maxPayload, perMessageDeflate: false, clientTracking: true });

  const server: Server = createServer((req, res) => {
    try {
      serveHttp(req, res);
    } catch {
      if (!res.headersSent) plain(res, 500, 'internal error');
      else res.destroy();
    }
  });
  server.headersTimeout = 10_000;
  server.requestTimeout = 30_000;
  server.maxHeadersCount = 64;

  function serveHttp(req: IncomingMessage, res: ServerResponse): void {
    if (!allowedHosts().has(req.headers.host ?? '')) return plain(res, 421, 'wrong Host: use the address Unhalt printed');
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.setHeader('Allow', 'GET, HEAD');
      return plain(res, 405, 'method not allowed');
    }
    // The API is the WebSocket; HTTP carries no bodies at all.
    if (Number(req.headers['content-length'] ?? 0) > 0 || req.headers['transfer-encoding']) return plain(res, 413, 'request bodies are not accepted');
    const rawPath = (req.url ?? '/').split('?')[0]!;
    if (rawPath === '/api') return plain(res, 426, 'the API is a WebSocket');
    // A browser cannot see why a WebSocket upgrade was refused: the page asks here whether its
    // key is the one (204) or not (401), to tell "wrong key" from "server not there".
    if (rawPath === '/api/key') {
      res.setHeader('Cache-Control', 'no-store');
      return tokenMatches(keyOf(req.url)) ? void res.writeHead(204, headers()).end() : plain(res, 401, 'wrong or missing key (token): open the URL `unhalt serve` printed');
    }
    if (!rendererBuilt(root) && (rawPath === '/' || rawPath === '/index.html')) return send(res, 200, 'text/html; charset=utf-8', Buffer.from(NOT_BUILT_PAGE), req.method === 'HEAD');
    const found = resolveStatic(root, rawPath);
    if (found.status !== 200) return plain(res, found.status, found.status === 400 ? 'bad request' : 'not found');
    send(res, 200, found.type, readStatic(found.path), req.method === 'HEAD');
  }

  /** The one token check (constant time) of the WebSocket upgrade and of /api/key. */
  function tokenMatches(given: string | null): boolean {
    return given !== null && timingSafeEqual(digest(given), tokenDigest);
  }

  function keyOf(rawUrl: string | undefined): string | null {
    try {
      return new URL(rawUrl ?? '/', `http://${LOOPBACK}`).searchParams.get('token');
    } catch {
      return null;
    }
  }

  function send(res: ServerResponse, status: number, type: string, body: Buffer, headOnly: boolean): void {
    res.writeHead(status, { ...headers(), 'Content-Type': type, 'Content-Length': body.length, 'Cache-Control': 'no-cache' });
    res.end(headOnly ? undefined : body);
  }

  function plain(res: ServerResponse, status: number, text: string): void {
    res.shouldKeepAlive = false;
    send(res, status, 'text/plain; charset=utf-8', Buffer.from(`${text}\n`), false);
  }

  server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    socket.on('error', () => socket.destroy());
    const refuse = (status: number, text: string) => {
      socket.end(`HTTP/1.1 ${status} ${text}\r\nConnection: close\r\nContent-Type: text/plain\r\nContent-Length: ${text.length + 1}\r\n\r\n${text}\n`);
    };
    let url: URL;
    try {
      url = new URL(req.url ?? '/', `http://${LOOPBACK}:${port}`);
    } catch {
      return refuse(400, 'Bad Request');
    }
    if (url.pathname !== '/api') return refuse(404, 'Not Found');
    if (!allowedHosts().has(req.headers.host ?? '')) return refuse(403, 'Forbidden');
    if (!tokenMatches(url.searchParams.get('token'))) return refuse(401, 'Unauthorized');
    if (!allowedOrigins().has(req.headers.origin ?? '')) return refuse(403, 'Forbidden');
    if (wss.clients.size >= MAX_CLIENTS) return refuse(503, 'Service Unavailable');
    wss.handleUpgrade(req, socket, head, (ws) => connected(ws));
  });

  function connected(ws: WebSocket): void {
    let session: ServiceSession | undefined;
    // Every message to this client passes its outbox, so one budget bounds all of them.
    const outbox = new Outbox(ws, limits, counters, () => {
      droppedClients++;
      session?.close();
      ws.close(TOO_FAR_BEHIND.code, TOO_FAR_BEHIND.reason);
      // A client that does not read will not read the close frame either.
      setTimeout(() => ws.terminate(), CLOSE_GRACE_MS).unref();
    });
    try {
      session = options.service.connect((event) => outbox.event(event));
    } catch {
      ws.close(1013, 'shutting down');
      return;
    }
    const api = session;
    ws.on('message', (data, isBinary) => {
      if (isBinary) {
        ws.close(1003, 'text frames only');
        return;
      }
      let raw: unknown;
      try {
        raw = JSON.parse(data.toString());
      } catch {
        outbox.answer({ id: -1, error: new ApiError('invalid', 'a request must be JSON').toDto() });
        return;
      }
      outbox.call(() => handleCall(api, raw).catch((): ServerMessage => ({ id: requestId(raw), error: { code: 'internal', message: 'internal error' } })));
    });
    ws.on('close', () => api.close());
    ws.on('error', () => ws.terminate());
  }

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    // Loopback only, by construction: the address is not an option.
    server.listen({ host: LOOPBACK, port: options.port ?? 0 }, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const address = server.address();
  if (!address || typeof address === 'string') throw new Error('the server has no TCP address');
  port = address.port;
  const origin = `http://${LOOPBACK}:${port}`;

  return {
    url: `${origin}/?token=${token}`,
    origin,
    port,
    token,
    get droppedEvents() { return counters.skippedEvents; },
    get droppedClients() { return droppedClients; },
    get peakQueuedBytes() { return counters.peakWaitingBytes; },
    async close() {
      for (const c of wss.clients) c.close(1001, 'server shutting down');
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
      for (const c of wss.clients) c.terminate();
      wss.close();
    },
  };
}

/** Fixed-length digests, so the comparison is constant-time whatever length the guess has. */
function digest(s: string): Buffer {
  return createHash('sha256').update(s, 'utf8').digest();
}

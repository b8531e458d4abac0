// Host mode's security, against a real server on 127.0.0.1 and real WebSocket clients: loopback
// only, the token (constant-time compared) and the Origin checked before the upgrade, bounded
// messages, no HTTP bodies, static files only from the renderer folder, a strict CSP.
import { mkdirSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { networkInterfaces } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import type { ServerMessage } from '../../electron/service/api.ts';
import { startHostServer, type HostServer } from '../../electron/service/host-server.ts';
import { MAX_CALLS_IN_FLIGHT } from '../../electron/service/outgoing-budget.ts';
import { createService, type UnhaltService } from '../../electron/service/service.ts';
import { removeTempHomes, tempHome } from '../support/temp-home.ts';

afterAll(removeTempHomes);

/** One raw HTTP/1.1 request, exactly as written (no client-side path normalization). */
function raw(port: number, request: string): Promise<{ status: number; headers: string; body: string }> {
  return new Promise((resolve, reject) => {
    const s = connect(port, '127.0.0.1');
    let data = '';
    s.on('data', (d) => { data += d.toString('latin1'); });
    s.on('error', reject);
    s.on('close', () => {
      const [head = '', ...rest] = data.split('\r\n\r\n');
      resolve({ status: Number(/^HTTP\/1\.1 (\d{3})/.exec(head)?.[1] ?? 0), headers: head, body: rest.join('\r\n\r\n') });
    });
    s.end(request);
  });
}

const get = (port: number, path: string, host = `127.0.0.1:${port}`) =>
  raw(port, `GET ${path} HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n\r\n`);

function openWs(url: string, origin?: string): Promise<WebSocket> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, origin === undefined ? {} : { origin });
    ws.once('open', () => resolve(ws));
    ws.once('unexpected-response', (_req, res) => reject(new Error(`HTTP ${res.statusCode}`)));
    ws.once('error', reject);
  });
}

function nextMessage(ws: WebSocket, match: (m: ServerMessage) => boolean = () => true): Promise<ServerMessage> {
  return new Promise((resolve) => {
    const on = (d: Buffer) => {
      const m = JSON.parse(d.toString()) as ServerMessage;
      if (match(m)) { ws.off('message', on); resolve(m); }
    };
    ws.on('message', on);
  });
}

function closed(ws: WebSocket): Promise<number> {
  return new Promise((resolve) => ws.once('close', (code) => resolve(code)));
}

describe('host mode server', () => {
  let svc: UnhaltService;
  let server: HostServer;
  let root: string;
  let wsUrl: string;

  beforeAll(async () => {
    const home = tempHome('serve');
    root = join(home, 'dist');
    mkdirSync(join(root, 'assets'), { recursive: true });
    writeFileSync(join(root, 'index.html'), '<!doctype html><title>Unhalt UI</title><script type="module" src="./assets/app.js"></script>');
    writeFileSync(join(root, 'assets', 'app.js'), 'console.log("app")');
    // Files a traversal would reach: beside the root and in the home.
    writeFileSync(join(home, 'package.json'), '{"secret":"TRAVERSAL-LEAK"}');
    writeFileSync(join(home, 'secret.txt'), 'TRAVERSAL-LEAK');
    svc = await createService({ home });
    server = await startHostServer({ service: svc, rendererDir: root });
    wsUrl = `ws://127.0.0.1:${server.port}/api?token=${server.token}`;
  });
  afterAll(async () => {
    await server.close();
    await svc.shutdown();
  });

  it('listens on loopback only, with a 32-byte token in the URL', async () => {
    expect(server.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/\?token=[A-Za-z0-9_-]{43}$/);
    expect(Buffer.from(server.token, 'base64url')).toHaveLength(32);
    const external = Object.values(networkInterfaces()).flat().find((i) => i && i.family === 'IPv4' && !i.internal);
    if (external) {
      await expect(new Promise((resolve, reject) => {
        const s = connect(server.port, external.address);
        s.on('connect', () => { s.destroy(); resolve('connected'); });
        s.on('error', reject);
      })).rejects.toThrow(/ECONNREFUSED/);
    }
  });

  it('serves the renderer with a strict CSP and no referrer', async () => {
    const r = await get(server.port, '/');
    expect(r.status).toBe(200);
    expect(r.body).toContain('Unhalt UI');
    expect(r.headers).toMatch(/Content-Security-Policy: default-src 'none'; script-src 'self'; /);
    expect(r.headers).not.toMatch(/unsafe-eval/);
    expect(r.headers).toMatch(/connect-src 'self' ws:\/\/127\.0\.0\.1:\d+/);
    expect(r.headers).toMatch(/Referrer-Policy: no-referrer/);
    expect(r.headers).toMatch(/X-Content-Type-Options: nosniff/);
    expect(r.headers).toMatch(/frame-ancestors 'none'/);
    const js = await get(server.port, '/assets/app.js');
    expect(js.status).toBe(200);
    expect(js.headers).toMatch(/Content-Type: text\/javascript/);
  });

  it('never serves a file outside the renderer folder', async () => {
    const attempts = [
      '/../package.json', '/../secret.txt', '/%2e%2e/package.json', '/%2E%2E/secret.txt', '/..%2fsecret.txt',
      '/%2e%2e%2fsecret.txt', '/assets/../../secret.txt', '/assets/%2e%2e/%2e%2e/secret.txt', '/..%5csecret.txt',
      '/%252e%252e/secret.txt', '/secret.txt%00.js', '//etc/passwd', '/%2fetc%2fpasswd', '/....//secret.txt',
      '/assets/..%2f..%2fpackage.json', '/%c0%ae%c0%ae/secret.txt', '/.%2e/secret.txt',
    ];
    for (const path of attempts) {
      const r = await get(server.port, path);
      expect([400, 404], path).toContain(r.status);
      expect(r.body, path).not.toContain('TRAVERSAL-LEAK');
      expect(r.body, path).not.toContain('root:');
    }
  });

  it('answers only to its own Host name, refuses bodies and other methods', async () => {
    expect((await get(server.port, '/', `evil.example:${server.port}`)).status).toBe(421);
    expect((await get(server.port, '/', 'localhost:1')).status).toBe(421);
    expect((await get(server.port, '/', `localhost:${server.port}`)).status).toBe(200);
    const post = await raw(server.port, `POST /api HTTP/1.1\r\nHost: 127.0.0.1:${server.port}\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello`);
    expect(post.status).toBe(405);
    const body = await raw(server.port, `GET / HTTP/1.1\r\nHost: 127.0.0.1:${server.port}\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello`);
    expect(body.status).toBe(413);
    expect((await get(server.port, '/api')).status).toBe(426);
  });

  it('tells a page whether its key is the one (/api/key: 204 or 401), with the same check as the upgrade', async () => {
    expect((await get(server.port, `/api/key?token=${server.token}`)).status).toBe(204);
    expect((await get(server.port, `/api/key?token=${server.token}x`)).status).toBe(401);
    expect((await get(server.port, '/api/key?token=')).status).toBe(401);
    expect((await get(server.port, '/api/key')).status).toBe(401);
    expect((await get(server.port, `/api/key?token=${server.token}`, `evil.example:${server.port}`)).status).toBe(421);
  });

  it('refuses a WebSocket without the right token (401) or Origin (403), before the upgrade', async () => {
    const origin = server.origin;
    await expect(openWs(`ws://127.0.0.1:${server.port}/api`, origin)).rejects.toThrow('HTTP 401');
    await expect(openWs(`ws://127.0.0.1:${server.port}/api?token=`, origin)).rejects.toThrow('HTTP 401');
    await expect(openWs(`ws://127.0.0.1:${server.port}/api?token=${server.token.slice(0, -1)}${server.token.endsWith('A') ? 'B' : 'A'}`, origin)).rejects.toThrow('HTTP 401');
    await expect(openWs(`${wsUrl}x`, origin)).rejects.toThrow('HTTP 401');
    await expect(openWs(wsUrl)).rejects.toThrow('HTTP 403');
    await expect(openWs(wsUrl, 'http://evil.example')).rejects.toThrow('HTTP 403');
    await expect(openWs(wsUrl, `http://127.0.0.1:${server.port + 1}`)).rejects.toThrow('HTTP 403');
    await expect(openWs(wsUrl, 'null')).rejects.toThrow('HTTP 403');
    await expect(openWs(`ws://127.0.0.1:${server.port}/other?token=${server.token}`, origin)).rejects.toThrow('HTTP 404');
  });

  it('carries the API with the token and its own Origin', async () => {
    const ws = await openWs(wsUrl, server.origin);
    const reply = nextMessage(ws, (m) => 'id' in m && m.id === 1);
    ws.send(JSON.stringify({ id: 1, method: 'listVms', params: [] }));
    expect(await reply).toEqual({ id: 1, result: [] });

    const event = nextMessage(ws, (m) => 'event' in m && m.event.type === 'library');
    const created = nextMessage(ws, (m) => 'id' in m && m.id === 2);
    ws.send(JSON.stringify({ id: 2, method: 'createVm', params: [{ name: 'via-ws', guest: 'probe', memoryMiB: 64 }] }));
    expect(await created).toMatchObject({ id: 2, result: { config: { name: 'via-ws' } } });
    expect(await event).toMatchObject({ event: { type: 'library', vms: [{ config: { name: 'via-ws' } }] } });

    const bad = nextMessage(ws, (m) => 'id' in m && m.id === 3);
    ws.send(JSON.stringify({ id: 3, method: 'getVm', params: ['../../etc/passwd'] }));
    expect(await bad).toEqual({ id: 3, error: { code: 'not-found', message: 'there is no VM with the id "../../etc/passwd"' } });

    const notJson = nextMessage(ws, (m) => 'id' in m && m.id === -1);
    ws.send('{"id": 4, "method": ');
    expect(await notJson).toEqual({ id: -1, error: { code: 'invalid', message: 'a request must be JSON' } });

    const unknown = nextMessage(ws, (m) => 'id' in m && m.id === 5);
    ws.send(JSON.stringify({ id: 5, method: 'constructor', params: [] }));
    expect(await unknown).toMatchObject({ id: 5, error: { code: 'invalid' } });
    ws.close();
  });

  it('closes a connection that sends more than 1 MiB in one message (1009) or binary (1003)', async () => {
    const big = await openWs(wsUrl, server.origin);
    const bigClosed = closed(big);
    big.send(JSON.stringify({ id: 1, method: 'createVm', params: [{ name: 'x'.repeat(2 * 1024 * 1024) }] }));
    expect(await bigClosed).toBe(1009);

    const bin = await openWs(wsUrl, server.origin);
    const binClosed = closed(bin);
    bin.send(Buffer.from([1, 2, 3]));
    expect(await binClosed).toBe(1003);

    // The server is still fine for everyone else.
    const ok = await openWs(wsUrl, server.origin);
    const reply = nextMessage(ok, (m) => 'id' in m);
    ok.send(JSON.stringify({ id: 9, method: 'listExperiments', params: [] }));
    expect(await reply).toEqual({ id: 9, result: [] });
    ok.close();
  });
});

describe('host mode without a built renderer', () => {
  it('serves a page saying how to build it', async () => {
    const home = tempHome('serve');
    const svc = await createService({ home });
    const server = await startHostServer({ service: svc, rendererDir: join(home, 'nothing-here') });
    const r = await get(server.port, '/');
    expect(r.status).toBe(200);
    expect(r.body).toContain('npm run build:renderer');
    expect(r.headers).toMatch(/Content-Security-Policy/);
    expect((await get(server.port, '/assets/app.js')).status).toBe(404);
    await server.close();
    await svc.shutdown();
  });
});

describe('host mode with a client that stops reading', () => {
  it('bounds what is queued for it, drops it with a reason, and keeps serving a healthy client', async () => {
    const svc = await createService({ home: tempHome('slow') });
    const limits = { streamBytes: 256 * 1024, clientBytes: 1024 * 1024 };
    const server = await startHostServer({ service: svc, rendererDir: tempHome('slow-dist'), outgoingLimits: limits });
    const url = `ws://127.0.0.1:${server.port}/api?token=${server.token}`;
    try {
      // ~100 VMs make every library update ~40 KB.
      for (let i = 0; i < 100; i++) await svc.createVm({ name: `vm-${i}`, guest: 'probe', memoryMiB: 64, append: `scenario=echo pad=${'p'.repeat(200)}` });
      const [first] = await svc.listVms();
      const slow = await openWs(url, server.origin);
      const healthy = await openWs(url, server.origin);
      let healthyEvents = 0;
      healthy.on('message', () => { healthyEvents++; });
      const slowClosed = new Promise<{ code: number; reason: string }>((resolve) => slow.once('close', (code, reason) => resolve({ code, reason: reason.toString() })));
      let slowCloseSeen = false;
      void slowClosed.then(() => { slowCloseSeen = true; });
      slow.pause(); // stops reading its socket: the kernel's buffers fill, then the server's
      const rssBefore = process.memoryUsage().rss;
      let updates = 0;
      const started = Date.now();
      // The healthy client reads in this same process: let its socket be read between updates.
      const tick = () => new Promise((r) => setTimeout(r, 1));
      while (server.droppedClients === 0 && Date.now() - started < 60_000) {
        await svc.updateVm(first!.id, { ...first!.config, append: `scenario=echo n=${updates++}` });
        await tick();
      }
      expect(server.droppedClients).toBe(1);
      const dropMs = Date.now() - started;
      // More updates after the drop queue nothing more for anyone.
      for (let i = 0; i < 50; i++) {
        await svc.updateVm(first!.id, { ...first!.config, append: `scenario=echo after=${i}` });
        await tick();
      }
      expect(server.droppedClients).toBe(1);
      const rssGrowthMiB = (process.memoryUsage().rss - rssBefore) / 1048576;
      expect(server.peakQueuedBytes).toBeLessThanOrEqual(limits.clientBytes + 64 * 1024);
      // The healthy client got every update and still answers.
      const reply = nextMessage(healthy, (m) => 'id' in m && m.id === 7);
      healthy.send(JSON.stringify({ id: 7, method: 'listVms', params: [] }));
      expect(((await reply) as { result: unknown[] }).result).toHaveLength(100);
      expect(healthyEvents).toBeGreaterThanOrEqual(updates);
      // Once it reads again, the slow client learns why it was dropped (or was cut off when it did not).
      slow.resume();
      const close = await slowClosed;
      expect(slowCloseSeen).toBe(true);
      expect([4008, 1006]).toContain(close.code);
      if (close.code === 4008) expect(close.reason).toBe('too far behind: reconnect and subscribe again');
      // Reconnecting works.
      const again = await openWs(url, server.origin);
      const r2 = nextMessage(again, (m) => 'id' in m && m.id === 1);
      again.send(JSON.stringify({ id: 1, method: 'listVms', params: [] }));
      expect(((await r2) as { result: unknown[] }).result).toHaveLength(100);
      again.close();

      // Answers are bounded by backpressure, not by dropping: a client that sends 400 requests
      // (~55 KiB answers each, 21 MiB in all) without reading is simply not read from meanwhile.
      const piper = await openWs(url, server.origin);
      const peakBefore = server.peakQueuedBytes;
      piper.pause();
      for (let i = 0; i < 400; i++) piper.send(JSON.stringify({ id: 1000 + i, method: 'listVms', params: [] }));
      await new Promise((r) => setTimeout(r, 1500));
      const answered = new Set<number>();
      const all = new Promise<void>((resolve) => piper.on('message', (d: Buffer) => {
        const m = JSON.parse(d.toString()) as ServerMessage;
        if ('id' in m) answered.add(m.id);
        if (answered.size === 400) resolve();
      }));
      piper.resume();
      await all;
      expect(server.droppedClients).toBe(1);
      expect(Math.max(peakBefore, server.peakQueuedBytes)).toBeLessThanOrEqual(limits.clientBytes + (MAX_CALLS_IN_FLIGHT + 1) * 64 * 1024);
      piper.close();
      healthy.close();
      process.stdout.write(`slow client: dropped after ${updates} library updates of ~${Math.round(JSON.stringify(await svc.listVms()).length / 1024)} KiB in ${dropMs} ms; peak queued ${Math.round(server.peakQueuedBytes / 1024)} KiB (400 unread answers included); RSS ${rssGrowthMiB >= 0 ? '+' : ''}${rssGrowthMiB.toFixed(1)} MiB\n`);
    } finally {
      await server.close();
      await svc.shutdown();
    }
  }, 120_000);
});

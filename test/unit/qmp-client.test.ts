// The QMP client's guards against a local unix-socket peer of the test's own (real sockets, no
// QEMU needed): a command off the read-only list is refused and never reaches the peer, replies are
// matched by id with events in between, a peer that never greets is "another client holds it", a
// line over the bound ends the session, and the per-vCPU mapping and histogram intervals.
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { QmpClient } from '../../electron/watch/qmp-client.ts';
import { mapVcpu } from '../../electron/watch/qemu-stats.ts';
import { intervalCounts } from '../../electron/watch/qmp-sampler.ts';

const GREETING = '{"QMP": {"version": {"qemu": {"micro": 0, "minor": 2, "major": 7}, "package": ""}, "capabilities": []}}\n';

let dir: string;
let server: Server | undefined;
beforeEach(() => { dir = mkdtempSync(join(tmpdir(), 'unhalt-qmp-unit-')); });
afterEach(async () => {
  await new Promise<void>((r) => (server ? server.close(() => r()) : r()));
  server = undefined;
  rmSync(dir, { recursive: true, force: true });
});

/** A peer that greets (or not) and answers each command line by `answer`; what it received is kept. */
async function peer(opts: { greet?: boolean; answer?: (msg: any, socket: Socket) => void } = {}): Promise<{ path: string; received: any[] }> {
  const path = join(dir, 'qmp.sock');
  const received: any[] = [];
  server = createServer((socket) => {
    socket.on('error', () => {});
    if (opts.greet !== false) socket.write(GREETING);
    let buf = '';
    socket.on('data', (d) => {
      buf += d.toString();
      for (let nl = buf.indexOf('\n'); nl >= 0; nl = buf.indexOf('\n')) {
        const msg = JSON.parse(buf.slice(0, nl));
        buf = buf.slice(nl + 1);
        received.push(msg);
        if (opts.answer) opts.answer(msg, socket);
        else socket.write(`${JSON.stringify({ return: {}, id: msg.id })}\n`);
      }
    });
  });
  await new Promise<void>((r) => server!.listen(path, r));
  return { path, received };
}

describe('QmpClient', () => {
  it('refuses a command that is not read-only without sending it', async () => {
    const p = await peer();
    const qmp = await QmpClient.connect(p.path);
    expect(qmp.version).toBe('7.2.0');
    for (const cmd of ['quit', 'stop', 'system_reset', 'human-monitor-command', 'qmp_capabilities']) {
      await expect(qmp.execute(cmd)).rejects.toThrow(`"${cmd}" is not a read-only QMP command`);
    }
    qmp.close();
    expect(p.received.map((m) => m.execute)).toEqual(['qmp_capabilities']);
  });

  it('matches replies by id, with events and replies to others in between', async () => {
    const p = await peer({
      answer: (msg, s) => {
        if (msg.execute !== 'query-name') { s.write(`${JSON.stringify({ return: {}, id: msg.id })}\n`); return; }
        // An event, a reply to an id never sent, then the reply, split across writes.
        s.write('{"event": "RESUME", "timestamp": {"seconds": 1, "microseconds": 2}}\n{"return": {"name": "x"}, "id": "other"}\n');
        const reply = `${JSON.stringify({ return: { name: 'vm1' }, id: msg.id })}\n`;
        s.write(reply.slice(0, 7));
        setTimeout(() => s.write(reply.slice(7)), 20);
      },
    });
    const qmp = await QmpClient.connect(p.path);
    expect(await qmp.execute('query-name')).toEqual({ name: 'vm1' });
    qmp.close();
  });

  it('says another client holds a socket that accepts but never greets', async () => {
    const p = await peer({ greet: false });
    await expect(QmpClient.connect(p.path, { greetingTimeoutMs: 200 })).rejects.toThrow(`no QMP greeting on ${p.path} within 200 ms: another client holds the socket`);
  });

  it('ends the session on a line over the bound', async () => {
    const p = await peer({ answer: (_m, s) => s.write('x'.repeat(64 * 1024)) });
    await expect(QmpClient.connect(p.path, { maxLineBytes: 4096 })).rejects.toThrow(`${p.path} sent a line over 4096 bytes`);
  });

  it('QEMU refusing a command is one line with its reason', async () => {
    const p = await peer({ answer: (msg, s) => s.write(`${JSON.stringify(msg.execute === 'query-stats' ? { error: { class: 'GenericError', desc: 'no stats' }, id: msg.id } : { return: {}, id: msg.id })}\n`) });
    const qmp = await QmpClient.connect(p.path);
    await expect(qmp.execute('query-stats', { target: 'vcpu' })).rejects.toThrow('QEMU refused: no stats (GenericError)');
    qmp.close();
    await expect(qmp.closed).resolves.toContain('closed the QMP connection');
  });
});

describe('query-stats mapping', () => {
  const plan = { fields: ['halt_exits', 'halt_wait_ns', 'blocking'], scale: [1, 1, 1], histograms: ['halt_wait_hist'] };

  it('puts each stat in its column, booleans as 0/1, absent ones NaN', () => {
    const r = mapVcpu(1, [
      { name: 'blocking', value: true }, { name: 'halt_exits', value: 42 }, { name: 'pf_fixed', value: 9 },
      { name: 'halt_wait_hist', value: [1, 2, 3] },
    ], plan);
    expect(r.vcpu).toBe(1);
    expect([...r.values]).toEqual([42, Number.NaN, 1]);
    expect(r.hists.get('halt_wait_hist')).toEqual([1, 2, 3]);
  });

  it('gives a histogram interval per bucket, null without a previous read or after a reset', () => {
    expect(intervalCounts([1, 2, 3], [2, 2, 7])).toEqual([1, 0, 4]);
    expect(intervalCounts(undefined, [1])).toBeNull();
    expect(intervalCounts([5, 0], [1, 0])).toBeNull();
  });
});

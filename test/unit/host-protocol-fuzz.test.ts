// Host mode's protocol under random traffic (issue 13): fast-check scripts of API messages — valid
// library changes and reads, malformed shapes (wrong types, unknown methods, prototype names,
// huge strings, bad ids, non-JSON and binary frames, frames over the size limit) — from several
// WebSocket clients at once, some of which stop reading. After each script: the server still
// answers a new client, what was queued for any client stayed within the outgoing budget, and
// every change that was acknowledged (createVm, updateVm, cloneVm, deleteVm answered with a
// result) is in the library after a restart from disk. No VM is ever started (no KVM needed):
// startVm only ever gets ids that do not exist, and experiments cannot load their runner.
import fc from 'fast-check';
import { afterAll, describe, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import type { ServerMessage, VmRecord } from '../../electron/service/api.ts';
import { startHostServer } from '../../electron/service/host-server.ts';
import { MAX_CALLS_IN_FLIGHT } from '../../electron/service/outgoing-budget.ts';
import { createService } from '../../electron/service/service.ts';
import { removeTempHomes, tempHome } from '../support/temp-home.ts';

afterAll(removeTempHomes);

const CLIENTS = 4;
/** Clients 2 and 3 stop reading at a random step and only read again when the script ends. */
const SLOW_CLIENTS = new Set([2, 3]);
const LIMITS = { streamBytes: 256 * 1024, clientBytes: 1024 * 1024 };
/** The largest answer a script can cause: a list or host answer of the whole library. */
const MAX_ANSWER_BYTES = 256 * 1024;
const MAX_MESSAGE_BYTES = 256 * 1024;
const RUNS = Number(process.env.FUZZ_RUNS ?? 20);
/** VMs in the library before a script: every library event is then ~85 KiB, so stalled readers fall behind. */
const SEED_VMS = 20;
const TIME_LIMIT_MS = 40_000;
const RSS_LIMIT_MIB = 256;

type IdRef = { known: number } | { bad: unknown };
type Step =
  | { kind: 'create'; name: string; append?: string }
  | { kind: 'update'; id: IdRef; name: string; memoryMiB: unknown }
  | { kind: 'clone'; id: IdRef; name?: unknown }
  | { kind: 'delete'; id: IdRef }
  | { kind: 'read'; method: string; id: IdRef }
  | { kind: 'start'; id: unknown }
  /** Many updates in a row: each one sends the whole library to every client (what fills a slow reader). */
  | { kind: 'flood'; id: IdRef; count: number }
  | { kind: 'call'; method: string; params: unknown }
  | { kind: 'raw'; frame: string | Buffer }
  | { kind: 'shape'; message: unknown };

const name = fc.stringMatching(/^[a-z][a-z0-9-]{0,20}$/);
const badId = fc.oneof(fc.string({ maxLength: 50 }), fc.integer(), fc.constant(null), fc.constant('../../etc/passwd'), fc.object({ maxDepth: 1 }), fc.constant('x'.repeat(100_000)));
const idRef: fc.Arbitrary<IdRef> = fc.oneof({ weight: 4, arbitrary: fc.nat(20).map((known) => ({ known })) }, { weight: 1, arbitrary: badId.map((bad) => ({ bad })) });
const huge = fc.integer({ min: 1, max: 200 }).map((k) => 'h'.repeat(k * 1024));
const anyValue = fc.oneof(fc.anything({ maxDepth: 2 }), huge, fc.constant({ __proto__: { name: 'x' } }), fc.constant({ constructor: 1 }));
const methods = ['listVms', 'getVm', 'status', 'host', 'subscribe', 'unsubscribe', 'sendConsole', 'stopVm', 'forceStopVm', 'pauseVm', 'resumeVm',
  'setHaltPollNs', 'setPin', 'describeConfig', 'exportConfig', 'listExperiments', 'getExperiment', 'startExperiment', 'cancelExperiment', 'deleteExperiment', 'listAllowedFolders', 'removeAllowedFolder', 'dismissLibraryNotices'];

const step: fc.Arbitrary<Step> = fc.oneof(
  { weight: 5, arbitrary: fc.record({ kind: fc.constant('create' as const), name, append: fc.option(fc.oneof({ weight: 6, arbitrary: fc.nat(4000).map((n) => `pad=${'p'.repeat(n)}`) }, { weight: 1, arbitrary: fc.oneof(fc.string({ maxLength: 40 }), huge) }), { nil: undefined }) }) },
  { weight: 4, arbitrary: fc.record({ kind: fc.constant('update' as const), id: idRef, name, memoryMiB: fc.oneof(fc.constant(64), fc.constant(96), anyValue) }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('clone' as const), id: idRef, name: fc.option(fc.oneof(name, anyValue), { nil: undefined }) }) },
  { weight: 3, arbitrary: fc.record({ kind: fc.constant('delete' as const), id: idRef }) },
  { weight: 4, arbitrary: fc.record({ kind: fc.constant('read' as const), method: fc.constantFrom(...methods), id: idRef }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('start' as const), id: badId }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('flood' as const), id: idRef, count: fc.integer({ min: 5, max: 30 }) }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('call' as const), method: fc.oneof(fc.constantFrom(...methods, 'createVm', 'updateVm', 'deleteVm', 'cloneVm', '__proto__', 'constructor', 'toString', 'hasOwnProperty', ''), fc.string({ maxLength: 30 })), params: anyValue }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('raw' as const), frame: fc.oneof(fc.string({ maxLength: 200 }), fc.uint8Array({ maxLength: 200 }).map((b) => Buffer.from(b)), fc.constant('{"id":1,"method":"listVms","params":[]'), fc.constant('x'.repeat(MAX_MESSAGE_BYTES + 10))) }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('shape' as const), message: fc.oneof(anyValue, fc.record({ id: anyValue, method: fc.constantFrom(...methods), params: anyValue })) }) },
);
const script = fc.record({
  steps: fc.array(fc.record({ client: fc.nat(CLIENTS - 1), step }), { minLength: 20, maxLength: 160 }),
  stallAt: fc.array(fc.nat(80), { minLength: CLIENTS, maxLength: CLIENTS }),
});

/**
 * A call and its answer. `shared`: an untracked frame used its id too, so which answer is this
 * call's cannot be told; it counts as unanswered (its change may or may not be on disk).
 */
interface Sent { method: string; params: unknown[]; answer?: ServerMessage; shared?: boolean }

class Client {
  readonly sent = new Map<number, Sent>();
  private nextId = 1;
  /** Ids that untracked frames used: never given to a call of ours. */
  private readonly foreignIds = new Set<number>();
  closed = false;
  private readonly ws: WebSocket;

  private constructor(ws: WebSocket) {
    this.ws = ws;
    ws.on('message', (d) => {
      let m: ServerMessage;
      try { m = JSON.parse(d.toString()) as ServerMessage; } catch { return; }
      if ('id' in m) { const s = this.sent.get(m.id); if (s && !s.answer && !s.shared) s.answer = m; }
    });
    ws.on('close', () => { this.closed = true; });
    ws.on('error', () => { this.closed = true; });
  }

  static async open(url: string, origin: string): Promise<Client> {
    const ws = new WebSocket(url, { origin });
    await new Promise((resolve, reject) => { ws.once('open', resolve); ws.once('error', reject); });
    return new Client(ws);
  }

  call(method: string, params: unknown[]): void {
    let id = this.nextId++;
    while (this.foreignIds.has(id)) id = this.nextId++;
    this.sent.set(id, { method, params });
    this.write(JSON.stringify({ id, method, params }));
  }

  /** Untracked: a numeric id it carries is never one of a later call's, and makes an earlier call's answer ambiguous. */
  send(frame: string | Buffer): void {
    if (this.closed || this.ws.readyState !== WebSocket.OPEN) return;
    const id = numericId(frame);
    if (id !== undefined) {
      this.foreignIds.add(id);
      const s = this.sent.get(id);
      if (s && !s.answer) s.shared = true;
    }
    this.write(frame);
  }

  private write(frame: string | Buffer): void {
    if (this.closed || this.ws.readyState !== WebSocket.OPEN) return;
    this.ws.send(frame, () => { /* a closed socket: the script goes on */ });
  }

  stall(): void { this.ws.pause(); }
  resume(): void { this.ws.resume(); }
  pending(): number { return [...this.sent.values()].filter((s) => !s.answer && !s.shared).length; }
  close(): void { this.ws.terminate(); }
}

/** The numeric id of a JSON frame, as the server would echo it; undefined for anything else. */
function numericId(frame: string | Buffer): number | undefined {
  try {
    const m = JSON.parse(frame.toString()) as unknown;
    return typeof m === 'object' && m !== null && typeof (m as { id?: unknown }).id === 'number' ? (m as { id: number }).id : undefined;
  } catch {
    return undefined;
  }
}

const result = <T>(s: Sent): T | undefined => (s.answer && 'result' in s.answer ? s.answer.result as T : undefined);

async function settle(clients: Client[], ms: number): Promise<void> {
  const until = performance.now() + ms;
  while (performance.now() < until && clients.some((c) => !c.closed && c.pending() > 0)) await new Promise((r) => setTimeout(r, 10));
}

describe('host-mode protocol under random traffic', () => {
  it('no crash, bounded queues and memory, every acknowledged change persisted', async () => {
    const seed = process.env.FUZZ_SEED === undefined ? undefined : Number(process.env.FUZZ_SEED);
    const rssStart = process.memoryUsage().rss;
    let rssPeak = rssStart;
    const totals = { runs: 0, messages: 0, acked: 0, refused: 0, unanswered: 0, droppedClients: 0, peakQueued: 0 };
    const started = performance.now();
    await fc.assert(fc.asyncProperty(script, async ({ steps, stallAt }) => {
      totals.runs++;
      const home = tempHome('fuzz');
      const svc = await createService({ home, lockTimeoutMs: 2000, loadExperimentRunner: async () => { throw new Error('no experiments in the fuzz') } });
      const server = await startHostServer({ service: svc, rendererDir: tempHome('fuzz-dist'), outgoingLimits: LIMITS, maxMessageBytes: MAX_MESSAGE_BYTES });
      const url = `ws://127.0.0.1:${server.port}/api?token=${server.token}`;
      const seeded = await Promise.all(Array.from({ length: SEED_VMS }, (_, n) => svc.createVm({ name: `seed-${n}`, guest: 'probe', memoryMiB: 64, append: `pad=${'s'.repeat(4000)}` })));
      const clients = await Promise.all(Array.from({ length: CLIENTS }, () => Client.open(url, server.origin)));
      // Ids the script can name: every VM any client was told about.
      const known: string[] = seeded.map((v) => v.id);
      const learn = () => {
        for (const c of clients) for (const s of c.sent.values()) {
          const r = result<VmRecord>(s);
          if (r && typeof r === 'object' && typeof r.id === 'string' && !known.includes(r.id)) known.push(r.id);
        }
      };
      const id = (ref: IdRef) => ('known' in ref ? known[ref.known % Math.max(known.length, 1)] ?? 'none-yet' : ref.bad);
      try {
        for (const [i, { client, step: s }] of steps.entries()) {
          const c = clients[client]!;
          if (SLOW_CLIENTS.has(client) && i === stallAt[client]) c.stall();
          learn();
          switch (s.kind) {
            case 'create': c.call('createVm', [{ name: s.name, guest: 'probe', memoryMiB: 64, ...(s.append === undefined ? {} : { append: s.append }) }]); break;
            case 'update': c.call('updateVm', [id(s.id), { name: s.name, guest: 'probe', memoryMiB: s.memoryMiB }]); break;
            case 'flood':
              for (let n = 0; n < s.count; n++) c.call('updateVm', [id(s.id), { name: `flood-${n}-${i}`, guest: 'probe', memoryMiB: 64, append: `pad=${'f'.repeat(4000)}` }]);
              break;
            case 'clone': c.call('cloneVm', s.name === undefined ? [id(s.id)] : [id(s.id), s.name]); break;
            case 'delete': c.call('deleteVm', [id(s.id)]); break;
            case 'read': c.call(s.method, [id(s.id)]); break;
            // Never a known id: no VM starts in the unit lane.
            case 'start': c.call('startVm', [typeof s.id === 'string' && known.includes(s.id) ? 'not-a-vm' : s.id]); break;
            case 'call': c.call(s.method, Array.isArray(s.params) ? s.params : [s.params]); break;
            case 'raw': c.send(s.frame); break;
            case 'shape': { let text: string | undefined; try { text = JSON.stringify(s.message); } catch { /* BigInt and friends */ } if (text !== undefined) c.send(text); break; }
          }
          totals.messages++;
          rssPeak = Math.max(rssPeak, process.memoryUsage().rss);
          // Let answers arrive between some steps so later steps can name the VMs made so far.
          if (i % 5 === 4) await new Promise((r) => setTimeout(r, 2));
        }
        await settle(clients, 300);
        for (const c of clients) c.resume();
        await settle(clients, 10_000);

        // No crash: a new client is answered.
        const probe = await Client.open(url, server.origin);
        probe.call('listVms', []);
        await settle([probe], 5000);
        expect(probe.pending(), 'a fresh client is answered').toBe(0);
        probe.close();
        // Queues bounded: the event budget, plus the answers one client may have in flight.
        expect(server.peakQueuedBytes).toBeLessThanOrEqual(LIMITS.clientBytes + (MAX_CALLS_IN_FLIGHT + 1) * MAX_ANSWER_BYTES);
        totals.peakQueued = Math.max(totals.peakQueued, server.peakQueuedBytes);
        totals.droppedClients += server.droppedClients;
      } finally {
        for (const c of clients) c.close();
        await server.close();
        await svc.shutdown();
      }

      // Every acknowledged change, after a restart from disk.
      const acked = new Map<string, VmRecord[]>(seeded.map((v) => [v.id, [v]])); // id -> acknowledged versions
      const deleted = new Set<string>();
      const maybeDeleted = new Set<unknown>(); // deletes nobody heard the answer of
      let unacknowledgedChanges = 0;
      for (const c of clients) for (const s of c.sent.values()) {
        if (!['createVm', 'updateVm', 'cloneVm', 'deleteVm'].includes(s.method)) continue;
        if (!s.answer) {
          unacknowledgedChanges++;
          totals.unanswered++;
          if (s.method === 'deleteVm') maybeDeleted.add(s.params[0]);
          continue;
        }
        if ('error' in s.answer) { totals.refused++; continue; }
        totals.acked++;
        if (s.method === 'deleteVm') deleted.add(s.params[0] as string);
        else { const r = (s.answer as { result: unknown }).result as VmRecord; acked.set(r.id, [...(acked.get(r.id) ?? []), r]); }
      }
      const again = await createService({ home });
      const onDisk = new Map((await again.listVms()).map((v) => [v.id, v]));
      await again.shutdown();
      for (const id of deleted) expect(onDisk.has(id), `deleted ${id} is gone`).toBe(false);
      for (const [id, versions] of acked) {
        if (deleted.has(id)) continue;
        const saved = onDisk.get(id);
        if (!saved && maybeDeleted.has(id)) continue;
        expect(saved, `acknowledged ${id} is on disk`).toBeDefined();
        const latest = Math.max(...versions.map((v) => v.updatedAt));
        // The last write wins; an unacknowledged update (a client that never read its answer) may be later still.
        if (unacknowledgedChanges === 0) {
          expect(saved!.updatedAt).toBe(latest);
          expect(versions.filter((v) => v.updatedAt === latest).map((v) => JSON.stringify(v.config))).toContain(JSON.stringify(saved!.config));
        } else {
          expect(saved!.updatedAt).toBeGreaterThanOrEqual(latest);
        }
      }
      const unexplained = [...onDisk.keys()].filter((id) => !acked.has(id));
      expect(unexplained.length, 'VMs on disk that no acknowledged create explains').toBeLessThanOrEqual(unacknowledgedChanges);
    }), { numRuns: RUNS, interruptAfterTimeLimit: TIME_LIMIT_MS, ...(seed === undefined ? {} : { seed }) });
    const rssGrowthMiB = (rssPeak - rssStart) / 1024 / 1024;
    expect(rssGrowthMiB).toBeLessThan(RSS_LIMIT_MIB);
    process.stdout.write(`host-protocol fuzz: ${totals.runs} scripts, ${totals.messages} messages from ${CLIENTS} clients (2 stalling) in ${((performance.now() - started) / 1000).toFixed(1)} s; `
      + `library changes acknowledged ${totals.acked}, refused ${totals.refused}, unanswered ${totals.unanswered}; clients dropped ${totals.droppedClients}; `
      + `peak queued for one client ${Math.round(totals.peakQueued / 1024)} KiB; RSS peak +${rssGrowthMiB.toFixed(1)} MiB\n`);
  }, 90_000);
});

// The agent's view of guest idle and steal time (native/guest/linux/agent/gidle.c), through the
// real agent built for the host (`unhalt-agent --stdio`: the same C code a guest runs on ttyS1),
// checked against what this host's /sys and /proc show: `info`'s cpuidle fields, and the live
// probe's `@u1 gidle` lines, one per online CPU about once a second at most. A host without cpuidle is checked
// too (cpuidle=0, zero counts). No KVM needed.
import { spawn, spawnSync, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { MAX_LINE_BYTES, parseAgentLine, type AgentEvent } from '../../electron/vmm/agent/line-protocol.ts';
import { LINUX_HOST_AGENT } from '../../electron/vmm/guests-linux.ts';

const BUILD = fileURLToPath(new URL('../../native/guest/linux/build-workloads.mjs', import.meta.url));
const CPUIDLE = '/sys/devices/system/cpu/cpuidle';
const GIDLE_KEYS = ['cpu', 'interval_ns', 'cpuidle', 'poll_count', 'poll_ns', 'halt_count', 'halt_ns', 'steal_ns'];

beforeAll(() => {
  const r = spawnSync(process.execPath, [BUILD, '--quiet'], { encoding: 'utf8' });
  expect(r.status, r.stderr).toBe(0);
}, 60_000);

// --- what this host shows -------------------------------------------------------------------

const readText = (path: string): string | undefined => {
  try { return readFileSync(path, 'utf8').trim(); } catch { return undefined; }
};

/** The online CPUs: the cpuN lines of /proc/stat, with their steal ticks. */
function procStat(): Map<number, number> {
  const cpus = new Map<number, number>();
  for (const line of readFileSync('/proc/stat', 'utf8').split('\n')) {
    const m = /^cpu(\d+)\s+(.*)$/.exec(line);
    if (m) cpus.set(Number(m[1]), Number(m[2]!.trim().split(/\s+/)[7] ?? 0));
  }
  return cpus;
}

/** cpuN's cpuidle totals now (POLL states apart), or undefined without a cpuidle directory. */
function idleTotals(cpu: number): { poll_count: number; poll_us: number; halt_count: number; halt_us: number } | undefined {
  const dir = `/sys/devices/system/cpu/cpu${cpu}/cpuidle`;
  if (!existsSync(dir)) return undefined;
  const t = { poll_count: 0, poll_us: 0, halt_count: 0, halt_us: 0 };
  for (let k = 0; existsSync(`${dir}/state${k}`); k++) {
    const poll = readText(`${dir}/state${k}/name`) === 'POLL';
    t[poll ? 'poll_count' : 'halt_count'] += Number(readText(`${dir}/state${k}/usage`));
    t[poll ? 'poll_us' : 'halt_us'] += Number(readText(`${dir}/state${k}/time`));
  }
  return t;
}

const clkTck = (): number => Number(spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).stdout.trim()) || 100;

// --- the agent --------------------------------------------------------------------------------

interface Seen { e: AgentEvent; raw: string; at: number }

/** A running `unhalt-agent --stdio`: every protocol line with its arrival time (performance.now). */
class Agent {
  readonly seen: Seen[] = [];
  /** Lines that are not well-formed protocol lines. */
  readonly bad: string[] = [];
  readonly child: ChildProcessWithoutNullStreams;
  private waiters: (() => void)[] = [];
  private rest = '';

  constructor() {
    this.child = spawn(LINUX_HOST_AGENT, ['--stdio'], { stdio: ['pipe', 'pipe', 'pipe'] });
    this.child.stdout.on('data', (d: Buffer) => {
      const at = performance.now();
      const lines = (this.rest + d.toString('utf8')).split('\n');
      this.rest = lines.pop()!;
      for (const raw of lines) {
        const e = parseAgentLine(raw);
        if (typeof e === 'object') this.seen.push({ e, raw, at });
        else this.bad.push(raw);
      }
      for (const w of this.waiters.splice(0)) w();
    });
  }

  /** Sends a command; returns the performance.now() just before it was written. */
  send(line: string): number {
    const at = performance.now();
    this.child.stdin.write(`${line}\n`);
    return at;
  }

  /** Waits until `done(seen)` holds (a generous liveness bound: the host may be busy). */
  async until(what: string, done: (seen: Seen[]) => boolean, timeoutMs = 20_000): Promise<void> {
    const deadline = performance.now() + timeoutMs;
    while (!done(this.seen)) {
      const left = deadline - performance.now();
      if (left <= 0) throw new Error(`timed out waiting for ${what}; got:\n${this.seen.map((s) => s.raw).join('\n')}`);
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, left);
        this.waiters.push(() => { clearTimeout(t); resolve(); });
      });
    }
  }

  /** Index of the first event at or after `from` matching. */
  find(from: number, pred: (e: AgentEvent) => boolean): number {
    for (let i = from; i < this.seen.length; i++) if (pred(this.seen[i]!.e)) return i;
    return -1;
  }

  stop(): void {
    this.child.stdin.end();
    this.child.kill('SIGKILL');
  }
}

let running: Agent | undefined;
afterEach(() => {
  const bad = running?.bad ?? [];
  running?.stop();
  running = undefined;
  expect(bad, 'every line a protocol line').toEqual([]);
});

const isGidle = (e: AgentEvent) => e.event === 'gidle';
const isProbe = (on: number) => (e: AgentEvent) => e.event === 'probe' && e.fields.on === on;

/**
 * The gidle rounds after the event at `from`, up to `to` (exclusive): each ctxprobe burst with the
 * gidle lines that follow it.
 */
function rounds(a: Agent, from: number, to = a.seen.length): { burst: Seen; lines: Seen[] }[] {
  const out: { burst: Seen; lines: Seen[] }[] = [];
  for (let i = from; i < to; i++) {
    const s = a.seen[i]!;
    if (s.e.event === 'ctxprobe') out.push({ burst: s, lines: [] });
    else if (isGidle(s.e)) {
      expect(out.length, `a gidle line before any ctxprobe: ${s.raw}`).toBeGreaterThan(0);
      out.at(-1)!.lines.push(s);
    }
  }
  return out;
}

/** Waits for `n` rounds with gidle lines after index `from`. */
const gidleRounds = (a: Agent, from: number, n: number) =>
  a.until(`${n} rounds of gidle lines`, () => rounds(a, from).filter((r) => r.lines.length > 0).length >= n);

describe('the agent reports guest idle (cpuidle) and steal time', () => {
  it('ready and info carry cpuidle, haltpoll_gov and guest_halt_poll_ns as this host\'s /sys shows them', async () => {
    const a = (running = new Agent());
    a.send('info');
    await a.until('info', (s) => s.some((x) => x.e.event === 'info'));
    const driver = readText(`${CPUIDLE}/current_driver`);
    const governor = readText(`${CPUIDLE}/current_governor_ro`) ?? readText(`${CPUIDLE}/current_governor`);
    const pollNs = readText('/sys/module/haltpoll/parameters/guest_halt_poll_ns');
    const want = {
      haltpoll: driver === 'haltpoll' ? 1 : 0,
      cpuidle: driver !== undefined && driver !== 'none' ? 1 : 0,
      haltpoll_gov: governor === 'haltpoll' ? 1 : 0,
      guest_halt_poll_ns: pollNs === undefined ? -1 : Number(pollNs),
    };
    for (const name of ['ready', 'info']) {
      const e = a.seen.find((s) => s.e.event === name)!.e;
      expect(e.fields, name).toMatchObject(want);
      // The new fields come last, after haltpoll, as the contract lists them.
      expect(Object.keys(e.fields).slice(-4)).toEqual(['haltpoll', 'cpuidle', 'haltpoll_gov', 'guest_halt_poll_ns']);
    }
  });

  it('probe on: one gidle line per online CPU after a burst 0.9 s or more since the last, sane against /sys and /proc/stat; probe off stops them', async () => {
    const a = (running = new Agent());
    await a.until('ready', (s) => s.length > 0);
    const cpus = [...procStat().keys()].sort((x, y) => x - y);
    const before = new Map(cpus.map((c) => [c, { idle: idleTotals(c), steal: procStat().get(c)! }]));
    const sentOn = a.send('probe on interval_ms=200 rounds=10');
    await gidleRounds(a, 0, 4);
    a.send('probe off');
    await a.until('probe on=0', (s) => s.some((x) => isProbe(0)(x.e)));
    const after = new Map(cpus.map((c) => [c, { idle: idleTotals(c), steal: procStat().get(c)! }]));
    const off = a.find(0, isProbe(0));
    // Nothing after probe off (the prober is gone before the agent answers it): a while later, still nothing.
    await new Promise((r) => setTimeout(r, 600));
    expect(a.seen.slice(off).filter((s) => isGidle(s.e) || s.e.event === 'ctxprobe')).toEqual([]);

    const on = a.find(0, isProbe(1));
    expect(on).toBeGreaterThanOrEqual(0);
    const rs = rounds(a, on, off);
    // The first burst runs at once and has no lines (they would cover a millisecond). At a 200 ms
    // interval only about every fifth burst has lines: 0.9 s or more since the last ones (the
    // rate limit that keeps a slow host's console from flooding), one line per online CPU, in CPU
    // order; a round never comes in part.
    expect(rs[0]!.lines).toEqual([]);
    const withLines = rs.filter((r) => r.lines.length > 0);
    expect(withLines.length).toBeGreaterThanOrEqual(4);
    expect(rs.length, 'bursts without lines between the rounds').toBeGreaterThanOrEqual(withLines.length * 3);
    const tickNs = 1e9 / clkTck();
    const sums = new Map(cpus.map((c) => [c, { interval: 0, idle: 0, poll_count: 0, poll_ns: 0, halt_count: 0, halt_ns: 0, steal: 0 }]));
    for (const [k, r] of withLines.entries()) {
      expect(r.lines.map((s) => s.e.fields.cpu), `round ${k + 1}`).toEqual(cpus);
      for (const { e, raw, at } of r.lines) {
        expect(Buffer.byteLength(raw)).toBeLessThanOrEqual(MAX_LINE_BYTES);
        expect(Object.keys(e.fields)).toEqual(GIDLE_KEYS);
        const f = e.fields as Record<string, number>;
        for (const key of GIDLE_KEYS) {
          expect(Number.isInteger(f[key]), `${key} in ${raw}`).toBe(true);
          expect(f[key], `${key} in ${raw}`).toBeGreaterThanOrEqual(0);
        }
        // 0.9 s or more, and about a 200 ms burst interval beyond it at most (generous: a busy
        // host may run the prober late).
        expect(f.interval_ns).toBeGreaterThanOrEqual(0.9e9);
        expect(f.interval_ns).toBeLessThanOrEqual(3e9);
        if (k === 0) expect(f.interval_ns, 'the first line covers the time since probe on').toBeLessThanOrEqual((at - sentOn) * 1e6 + 5e6);
        const hasDir = existsSync(`/sys/devices/system/cpu/cpu${f.cpu}/cpuidle`);
        expect(f.cpuidle, raw).toBe(hasDir ? 1 : 0);
        if (!hasDir) expect([f.poll_count, f.poll_ns, f.halt_count, f.halt_ns], raw).toEqual([0, 0, 0, 0]);
        expect(f.poll_ns % 1000, 'cpuidle time is µs').toBe(0);
        expect(f.halt_ns % 1000, 'cpuidle time is µs').toBe(0);
        expect(Math.abs(f.steal_ns / tickNs - Math.round(f.steal_ns / tickNs)), 'steal is USER_HZ ticks').toBeLessThan(1e-6);
        const s = sums.get(f.cpu!)!;
        s.interval += f.interval_ns!;
        s.idle += f.poll_ns! + f.halt_ns!;
        s.poll_count += f.poll_count!; s.poll_ns += f.poll_ns!; s.halt_count += f.halt_count!; s.halt_ns += f.halt_ns!;
        s.steal += f.steal_ns!;
        // Idle time is counted when an idle period ends, so an interval may also carry the part of
        // the one under way at its start: the running sum may pass the time covered by at most
        // that (here: a second), never more than 1.5 times the time.
        expect(s.idle, `cpu ${f.cpu}'s idle time so far`).toBeLessThanOrEqual(s.interval * 1.5 + 1e9);
      }
    }
    // The lines add up to no more than the counters moved between before probe on and after
    // probe off (they cover a part of that window).
    for (const c of cpus) {
      const s = sums.get(c)!, b = before.get(c)!, z = after.get(c)!;
      expect(s.steal, `cpu ${c} steal`).toBeLessThanOrEqual((z.steal - b.steal) * tickNs + 1);
      if (!b.idle || !z.idle) continue;
      expect(s.poll_count, `cpu ${c} poll_count`).toBeLessThanOrEqual(z.idle.poll_count - b.idle.poll_count);
      expect(s.halt_count, `cpu ${c} halt_count`).toBeLessThanOrEqual(z.idle.halt_count - b.idle.halt_count);
      expect(s.poll_ns, `cpu ${c} poll_ns`).toBeLessThanOrEqual((z.idle.poll_us - b.idle.poll_us) * 1000);
      expect(s.halt_ns, `cpu ${c} halt_ns`).toBeLessThanOrEqual((z.idle.halt_us - b.idle.halt_us) * 1000);
    }
  }, 60_000);

  it('a 1 s probe (the app\'s) gets a round of lines after every burst but the first: none dropped for jitter', async () => {
    const a = (running = new Agent());
    await a.until('ready', (s) => s.length > 0);
    a.send('probe on interval_ms=1000 rounds=10');
    await gidleRounds(a, 0, 3);
    a.send('probe off');
    await a.until('probe on=0', (s) => s.some((x) => isProbe(0)(x.e)));
    const rs = rounds(a, a.find(0, isProbe(1)), a.find(0, isProbe(0)));
    expect(rs[0]!.lines).toEqual([]);
    // The last burst's lines may have been cut by probe off; every one between has its round.
    const between = rs.slice(1, -1);
    expect(between.length).toBeGreaterThanOrEqual(2);
    for (const r of between) expect(r.lines.length, `a round after the burst at ${r.burst.at.toFixed(0)} ms`).toBe(procStat().size);
  }, 60_000);

  it('probe on, off, on: the second probe takes new baselines (its first lines cover only the time since it)', async () => {
    const a = (running = new Agent());
    await a.until('ready', (s) => s.length > 0);
    a.send('probe on interval_ms=200 rounds=10');
    await gidleRounds(a, 0, 1);
    a.send('probe off');
    await a.until('probe on=0', (s) => s.some((x) => isProbe(0)(x.e)));
    // A pause longer than an interval: a baseline kept from the first probe would show it.
    await new Promise((r) => setTimeout(r, 1000));
    const off = a.find(0, isProbe(0));
    const sentOn = a.send('probe on interval_ms=200 rounds=10');
    await gidleRounds(a, off + 1, 1);
    const first = a.seen.slice(off + 1).filter((s) => isGidle(s.e));
    expect(first.length).toBeGreaterThan(0);
    const since = (first[0]!.at - sentOn) * 1e6;
    for (const { e, raw } of first.slice(0, procStat().size)) {
      expect(e.fields.interval_ns, raw).toBeGreaterThanOrEqual(0.9e9);
      expect(e.fields.interval_ns, raw).toBeLessThanOrEqual(since + 5e6);
    }
    a.send('probe off');
    await a.until('the second probe off', (s) => s.filter((x) => isProbe(0)(x.e)).length === 2);
  }, 60_000);
});

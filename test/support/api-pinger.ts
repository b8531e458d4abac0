// Test and bench support: how fast the process that owns the VMs answers while it works. A
// client pings the API (a cheap call) back to back, a few ms apart, and keeps every round trip:
// one blocking stretch of the owner's main thread shows up as one long ping.
//
// On a shared, loaded host the scheduler alone can hold any process off the CPU for longer than
// the limit, so each round separates the owner's own delay from the host's:
//   - the owner's main thread's runqueue wait during the round (/proc/<pid>/schedstat: time it
//     was runnable but not given a CPU) is taken off its round trip: what is left is time spent
//     working or blocked, which is what "the main thread never blocks" is about;
//   - or this client thread's own runqueue wait (/proc/thread-self/schedstat), whichever is
//     longer (they may overlap, and the figure must never be flattered): its event loop reads
//     the answer;
//   - an idle control process is pinged in the same round: when even it was slow, the host was
//     starved in ways the two waits do not show (the loopback's softirqs), and the round says
//     nothing about the owner.
// The owner's figure is taken over the rounds where the control answered at once; the raw round
// trips are reported beside it.
import { readFileSync } from 'node:fs';
import { spawn, type ChildProcess } from 'node:child_process';
import { connect, type Socket } from 'node:net';
import type { ApiClient } from './serve-child.ts';

export interface PingStats {
  count: number;
  maxMs: number;
  p50Ms: number;
  p99Ms: number;
}

export interface PingReport {
  /** Every round's raw round trip. */
  all: PingStats;
  /** Every round's round trip less the longer runqueue wait in it (the owner's main thread or this thread). */
  own: PingStats;
  /** `own`, over the rounds where the control answered within CONTROL_PROMPT_MS. */
  prompt: PingStats;
  /** The control's own round trips. */
  control: PingStats;
}

/** A control round trip this fast means the host gave an idle process the CPU at once. */
export const CONTROL_PROMPT_MS = 10;

export interface Pinger {
  /** Stops pinging once the round in flight is answered. */
  stop(): Promise<PingReport>;
}

export interface Control {
  ping(): Promise<number>;
  close(): void;
}

/** An idle TCP echo process: the scheduler's share of a round trip, without any work behind it. */
export async function startControl(): Promise<Control> {
  const child: ChildProcess = spawn(process.execPath, ['-e',
    "require('net').createServer((s) => s.on('data', (d) => s.write(d))).listen(0, '127.0.0.1', function () { console.log(this.address().port); })"],
  { stdio: ['ignore', 'pipe', 'inherit'] });
  const port = await new Promise<number>((resolve, reject) => {
    let out = '';
    child.stdout!.on('data', (d) => { out += d; if (out.includes('\n')) resolve(Number(out.trim())); });
    child.once('exit', () => reject(new Error('the control echo process exited')));
  });
  const socket: Socket = connect(port, '127.0.0.1');
  socket.setNoDelay(true);
  await new Promise((r) => socket.once('connect', r));
  return {
    ping: () => new Promise<number>((resolve) => {
      const t = performance.now();
      socket.once('data', () => resolve(performance.now() - t));
      socket.write('.');
    }),
    close: () => { socket.destroy(); child.kill(); },
  };
}

/** ns a thread has waited, runnable, for a CPU (0 where schedstat is absent). */
function runqueueWaitNs(schedstat: string): number {
  try { return Number(readFileSync(schedstat, 'utf8').split(' ')[1]); } catch { return 0; }
}

export function startPinger(api: ApiClient, control: Control, ownerPid: number, method = 'listVms', gapMs = 5): Pinger {
  const rounds: { owner: number; own: number; control: number }[] = [];
  let running = true;
  const loop = (async () => {
    while (running) {
      const ownerStat = `/proc/${ownerPid}/schedstat`;
      const selfStat = '/proc/thread-self/schedstat';
      const ownerWaited = runqueueWaitNs(ownerStat);
      const selfWaited = runqueueWaitNs(selfStat);
      const t = performance.now();
      const [answer, controlMs] = await Promise.all([api.call(method), control.ping()]);
      const rtt = performance.now() - t;
      // The larger of the two, not their sum: they may overlap in time, and the figure must never
      // be flattered.
      const waitedMs = Math.max(runqueueWaitNs(ownerStat) - ownerWaited, runqueueWaitNs(selfStat) - selfWaited) / 1e6;
      rounds.push({ owner: rtt, own: Math.max(0, rtt - waitedMs), control: controlMs });
      if ('error' in answer) throw new Error(`ping ${method} failed: ${JSON.stringify(answer.error)}`);
      await new Promise((r) => setTimeout(r, gapMs));
    }
  })();
  return {
    async stop() {
      running = false;
      await loop;
      return {
        all: pingStats(rounds.map((r) => r.owner)),
        own: pingStats(rounds.map((r) => r.own)),
        prompt: pingStats(rounds.filter((r) => r.control <= CONTROL_PROMPT_MS).map((r) => r.own)),
        control: pingStats(rounds.map((r) => r.control)),
      };
    },
  };
}

export function pingStats(times: readonly number[]): PingStats {
  const sorted = [...times].sort((a, b) => a - b);
  const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? 0;
  return { count: sorted.length, maxMs: sorted.at(-1) ?? 0, p50Ms: at(0.5), p99Ms: at(0.99) };
}

const stats = (s: PingStats) => `${s.count} pings, p50 ${s.p50Ms.toFixed(1)} ms, p99 ${s.p99Ms.toFixed(1)} ms, slowest ${s.maxMs.toFixed(1)} ms`;

export const describePings = (r: PingReport) =>
  `raw: ${stats(r.all)}; less runqueue wait, control prompt: ${stats(r.prompt)}; control: ${stats(r.control)}`;

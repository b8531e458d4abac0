// The Linux guest's workloads, run on the host: the host build (unhalt-workload, the bare-metal
// reference) and the agent's command path (unhalt-agent --stdio, the same C code the initramfs
// runs on ttyS1). Numbers must be sane, every line must parse as protocol, bad input must fail
// clearly. No KVM needed.
import { spawn, spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { beforeAll, describe, expect, it } from 'vitest';
import { parseAgentLine, type AgentEvent } from '../../electron/vmm/agent/line-protocol.ts';
import { LINUX_WORKLOAD_IDS, LINUX_WORKLOADS, linuxWorkloadArgs, workload } from '../../electron/experiments/workloads.ts';
import { LINUX_HOST_AGENT, LINUX_HOST_WORKLOAD } from '../../electron/vmm/guests-linux.ts';

const BUILD = fileURLToPath(new URL('../../native/guest/linux/build-workloads.mjs', import.meta.url));

interface Ran {
  code: number | null;
  events: AgentEvent[];
  stdout: string;
  stderr: string;
}

/** Every stdout line must be a well-formed protocol line. */
function parseAll(stdout: string): AgentEvent[] {
  return stdout.split('\n').filter((l) => l.length > 0).map((l) => {
    const e = parseAgentLine(l);
    expect(e, `line "${l}"`).toBeTypeOf('object');
    return e as AgentEvent;
  });
}

function wl(...args: string[]): Ran {
  const r = spawnSync(LINUX_HOST_WORKLOAD, args, { encoding: 'utf8', timeout: 60_000 });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr, events: parseAll(r.stdout) };
}

const only = (events: AgentEvent[], name: string): AgentEvent => {
  const hits = events.filter((e) => e.event === name);
  expect(hits, `one "${name}" event in ${JSON.stringify(events)}`).toHaveLength(1);
  return hits[0]!;
};

beforeAll(() => {
  // Incremental: instant when the sources have not changed since the last build.
  const r = spawnSync(process.execPath, [BUILD, '--quiet'], { encoding: 'utf8' });
  expect(r.status, r.stderr).toBe(0);
}, 60_000);

describe('host workloads (unhalt-workload)', () => {
  it('pipe: a ping-pong like perf bench sched pipe, with sane numbers', () => {
    const r = wl('pipe', 'loops=5000');
    expect(r.code, r.stderr).toBe(0);
    const e = only(r.events, 'pipe');
    expect(e.fields.loops).toBe(5000);
    expect(e.fields.per_op_ns).toBeGreaterThan(100);
    expect(e.fields.per_op_ns).toBeLessThan(1_000_000);
    expect(Math.abs(e.fields.per_op_ns! * 5000 - e.fields.total_ns!)).toBeLessThan(5000); // per_op = total / loops
    expect(only(r.events, 'done').fields).toMatchObject({ workload: LINUX_WORKLOAD_IDS.pipe, status: 0 });
    expect(r.events.at(-1)!.event).toBe('done');
  });

  it('messaging: sender and receiver groups over socketpairs', () => {
    const r = wl('messaging', 'groups=2', 'fds=5', 'loops=20');
    expect(r.code, r.stderr).toBe(0);
    const e = only(r.events, 'messaging');
    expect(e.fields).toMatchObject({ groups: 2, fds: 5, loops: 20 });
    // 2 x 5 senders x 5 receivers x 20 messages of 100 bytes: at least ~1 µs each, at most seconds.
    expect(e.fields.total_ns).toBeGreaterThan(1000 * 1000);
    expect(e.fields.total_ns).toBeLessThan(30e9);
    expect(only(r.events, 'done').fields).toMatchObject({ workload: LINUX_WORKLOAD_IDS.messaging, status: 0 });
  });

  it('ctx: a token ring like lmbench lat_ctx, overhead subtracted', () => {
    for (const args of [['procs=2', 'loops=2000'], ['procs=4', 'size_kb=16', 'loops=300']]) {
      const r = wl('ctx', ...args);
      expect(r.code, r.stderr).toBe(0);
      const e = only(r.events, 'ctx');
      expect(e.fields.raw_per_switch_ns).toBeGreaterThan(50);
      expect(e.fields.raw_per_switch_ns).toBeLessThan(10_000_000);
      expect(e.fields.overhead_ns).toBeGreaterThan(0);
      expect(e.fields.per_switch_ns).toBe(Math.max(0, e.fields.raw_per_switch_ns! - e.fields.overhead_ns!));
      expect(only(r.events, 'done').fields).toMatchObject({ workload: LINUX_WORKLOAD_IDS.ctx, status: 0 });
    }
    expect(only(wl('ctx', 'procs=4', 'size_kb=16', 'loops=300').events, 'ctx').fields).toMatchObject({ procs: 4, size_kb: 16, loops: 300 });
  });

  it('probe: bursts of timed round trips with ordered percentiles', () => {
    const r = wl('probe', 'interval_ms=10', 'rounds=50', 'count=3');
    expect(r.code, r.stderr).toBe(0);
    const bursts = r.events.filter((e) => e.event === 'ctxprobe');
    expect(bursts).toHaveLength(3);
    for (const b of bursts) {
      expect(b.fields.rounds).toBe(50);
      expect(b.fields.p50_ns).toBeGreaterThan(100);
      expect(b.fields.p50_ns).toBeLessThanOrEqual(b.fields.p99_ns!);
      expect(b.fields.p99_ns).toBeLessThanOrEqual(b.fields.max_ns!);
    }
  });

  it('refuses bad arguments clearly, with a non-zero exit and protocol error lines', () => {
    const cases: [string[], RegExp, number][] = [
      [['pipe', 'loops=abc'], /pipe: loops="abc" is not a whole number/, LINUX_WORKLOAD_IDS.pipe],
      [['pipe', 'loops=0'], /pipe: loops must be from 1 to 1000000000, got 0/, LINUX_WORKLOAD_IDS.pipe],
      [['pipe', 'loop=5'], /pipe: unknown argument "loop"; valid: loops/, LINUX_WORKLOAD_IDS.pipe],
      [['pipe', 'loops'], /pipe: argument "loops" is not key=value/, LINUX_WORKLOAD_IDS.pipe],
      [['pipe', 'loops=99999999999999999999999'], /is not a whole number/, LINUX_WORKLOAD_IDS.pipe],
      [['ctx', 'procs=1'], /ctx: procs must be from 2 to 1024, got 1/, LINUX_WORKLOAD_IDS.ctx],
      [['messaging', 'groups=200', 'fds=64'], /more than 8192/, LINUX_WORKLOAD_IDS.messaging],
      [['nosuch'], /unknown workload "nosuch"; valid: pipe, messaging, ctx/, 0],
    ];
    for (const [args, message, id] of cases) {
      const r = wl(...args);
      expect(r.code, args.join(' ')).toBe(2);
      expect(r.stderr).toMatch(message);
      expect(r.events.some((e) => e.event === 'error')).toBe(true);
      expect(only(r.events, 'done').fields).toMatchObject({ workload: id, status: 1 });
    }
    const none = spawnSync(LINUX_HOST_WORKLOAD, [], { encoding: 'utf8' });
    expect(none.status).toBe(2);
    expect(none.stderr).toMatch(/usage: unhalt-workload NAME/);
    const probe = wl('probe', 'interval_ms=1');
    expect(probe.code).toBe(2);
    expect(probe.stderr).toMatch(/probe: interval_ms must be from 10/);
  });

  it('the runner checks arguments as the C side does, and the C side takes what the runner sends', () => {
    const pipe = workload('linux', 'pipe');
    expect(linuxWorkloadArgs(pipe, '')).toEqual(['loops=1000000']);
    expect(linuxWorkloadArgs(workload('linux', 'ctx'), 'size_kb=64  procs=16')).toEqual(['procs=16', 'size_kb=64', 'loops=10000']);
    expect(() => linuxWorkloadArgs(pipe, 'loops=0')).toThrow(/pipe: loops must be from 1 to 1000000000, got 0/);
    expect(() => linuxWorkloadArgs(pipe, 'loop=5')).toThrow(/unknown argument "loop"; valid: loops/);
    expect(() => linuxWorkloadArgs(pipe, 'loops=1.5')).toThrow(/must be key=integer/);
    expect(() => linuxWorkloadArgs(pipe, '__proto__=1')).toThrow(/unknown argument/);
    expect(() => linuxWorkloadArgs(workload('linux', 'messaging'), 'groups=200 fds=64')).toThrow(/more than 8192/);
    // Every limit the runner allows, the C side allows too (and one past it, neither does).
    // (The workloads disk's tools are the agent's, not unhalt-workload's: workloads-disk.test.ts.)
    for (const w of LINUX_WORKLOADS.filter((x) => !x.tool)) {
      for (const [key, p] of Object.entries(w.params!)) {
        expect(wl(w.name, `${key}=${p.max + 1}`).code, `${w.name} ${key}=${p.max + 1}`).toBe(2);
        expect(() => linuxWorkloadArgs(w, `${key}=${p.max + 1}`)).toThrow();
        expect(wl(w.name, `${key}=${p.min - 1}`).code, `${w.name} ${key}=${p.min - 1}`).toBe(2);
      }
    }
  });
});

/** Feeds the agent lines on stdin; returns its protocol events once it exits at end of input. */
function agent(script: { line: string; waitMs?: number }[]): Promise<Ran> {
  return new Promise((resolve, reject) => {
    const child = spawn(LINUX_HOST_AGENT, ['--stdio'], { stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => { stdout += d; });
    child.stderr.on('data', (d) => { stderr += d; });
    const killer = setTimeout(() => child.kill('SIGKILL'), 30_000);
    child.on('error', reject);
    child.on('close', (code) => { clearTimeout(killer); resolve({ code, stdout, stderr, events: parseAll(stdout) }); });
    void (async () => {
      for (const s of script) {
        child.stdin.write(`${s.line}\n`);
        if (s.waitMs) await new Promise((r) => setTimeout(r, s.waitMs));
      }
      child.stdin.end();
    })();
  });
}

describe('the agent command path (unhalt-agent --stdio)', () => {
  it('reports ready, then answers run, probe and the old commands in order', async () => {
    const r = await agent([
      { line: 'ping seq=7' },
      { line: 'run pipe loops=2000' },
      { line: 'run ctx procs=3 loops=200' },
      { line: 'run messaging groups=1 fds=4 loops=10' },
      { line: 'probe on interval_ms=20 rounds=20', waitMs: 300 },
      { line: 'run pipe loops=500' },
      { line: 'probe off' },
      { line: 'run pipe loops=x' },
      { line: 'run' },
      { line: 'probe sideways' },
      { line: 'frobnicate' },
    ]);
    expect(r.code, r.stderr).toBe(0);
    const names = r.events.map((e) => e.event);
    expect(names[0]).toBe('ready');
    expect(r.events[0]!.fields.nproc).toBeGreaterThan(0);
    expect(r.events.find((e) => e.event === 'pong')!.fields.seq).toBe(7);
    const dones = r.events.filter((e) => e.event === 'done');
    expect(dones.map((d) => [d.fields.workload, d.fields.status])).toEqual([
      [LINUX_WORKLOAD_IDS.pipe, 0], [LINUX_WORKLOAD_IDS.ctx, 0], [LINUX_WORKLOAD_IDS.messaging, 0], [LINUX_WORKLOAD_IDS.pipe, 0],
      [LINUX_WORKLOAD_IDS.pipe, 1], [0, 1],
    ]);
    // Each result comes before its done line.
    const pipes = r.events.filter((e) => e.event === 'pipe');
    expect(pipes.map((p) => p.fields.loops)).toEqual([2000, 500]);
    expect(names.indexOf('pipe')).toBeLessThan(names.indexOf('done'));
    expect(only(r.events, 'ctx').fields.procs).toBe(3);
    expect(only(r.events, 'messaging').fields).toMatchObject({ groups: 1, fds: 4, loops: 10 });
    // The live probe ran while it was on (also during the second pipe run), and stopped.
    expect(r.events.find((e) => e.event === 'probe' && e.fields.on === 1)!.fields).toMatchObject({ interval_ms: 20, rounds: 20 });
    const bursts = r.events.filter((e) => e.event === 'ctxprobe');
    expect(bursts.length).toBeGreaterThanOrEqual(3);
    const off = names.lastIndexOf('probe');
    expect(r.events[off]!.fields.on).toBe(0);
    expect(names.slice(off).includes('ctxprobe')).toBe(false);
    // Bad input: errors, never a crash.
    expect(r.events.filter((e) => e.event === 'error').map((e) => Object.keys(e.fields).join('+')))
      .toEqual(['workload+bad_args', 'unknown_workload', 'workload+bad_args', 'unknown_command']);
    expect(r.stderr).toMatch(/pipe: loops="x" is not a whole number/);
  });

  it('bounds over-long lines (16 KiB in: an exec\'s argument vector as hex)', async () => {
    const r = await agent([{ line: 'x'.repeat(20000) }, { line: 'ping seq=1' }]);
    expect(r.events.map((e) => e.event)).toEqual(['ready', 'error', 'pong']);
    expect(r.events[1]!.fields.line_too_long).toBe(1);
  });
});

// The user's guest command (`unhalt bench --guest-cmd`), through the real agent built for the host
// (`unhalt-agent --stdio`: the same C code a guest runs on ttyS1): the request line for an
// argument vector of any bytes, the output back as hex lines, exit status, signals, the deadline
// that kills the command's whole process group, refusals, and the host's reading of it all
// (GuestExec, readMetric). No KVM needed.
import { spawn, spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { beforeAll, describe, expect, it } from 'vitest';
import { execLine, GuestExec, type ExecResult } from '../../electron/experiments/guest-exec.ts';
import { readMetric, validateUserBenchmark, describeBench } from '../../electron/experiments/user-bench.ts';
import { AgentLineReader, parseAgentLine, type AgentEvent } from '../../electron/vmm/agent/line-protocol.ts';
import { LINUX_HOST_AGENT } from '../../electron/vmm/guests-linux.ts';

const BUILD = fileURLToPath(new URL('../../native/guest/linux/build-workloads.mjs', import.meta.url));

beforeAll(() => {
  const r = spawnSync(process.execPath, [BUILD, '--quiet'], { encoding: 'utf8' });
  expect(r.status, r.stderr).toBe(0);
}, 60_000);

/** Sends the lines to a fresh agent; every answer it gave, each exec's result read by GuestExec. */
function agent(lines: string[]): Promise<{ events: AgentEvent[]; execs: (ExecResult | string)[]; malformed: number; ms: number }> {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const child = spawn(LINUX_HOST_AGENT, ['--stdio'], { stdio: ['pipe', 'pipe', 'inherit'] });
    const events: AgentEvent[] = [];
    const execs: (ExecResult | string)[] = [];
    let exec = new GuestExec();
    const reader = new AgentLineReader((e) => {
      events.push(e);
      if (exec.onEvent(e)) {
        execs.push(exec.result ?? exec.refused!);
        exec = new GuestExec();
      }
    });
    child.stdout.on('data', (d: Buffer) => reader.push(d));
    const killer = setTimeout(() => child.kill('SIGKILL'), 60_000);
    child.on('error', reject);
    child.on('close', () => { clearTimeout(killer); resolve({ events, execs, malformed: reader.malformed, ms: performance.now() - t0 }); });
    child.stdin.end(lines.join(''));
  });
}

describe('exec in the agent', () => {
  it('runs the vector without a shell; output of any bytes comes back whole, with its status', async () => {
    const odd = 'a b;$(touch /tmp/never)\t"\'\\ ünï 😀';
    const r = await agent([
      execLine(['printf', '%s|%s\\n', odd, 'second arg'], 10_000),
      execLine(['sh', '-c', 'echo to-out; echo to-err >&2; exit 7'], 10_000),
      execLine(['sh', '-c', 'kill -TERM $$'], 10_000),
    ]);
    expect(r.malformed).toBe(0);
    const [a, b, c] = r.execs as ExecResult[];
    expect(a).toEqual({ output: `${odd}|second arg\n`, status: 0, signal: 0, timedOut: false, outBytes: Buffer.byteLength(`${odd}|second arg\n`) });
    expect(b!.status).toBe(7);
    expect(b!.output.split('\n').sort()).toEqual(['', 'to-err', 'to-out']);
    expect(c).toMatchObject({ signal: 15, timedOut: false });
  });

  it('a long output: every line within the protocol, the last 64 KiB kept in order, the total counted', async () => {
    // 200,000 numbered lines: about 1.3 MB, far past what is kept.
    const r = await agent([execLine(['sh', '-c', 'seq 1 200000; echo summary=42'], 30_000)]);
    expect(r.malformed).toBe(0);
    const res = r.execs[0] as ExecResult;
    expect(res.status).toBe(0);
    expect(res.outBytes).toBe(spawnSync('seq', ['1', '200000'], { maxBuffer: 1 << 24 }).stdout.length + 'summary=42\n'.length);
    expect(Buffer.byteLength(res.output)).toBe(64 * 1024);
    expect(res.output.endsWith('199999\n200000\nsummary=42\n')).toBe(true);
    const lines = res.output.split('\n').slice(1, -2).map(Number); // the first may be cut
    expect(lines.every((n, i) => i === 0 || n === lines[i - 1]! + 1)).toBe(true);
    // The metric reads the summary at the end, as a benchmark prints it.
    expect(readMetric(res.output, 'summary=(\\d+)', 'guest')).toEqual({ value: 42 });
  });

  it('the deadline kills the command and what it started; a missing program is status 127 with its reason', async () => {
    const r = await agent([
      // A child that would hold the output open for a minute: killed with its group.
      execLine(['sh', '-c', 'sleep 60 & echo started; wait'], 300),
      execLine(['no-such-program-here', 'x'], 5000),
    ]);
    const [late, missing] = r.execs as ExecResult[];
    expect(late).toMatchObject({ timedOut: true, signal: 9, output: 'started\n' });
    expect(r.ms).toBeLessThan(30_000); // not the minute the sleeping child had
    expect(missing!.status).toBe(127);
    expect(missing!.output).toMatch(/cannot run no-such-program-here: No such file or directory/);
  });

  it('refuses a malformed request in one line and keeps serving', async () => {
    const r = await agent(['exec hex=7a\n', 'exec hex=zz00\n', 'exec\n', 'exec hex=00\n', 'exec hex=6100 other=1\n', 'ping seq=3\n', execLine(['true'], 1000)]);
    expect(r.execs.slice(0, 5)).toEqual(Array(5).fill(expect.stringMatching(/refused the command line \(bad_args\)/)));
    expect(r.events.find((e) => e.event === 'pong')?.fields.seq).toBe(3);
    expect(r.execs[5]).toMatchObject({ status: 0 });
  });
});

describe('the protocol\'s hex field and the host\'s reading', () => {
  it('hex= is bytes, last on the line, lower-case and whole; anything else is malformed', () => {
    expect(parseAgentLine('@u1 exec_out seq=0 hex=00ff41')).toEqual({ event: 'exec_out', fields: { seq: 0 }, data: Uint8Array.from([0, 255, 65]) });
    expect(parseAgentLine('@u1 exec_out seq=0 hex=')).toEqual({ event: 'exec_out', fields: { seq: 0 }, data: new Uint8Array() });
    for (const bad of ['@u1 x hex=0', '@u1 x hex=AB', '@u1 x hex=zz', '@u1 x hex=00 seq=1']) expect(parseAgentLine(bad), bad).toBe('malformed');
  });

  it('a lost output line is said, an agent without exec is named', () => {
    const ex = new GuestExec();
    ex.onEvent({ event: 'exec_out', fields: { seq: 0 }, data: Buffer.from('a') });
    ex.onEvent({ event: 'exec_out', fields: { seq: 2 }, data: Buffer.from('c') });
    expect(ex.onEvent({ event: 'exec', fields: { status: 0, signal: 0, timed_out: 0, out_bytes: 3 } })).toBe(true);
    expect(ex.result!.output).toBe('[part of the output was lost on ttyS1]\nac');
    // A guest that floods exec_out lines keeps the host's memory bounded: the tail is kept.
    const flood = new GuestExec();
    for (let i = 0; i < 5000; i++) flood.onEvent({ event: 'exec_out', fields: { seq: i }, data: new Uint8Array(200).fill(65 + (i % 26)) });
    flood.onEvent({ event: 'exec', fields: { status: 0, signal: 0, timed_out: 0, out_bytes: 1_000_000 } });
    expect(flood.result!.output.length).toBeLessThanOrEqual(256 * 1024 + 64);
    expect(flood.result!.output).toMatch(/^\[part of the output was lost on ttyS1\]\n/);
    const old = new GuestExec();
    expect(old.onEvent({ event: 'error', fields: { unknown_command: 1 } })).toBe(true);
    expect(old.refused).toMatch(/has no exec command .*rebuild the tools disk/);
  });

  it('a benchmark has one command, host or guest; a guest command needs no confirmation id', () => {
    expect(validateUserBenchmark({ guestCmd: ['perf', 'bench'], metric: 'T: ([0-9.]+)' })).toEqual({ guestCmd: ['perf', 'bench'], metric: 'T: ([0-9.]+)' });
    expect(() => validateUserBenchmark({ guestCmd: ['a'], hostCmd: ['b'], metric: '(1)' })).toThrow(/one command: .* not both or neither/);
    expect(() => validateUserBenchmark({ metric: '(1)' })).toThrow(/not both or neither/);
    expect(() => validateUserBenchmark({ guestCmd: ['a'], hostCmdId: '0123456789abcdef', metric: '(1)' })).toThrow(/hostCmdId goes with a host command/);
    expect(() => validateUserBenchmark({ guestCmd: [''], metric: '(1)' })).toThrow(/^the guest command names no program/);
    expect(describeBench({ guestCmd: ['perf', 'bench', 'sched pipe'], metric: 'T: ([0-9.]+)', unit: 's' }))
      .toBe("guest command perf bench 'sched pipe' once the guest's agent was ready; metric /T: ([0-9.]+)/ in s, lower is better");
    expect(readMetric('nothing', 'x=(\\d)', 'guest')).toEqual({ error: 'the guest command\'s output has no match for --metric /x=(\\d)/ (last line: "nothing")' });
  });
});

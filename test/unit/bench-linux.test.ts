// `unhalt bench` with Linux workloads, without KVM: the refusal on PVM hosts (where the Linux
// guest cannot boot), the checks made before anything runs, and the bare-metal path (the host
// build of the workload) with the rows and ratios it adds to the table.
import { mkdtempSync, readdirSync } from 'node:fs';
import { spawn, spawnSync } from 'node:child_process';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { beforeAll, describe, expect, it } from 'vitest';
import { formatMarkdown } from '../../electron/experiments/format.ts';
import { AgentLineReader } from '../../electron/vmm/agent/line-protocol.ts';
import { runBare } from '../../electron/experiments/backend-bare.ts';
import { LinuxAgentRun } from '../../electron/experiments/linux-agent-run.ts';
import { LINUX_ON_PVM, prepareExperiment } from '../../electron/experiments/prepare.ts';
import { BARE_CONFIG, summarize } from '../../electron/experiments/summary.ts';
import type { ExperimentSpec, RunRecord } from '../../electron/experiments/types.ts';
import { ExperimentPacing, type RunPacer } from '../../electron/experiments/pacing.ts';
import { workload, type Workload } from '../../electron/experiments/workloads.ts';
import { LINUX_HOST_AGENT, linuxKitBuilt } from '../../electron/vmm/guests-linux.ts';
import { hostKind } from '../../electron/vmm/host.ts';
import { runCli } from '../support/cli.ts';
import { simulatedHost } from '../support/simulated-host.ts';

const BUILD = fileURLToPath(new URL('../../native/guest/linux/build-workloads.mjs', import.meta.url));
const spec = (over: Partial<ExperimentSpec> = {}): ExperimentSpec => ({
  guest: 'linux', workload: 'pipe', workloadArgs: 'loops=1000', runs: 1,
  configs: [{ name: 'a', config: 'cpus=1' }, { name: 'b', config: 'cpus=2' }], ...over,
});

beforeAll(() => {
  const r = spawnSync(process.execPath, [BUILD, '--quiet'], { encoding: 'utf8' });
  expect(r.status, r.stderr).toBe(0);
}, 60_000);

describe('Linux workloads on a PVM host', () => {
  it('the runner refuses at once, with one line that points at the probe guest', () => {
    expect(() => prepareExperiment(spec(), simulatedHost({ kind: 'pvm' }))).toThrow(LINUX_ON_PVM);
    // Before any other check: even a spec with other problems gets the reason that matters.
    expect(() => prepareExperiment(spec({ configs: [], workload: 'nope' }), simulatedHost({ kind: 'pvm' }))).toThrow(LINUX_ON_PVM);
    expect(LINUX_ON_PVM).not.toMatch(/\n/);
    expect(LINUX_ON_PVM).toMatch(/PVM/);
    expect(LINUX_ON_PVM).toMatch(/--guest probe/);
  });

  it('`unhalt bench --guest linux` exits 1 with that line and keeps nothing', async () => {
    const home = mkdtempSync(join(tmpdir(), 'unhalt-bench-linux-'));
    // UNHALT_PVM_MODULE_PATH names the module directory hostKind() looks for: any existing path makes a PVM host.
    const pvm = { UNHALT_HOME: home, UNHALT_PVM_MODULE_PATH: home };
    for (const args of [
      ['--guest', 'linux', '--workload', 'pipe', '--config', 'a=cpus=1', '--config', 'b=cpus=2', '--bare'],
      ['--guest', 'linux'],
    ]) {
      const t0 = performance.now();
      const r = await runCli(['bench', ...args], { env: pvm });
      expect(r.code).toBe(1);
      expect(r.stderr.trim()).toBe(`unhalt: ${LINUX_ON_PVM}`);
      expect(r.stdout).toBe('');
      expect(performance.now() - t0).toBeLessThan(20_000); // no boot attempt
    }
    if (hostKind() === 'pvm') {
      const r = await runCli(['bench', '--guest', 'linux', '--workload', 'pipe', '--config', 'a=cpus=1', '--config', 'b=cpus=2'], { env: { UNHALT_HOME: home } });
      expect(r.code).toBe(1);
      expect(r.stderr.trim()).toBe(`unhalt: ${LINUX_ON_PVM}`);
    }
    expect(() => readdirSync(join(home, 'experiments'))).toThrow();
  });
});

describe('Linux experiments: checks before anything runs (hardware host)', () => {
  const hw = simulatedHost();

  it('checks the workload and its arguments', () => {
    expect(() => prepareExperiment(spec({ workload: 'ipi' }), hw)).toThrow(/unknown linux workload "ipi"; valid: pipe, messaging, ctx/);
    expect(() => prepareExperiment(spec({ workloadArgs: 'loops=0' }), hw)).toThrow(/pipe: loops must be from 1/);
    expect(() => prepareExperiment(spec({ workload: 'ctx', workloadArgs: 'threads=2' }), hw)).toThrow(/ctx: unknown argument "threads"; valid: procs, size_kb, loops/);
    expect(() => prepareExperiment(spec({ vsQemu: true }), hw)).toThrow(/--vs-qemu is not available for the Linux guest/);
  });

  it.skipIf(!linuxKitBuilt())('prepares Linux configs with the default kernel command line and the full workload arguments', () => {
    const p = prepareExperiment(spec({ workload: 'messaging', workloadArgs: 'groups=2', bare: true }), hw);
    expect(p.linuxArgs).toEqual(['groups=2', 'fds=20', 'loops=100']);
    expect(p.prepared.map((x) => x.config.guest)).toEqual(['linux', 'linux']);
    expect(p.prepared[0]!.config.append).toBeUndefined();
    expect(p.notes).toEqual([]);
  });

  it.skipIf(!linuxKitBuilt())('takes the A/B configs that show the mechanism: pv-unhalt off/on, cpu-pm off/on', () => {
    const ab = (a: string, b: string) => prepareExperiment(spec({ configs: [{ name: 'off', config: a }, { name: 'on', config: b }] }), hw).prepared;
    const pv = ab('cpus=2,kvm-pv-unhalt=off', 'cpus=2,kvm-pv-unhalt=on');
    expect(pv.map((x) => x.config.cpuFeatures?.['kvm-pv-unhalt'] ?? null)).toEqual([false, true]);
    const pm = ab('cpus=2,cpu-pm=off', 'cpus=2,cpu-pm=on');
    expect(pm.map((x) => x.config.cpuPm ?? false)).toEqual([false, true]);
    // KVM's own rule, before anything runs: no PV_UNHALT with HLT exits disabled.
    expect(() => ab('cpus=2', 'cpus=2,cpu-pm=on,kvm-pv-unhalt=on')).toThrow(/configuration "on": /);
  });
});

describe('the bare-metal reference (--bare)', () => {
  it('runs the host build of the workload and reads its result', async () => {
    const pipe = workload('linux', 'pipe');
    const r = await runBare(pipe, ['loops=2000']);
    expect(r.error).toBeUndefined();
    expect(r.fields).toMatchObject({ loops: 2000 });
    expect(r.value).toBeCloseTo(r.fields.total_ns! / 1e6, 6); // ms, like perf's "Total time"
    expect(r.value).toBeGreaterThan(0);
    const ctx = await runBare(workload('linux', 'ctx'), ['procs=2', 'size_kb=0', 'loops=500']);
    expect(ctx.value).toBeCloseTo(ctx.fields.per_switch_ns! / 1e3, 6); // µs
    const missing = await runBare(pipe, ['loops=10'], '/nonexistent/unhalt-workload');
    expect(missing.value).toBeNull();
    expect(missing.error).toMatch(/cannot run \/nonexistent\/unhalt-workload: .*build-workloads\.mjs/);
    const bad = await runBare(pipe, ['loops=0']);
    expect(bad.error).toMatch(/bare pipe failed: pipe: loops must be from 1/);
    const late = await runBare(pipe, ['loops=100000000'], undefined, 200);
    expect(late).toMatchObject({ value: null, error: 'bare pipe failed: stopped after 0.2 s, its deadline' });
  });

  it('adds a bare row: the reference of the ratio column, with the µs/op figure beside it', async () => {
    const pipe = workload('linux', 'pipe');
    const raw: RunRecord[] = [];
    for (let run = 1; run <= 2; run++) {
      const bare = await runBare(pipe, ['loops=2000']);
      raw.push({ ...bare, config: BARE_CONFIG, runner: 'bare', run });
      // Guest rows as a Linux VM would give them (2x and 3x bare), so the ratios are known.
      for (const [config, k] of [['off', 2], ['on', 3]] as const) {
        const total = bare.fields.total_ns! * k;
        const fields = { loops: 2000, total_ns: total, per_op_ns: Math.round(total / 2000) };
        raw.push({ config, runner: 'unhalt', run, value: total / 1e6, fields, wallMs: 1 });
      }
    }
    const rows = summarize(['off', 'on'], ['unhalt', 'bare'], raw, pipe);
    expect(rows.map((r) => `${r.config}/${r.runner}`)).toEqual(['off/unhalt', 'on/unhalt', 'bare/bare']);
    const bare = rows[2]!;
    expect(bare.runs).toHaveLength(2);
    expect(bare.unit).toBe('ms');
    expect(bare.ratioToFirst).toBe(1);
    expect(bare.ratioToReference).toBeNull();
    expect(rows[0]!.ratioToReference).toBeCloseTo(2, 6);
    expect(rows[1]!.ratioToReference).toBeCloseTo(3, 6);
    expect(rows[1]!.ratioToFirst).toBeCloseTo(1.5, 6);
    expect(bare.secondary!.unit).toBe('µs/op');
    expect(bare.secondary!.median).toBeGreaterThan(0.1);
    const table = formatMarkdown({ spec: spec({ bare: true }), status: 'ok', unit: 'ms', rows, raw, failures: [], environment: { hostKind: 'hardware' }, notes: [] });
    expect(table).toMatch(/\| config \| VMM \| median \(ms\) \| min–max \| ratio to first \| ratio to bare \|/);
    expect(table).toMatch(/\| bare \| bare \| [\d.]+ \| [\d.]+–[\d.]+ \| 1\.00 \| — \|/);
    expect(table).toMatch(/\| off \| unhalt \| [\d.]+ \| [\d.]+–[\d.]+ \| 1\.00 \| 2\.00 \|/);
    expect(table).toMatch(/also, median µs\/op: off [\d.]+, on [\d.]+, bare [\d.]+/);
  });
});

/**
 * What the runner does with a booted Linux guest, with the agent built for the host in its
 * place: the same LinuxAgentRun waits for `@u1 ready`, sends the command, reads the result and
 * `@u1 done`; only the transport differs (stdin/stdout here, ttyS1 and sendAgent in a VM).
 */
function driveAgent(work: Workload, args: string[], pacer?: RunPacer): Promise<{ run: LinuxAgentRun; sent: string[] }> {
  return new Promise((resolve, reject) => {
    const child = spawn(LINUX_HOST_AGENT, ['--stdio'], { stdio: ['pipe', 'pipe', 'ignore'] });
    const sent: string[] = [];
    const run = new LinuxAgentRun(work, args, (line) => { sent.push(line); child.stdin.write(line); }, () => child.stdin.end(), pacer ? { pacer } : {});
    const reader = new AgentLineReader((e) => run.onEvent(e));
    child.stdout.on('data', (d: Buffer) => reader.push(d));
    const killer = setTimeout(() => child.kill('SIGKILL'), 30_000);
    child.on('error', reject);
    child.on('close', () => { clearTimeout(killer); resolve({ run, sent }); });
  });
}

describe('the runner\'s side of a Linux run, against the real agent (host build)', () => {
  it('sends the command once the agent is ready and reads the value', async () => {
    const pipe = workload('linux', 'pipe');
    const { run, sent } = await driveAgent(pipe, ['loops=3000']);
    expect(sent).toEqual(['run pipe loops=3000\n']);
    const out = run.outcome('the VM ended');
    expect(out.error).toBeUndefined();
    expect(out.value).toBeCloseTo(run.result!.fields.total_ns! / 1e6, 6);
    expect(run.done!.fields).toMatchObject({ workload: 1, status: 0 });
    const ctx = await driveAgent(workload('linux', 'ctx'), ['procs=3', 'size_kb=4', 'loops=200']);
    expect(ctx.run.outcome('x').value).toBeGreaterThanOrEqual(0);
    expect(ctx.run.result!.fields).toMatchObject({ procs: 3, size_kb: 4, loops: 200 });
    const msg = await driveAgent(workload('linux', 'messaging'), ['groups=1', 'fds=3', 'loops=5']);
    expect(msg.run.outcome('x').value).toBeGreaterThan(0);
  });

  it('reports the agent\'s failure, and a run that never got an answer', async () => {
    // The C side refuses what the runner would have refused first; the report stays readable.
    const { run } = await driveAgent(workload('linux', 'pipe'), ['loops=0']);
    expect(run.outcome('the VM ended')).toEqual({ value: null, fields: {}, error: 'the agent\'s pipe run failed (status 1, workload=1 bad_args=1)' });
    const silent = new LinuxAgentRun(workload('linux', 'pipe'), ['loops=5'], () => {}, () => {});
    expect(silent.outcome('stopped after 120 s').error).toBe('the Linux agent never reported ready on ttyS1: stopped after 120 s');
    silent.onEvent({ event: 'ready', fields: {} });
    silent.onEvent({ event: 'done', fields: { workload: 2, status: 0 } }); // another workload's: not ours
    expect(silent.done).toBeUndefined();
    expect(silent.outcome('stopped after 120 s').error).toBe('no pipe result after "run pipe loops=5": stopped after 120 s');
  });

  it('with a pacer: calibrates first, then sends the measured command; only its result counts', async () => {
    const pipe = workload('linux', 'pipe');
    const pacing = new ExperimentPacing({ slowdown: 1, param: { name: 'loops', calibrateFrom: 1000, min: 1, max: 1_000_000 }, givenSize: 4000 });
    const first = await driveAgent(pipe, ['loops=4000'], pacing.newRun());
    // The ladder stops at the given size: 1000, then 4000 (unless 1000 loops took 250 ms), then the measured 4000.
    expect(first.sent[0]).toBe('run pipe loops=1000\n');
    expect(first.sent.at(-1)).toBe('run pipe loops=4000\n');
    expect(first.run.step?.kind).toBe('measure');
    expect(first.run.outcome('ended').error).toBeUndefined();
    expect(first.run.result!.fields.loops).toBe(4000);
    expect(pacing.sizing).toMatchObject({ param: 'loops', size: 4000, source: 'given' });
    // The next run warms up at the calibration's last size, then measures.
    const second = await driveAgent(pipe, ['loops=4000'], pacing.newRun());
    expect(second.sent).toEqual([`run pipe loops=${pacing.sizing!.steps.at(-1)!.size}\n`, 'run pipe loops=4000\n']);
    expect(second.run.result!.fields.loops).toBe(4000);
  });

  it('with a pacer: a failed calibration step is named as such', () => {
    const pacing = new ExperimentPacing({ slowdown: 1, param: { name: 'loops', calibrateFrom: 1000, min: 1, max: 1_000_000 } });
    const run = new LinuxAgentRun(workload('linux', 'pipe'), ['loops=1000000'], () => {}, () => {}, { pacer: pacing.newRun() });
    run.onEvent({ event: 'ready', fields: {} });
    expect(run.command).toBe('run pipe loops=1000');
    expect(run.outcome('stopped at its 30 s deadline (x)').error).toBe('no pipe result after "run pipe loops=1000" (calibration): stopped at its 30 s deadline (x)');
    run.onEvent({ event: 'error', fields: { workload: 1, errno: 12 } });
    run.onEvent({ event: 'done', fields: { workload: 1, status: 2 } });
    expect(run.outcome('ended').error).toBe('the agent\'s pipe calibration run failed (status 2, workload=1 errno=12)');
  });
});

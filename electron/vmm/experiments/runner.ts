// The A/B experiment runner behind `unhalt bench` and the compare view: for each configuration,
// boot a VM, run the workload, record the guest's result with the KVM stats deltas and the VMM's
// host CPU time; optionally the same guest and knobs under QEMU. Configurations are run
// alternately (A, B, A, B, ...) because this machine is noisy; results are medians and ratios.
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { release, tmpdir } from 'node:os';
import { join } from 'node:path';
import type { AgentEvent } from '../agent/line-protocol.ts';
import { parseAgentLine } from '../agent/line-protocol.ts';
import { parseConfigString } from '../config/config-string.ts';
import { resolveMachine } from '../config/resolve.ts';
import type { VmConfig } from '../config/vm-config.ts';
import { PROBE_KERNEL } from '../guests.ts';
import { hostCpuModel } from '../host.ts';
import { disableExitNames, probeHost, type HostCapabilities } from '../machine/host-caps.ts';
import { Sampler } from '../telemetry/sampler.ts';
import { VirtualMachine } from '../vm.ts';
import type { ExperimentProgress, ExperimentResult, ExperimentResultRow, ExperimentSpec, RunRecord } from './types.ts';
import { workload, type Workload } from './workloads.ts';

const RUN_TIMEOUT_MS = 120_000;
export const MAX_RUNS = 1000;

export class ExperimentError extends Error {
  override name = 'ExperimentError';
}

interface Prepared {
  name: string;
  config: VmConfig;
  qemuArgs?: string[];
  qemuNote?: string;
}

/** Checks a spec completely before anything runs (every config parsed and resolved). */
export function prepareExperiment(spec: ExperimentSpec, host: HostCapabilities = probeHost()): { work: Workload; prepared: Prepared[]; notes: string[] } {
  if (!Array.isArray(spec.configs) || spec.configs.length < 2) throw new ExperimentError('an experiment needs two or more configurations');
  if (!Number.isInteger(spec.runs) || spec.runs < 1 || spec.runs > MAX_RUNS) throw new ExperimentError(`runs must be between 1 and ${MAX_RUNS}`);
  if (spec.guest !== 'probe' && spec.guest !== 'linux') throw new ExperimentError(`guest must be probe or linux, got "${String(spec.guest).slice(0, 20)}"`);
  let work: Workload;
  try {
    work = workload(spec.guest, spec.workload);
  } catch (e) {
    throw new ExperimentError((e as Error).message);
  }
  const args = spec.workloadArgs ?? '';
  if (args.length > 512 || /[\0\n]/.test(args)) throw new ExperimentError('workload arguments must be one short line');
  const notes: string[] = [];
  const names = new Set<string>();
  const prepared = spec.configs.map(({ name, config }) => {
    if (typeof name !== 'string' || !/^[A-Za-z0-9][A-Za-z0-9 ._+-]{0,39}$/.test(name)) throw new ExperimentError(`bad configuration name "${String(name).slice(0, 40)}"`);
    if (names.has(name)) throw new ExperimentError(`configuration name "${name}" is used twice`);
    names.add(name);
    let c: VmConfig;
    try {
      c = parseConfigString(String(config), { guest: spec.guest, name: 'bench', append: work.cmdline(args) });
    } catch (e) {
      throw new ExperimentError(`configuration ${name}: ${(e as Error).message}`);
    }
    if (c.cpus < work.minCpus) throw new ExperimentError(`configuration ${name}: workload ${work.name} needs at least ${work.minCpus} vCPUs (cpus=${work.minCpus})`);
    try {
      resolveMachine(c, host); // the runnability check, before any run starts
    } catch (e) {
      throw new ExperimentError(`configuration ${name}: ${(e as Error).message}`);
    }
    const p: Prepared = { name, config: c };
    if (spec.vsQemu) Object.assign(p, qemuCommand(c, host));
    return p;
  });
  if (spec.bare) notes.push(`--bare: the ${work.name} workload runs inside the probe guest only; no bare-metal reference for it`);
  for (const p of prepared) if (p.qemuNote) notes.push(`${p.name}: ${p.qemuNote}`);
  return { work, prepared, notes };
}

export async function runExperiment(
  spec: ExperimentSpec,
  onProgress: (p: ExperimentProgress) => void = () => {},
  signal?: AbortSignal,
): Promise<ExperimentResult> {
  const host = probeHost();
  const { work, prepared, notes } = prepareExperiment(spec, host);
  const runners = spec.vsQemu ? (['unhalt', 'qemu'] as const) : (['unhalt'] as const);
  const total = spec.runs * prepared.length * runners.length;
  const raw: RunRecord[] = [];
  let done = 0;
  for (let run = 1; run <= spec.runs; run++) {
    for (const p of prepared) {
      for (const runner of runners) {
        if (signal?.aborted) throw new ExperimentError('the experiment was cancelled');
        onProgress({ done, total, current: `${p.name} (${runner}) run ${run}/${spec.runs}` });
        const rec = runner === 'unhalt' ? await runOnUnhalt(p, work, host) : await runOnQemu(p, work);
        raw.push({ ...rec, config: p.name, runner, run });
        done++;
      }
    }
  }
  onProgress({ done, total });
  return { spec, rows: summarize(prepared.map((p) => p.name), runners, raw, work), raw, environment: environment(host, prepared, spec), notes };
}

type RunOutcome = Omit<RunRecord, 'config' | 'runner' | 'run'>;

async function runOnUnhalt(p: Prepared, work: Workload, host: HostCapabilities): Promise<RunOutcome> {
  const { spec } = resolveMachine(p.config, host);
  const t0 = performance.now();
  const vm = await VirtualMachine.start(spec);
  const sampler = Sampler.forVm(vm, { intervalMs: 100 });
  let boot: AgentEvent | undefined;
  let result: AgentEvent | undefined;
  vm.on('agent', (e) => {
    if (e.event === 'boot') boot = e;
    if (e.event === work.event && !result) {
      result = e;
      // A result is all we need; a live probe keeps going, so end the run here.
      setTimeout(() => void vm.stop(), 50);
    }
  });
  const timer = setTimeout(() => void vm.stop(), RUN_TIMEOUT_MS);
  const exit = await vm.exited;
  clearTimeout(timer);
  const wallMs = performance.now() - t0;
  const stats = statsDelta(sampler);
  if (!result) return { value: null, fields: {}, wallMs, error: `no ${work.event} result: ${exit.message}`, ...stats };
  return { value: work.value(result, boot), fields: result.fields, wallMs, ...stats };
}

function statsDelta(sampler: Sampler): Pick<RunRecord, 'haltExits' | 'haltExitsPerS' | 'pollHitRate' | 'hostCpuNs'> {
  const recs = sampler.records();
  if (recs.length === 0) return {};
  let halts = 0;
  let polls = 0;
  let hits = 0;
  let cpu = 0;
  let seconds = 0;
  for (let v = 0; v < sampler.cpus; v++) {
    const mine = recs.filter((r) => r.vcpu === v);
    const first = mine[0];
    const last = mine.at(-1);
    if (!first || !last) continue;
    const d = (k: string) => Number(last[k] ?? 0) - Number(first[k] ?? 0);
    halts += d('halt_exits');
    polls += d('halt_attempted_poll');
    hits += d('halt_successful_poll');
    cpu += Number(last.host_cpu_ns ?? 0);
    seconds = Math.max(seconds, (last.t - first.t) / 1000);
  }
  return {
    haltExits: halts,
    haltExitsPerS: seconds > 0 ? halts / seconds : undefined,
    pollHitRate: polls > 0 ? hits / polls : null,
    hostCpuNs: cpu,
  };
}

/** The QEMU command line for the same guest and knobs (where QEMU has the knob). */
export function qemuCommand(c: VmConfig, host: HostCapabilities): { qemuArgs: string[]; qemuNote?: string } {
  const { spec, resolution } = resolveMachine(c, host);
  const features = resolution.features.filter((f) => f.name !== 'kvm-msi-ext-dest-id')
    .map((f) => `${f.name}=${f.value ? 'on' : 'off'}`);
  // QEMU 7.2 on PVM aborts setting MSR 0x10a with -cpu host: drop arch-capabilities there.
  const cpu = ['host', ...(host.kind === 'pvm' ? ['-arch-capabilities'] : []), ...features].join(',');
  const args = [
    '-machine', 'microvm', '-accel', 'kvm', '-cpu', cpu, '-smp', String(c.cpus), '-m', String(c.memoryMiB),
    '-nographic', '-no-reboot', '-device', 'isa-debug-exit,iobase=0xf4,iosize=4',
    '-kernel', spec.kernelPath, '-append', spec.cmdline,
  ];
  if (c.cpuPm) args.push('-overcommit', 'cpu-pm=on');
  if (c.memLock) args.push('-overcommit', 'mem-lock=on');
  const missing: string[] = [];
  if (c.haltPollNs !== undefined) missing.push(`halt-poll-ns (QEMU has no per-VM halt-polling option: it runs with the host default ${host.haltPollParams.halt_poll_ns ?? '?'} ns)`);
  if (c.pin) missing.push('pin (QEMU does not pin vCPU threads itself)');
  return missing.length ? { qemuArgs: args, qemuNote: `QEMU lacks ${missing.join('; ')}` } : { qemuArgs: args };
}

async function runOnQemu(p: Prepared, work: Workload): Promise<RunOutcome> {
  const dir = mkdtempSync(join(tmpdir(), 'unhalt-qemu-'));
  const ttyS1 = join(dir, 'ttyS1');
  const args = [...p.qemuArgs!, '-chardev', `file,id=s1,path=${ttyS1}`, '-device', 'isa-serial,chardev=s1,iobase=0x2f8,irq=3'];
  const t0 = performance.now();
  try {
    const code = await new Promise<number | null>((resolve, reject) => {
      const child = spawn('qemu-system-x86_64', args, { stdio: ['ignore', 'ignore', 'pipe'] });
      let err = '';
      child.stderr.on('data', (d) => { err += d; });
      const timer = setTimeout(() => child.kill('SIGKILL'), RUN_TIMEOUT_MS);
      child.on('error', (e) => { clearTimeout(timer); reject(new ExperimentError(`cannot run QEMU: ${e.message} (install qemu-system-x86)`)); });
      child.on('close', (c) => { clearTimeout(timer); if (c !== 1 && err) reject(new ExperimentError(`QEMU failed: ${err.trim().split('\n')[0]}`)); else resolve(c); });
    });
    const wallMs = performance.now() - t0;
    let boot: AgentEvent | undefined;
    let result: AgentEvent | undefined;
    for (const line of readFileSync(ttyS1, 'latin1').split('\n')) {
      const e = parseAgentLine(line);
      if (typeof e !== 'object') continue;
      if (e.event === 'boot') boot = e;
      if (e.event === work.event && !result) result = e;
    }
    if (!result) return { value: null, fields: {}, wallMs, error: `no ${work.event} result from QEMU (exit status ${code})` };
    return { value: work.value(result, boot), fields: result.fields, wallMs };
  } catch (e) {
    return { value: null, fields: {}, wallMs: performance.now() - t0, error: (e as Error).message };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

function mean(xs: number[]): number | null {
  return xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : null;
}

export function summarize(configs: string[], runners: readonly string[], raw: RunRecord[], work: Pick<Workload, 'unit'>): ExperimentResultRow[] {
  const rows: ExperimentResultRow[] = [];
  for (const runner of runners) {
    for (const config of configs) {
      const recs = raw.filter((r) => r.config === config && r.runner === runner);
      const values = recs.map((r) => r.value).filter((v): v is number => v !== null && Number.isFinite(v));
      if (!values.length) continue;
      const polls = recs.map((r) => r.pollHitRate).filter((v): v is number => typeof v === 'number');
      rows.push({
        config, runner, unit: work.unit, median: median(values), min: Math.min(...values), max: Math.max(...values),
        ratioToFirst: null, ratioToReference: null,
        haltExitsPerS: mean(recs.map((r) => r.haltExitsPerS).filter((v): v is number => typeof v === 'number')),
        pollHitRate: mean(polls),
        runs: values,
      });
    }
  }
  for (const row of rows) {
    const first = rows.find((r) => r.runner === row.runner);
    if (first && first.median !== 0) row.ratioToFirst = row.median / first.median;
    if (row.runner === 'unhalt') {
      const ref = rows.find((r) => r.runner !== 'unhalt' && r.config === row.config);
      if (ref && ref.median !== 0) row.ratioToReference = row.median / ref.median;
    }
  }
  return rows;
}

function environment(host: HostCapabilities, prepared: Prepared[], spec: ExperimentSpec): Record<string, unknown> {
  let version = 'unknown';
  try {
    version = JSON.parse(readFileSync(new URL('../../../package.json', import.meta.url), 'utf8')).version;
  } catch { /* not fatal */ }
  return {
    appVersion: version,
    node: process.versions.node,
    hostCpuModel: hostCpuModel(),
    hostCpus: host.hostCpus.length,
    hostKind: host.kind,
    kernel: release(),
    kvm: {
      features: host.kvmFeatures, disableExits: disableExitNames(host.disableExits), haltPoll: host.haltPoll,
      binaryStats: host.binaryStats, maxVcpus: host.maxVcpus, haltPollParams: host.haltPollParams,
    },
    guest: spec.guest === 'probe' ? PROBE_KERNEL : spec.guest,
    configs: prepared.map((p) => ({ name: p.name, config: p.config, resolved: resolveMachine(p.config, host).resolution, qemu: p.qemuArgs })),
  };
}

// The QEMU back end: the same guest and knobs under qemu-system-x86_64 (microvm, where QEMU has
// the knob; the caveat says where it has not), its result read from ttyS1 written to a file; and
// a library VM with the user's host benchmark under the command line `unhalt export` makes.
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { AgentEvent } from '../vmm/agent/line-protocol.ts';
import { parseAgentLine } from '../vmm/agent/line-protocol.ts';
import { resolveMachine } from '../vmm/config/resolve.ts';
import type { VmConfig } from '../vmm/config/vm-config.ts';
import { QEMU_BINARY, qemuArgs as qemuArgsOf, qemuCpu, qemuOvercommit } from '../vmm/export/qemu.ts';
import { exportPlan } from '../vmm/export/plan.ts';
import { resolveBoot } from '../vmm/config/resolve.ts';
import { runCommand, waitReady, type ConsoleSource } from './backend-user-cmd.ts';
import { benchCommandOf, readMetric, type UserBenchmark } from './user-bench.ts';
import type { HostCapabilities } from '../vmm/machine/host-caps.ts';
import { onAbort, type Prepared, type RunOutcome } from './backend.ts';
import type { Deadline } from './pacing.ts';
import { ExperimentError } from './spec.ts';
import type { Workload } from './workloads.ts';

/** The knobs QEMU has no option for, whatever its board: the run goes on without them, and says so. */
function qemuGaps(c: VmConfig, host: HostCapabilities): string[] {
  const missing: string[] = [];
  if (c.haltPollNs !== undefined) missing.push(`ran at the host's halt polling (${host.haltPollParams.halt_poll_ns ?? '?'} ns), not halt-poll-ns=${c.haltPollNs}: QEMU has no per-VM halt-polling option`);
  if (c.pin) missing.push('ran unpinned: QEMU does not pin vCPU threads itself');
  return missing;
}

/** The QEMU command line for the same guest and knobs (where QEMU has the knob). */
export function qemuCommand(c: VmConfig, host: HostCapabilities): { qemuArgs: string[]; qemuCaveat?: string } {
  const { spec, resolution } = resolveMachine(c, host);
  // The knobs as the QEMU export maps them (export/qemu.ts); the board is microvm here, the
  // smallest QEMU has, for like-for-like timings with Unhalt's.
  const args = [
    '-machine', 'microvm', '-accel', 'kvm', '-cpu', qemuCpu(resolution.features, host.kind), '-smp', String(c.cpus), '-m', String(c.memoryMiB),
    '-nographic', '-no-reboot', '-device', 'isa-debug-exit,iobase=0xf4,iosize=4',
    '-kernel', spec.kernelPath, '-append', spec.cmdline,
  ];
  const overcommit = qemuOvercommit(c);
  if (overcommit) args.push('-overcommit', overcommit);
  // What the QEMU row cannot do as labelled: it runs anyway (the noise of QEMU's rows is worth
  // seeing), and the row, the chart and the notes say how it differs.
  const missing = qemuGaps(c, host);
  if (c.rng) missing.push('ran without virtio-rng: the microvm board of the QEMU rows has no PCI bus (bench/virtio-notify.ts compares the devices on q35)');
  if (c.net) missing.push('ran without a network: the microvm board of the QEMU rows has no PCI bus (bench/virtio-net-rr.ts compares virtio-net on q35)');
  return missing.length ? { qemuArgs: args, qemuCaveat: missing.join('; ') } : { qemuArgs: args };
}

export async function runOnQemu(p: Prepared, work: Workload, deadline: Deadline, signal?: AbortSignal): Promise<RunOutcome> {
  const dir = mkdtempSync(join(tmpdir(), 'unhalt-qemu-'));
  const ttyS1 = join(dir, 'ttyS1');
  const args = [...p.qemuArgs!, '-chardev', `file,id=s1,path=${ttyS1}`, '-device', 'isa-serial,chardev=s1,iobase=0x2f8,irq=3'];
  const t0 = performance.now();
  try {
    const code = await new Promise<number | null>((resolve, reject) => {
      const child = spawn('qemu-system-x86_64', args, { stdio: ['ignore', 'ignore', 'pipe'] });
      let err = '';
      child.stderr.on('data', (d) => { err += d; });
      const timer = setTimeout(() => child.kill('SIGKILL'), deadline.ms);
      const unlisten = onAbort(signal, () => child.kill('SIGKILL'));
      child.on('close', unlisten);
      child.on('error', (e) => { clearTimeout(timer); unlisten(); reject(new ExperimentError(`cannot run QEMU: ${e.message} (install qemu-system-x86)`)); });
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

/**
 * The user's host benchmark on the same VM under QEMU, with the command line `unhalt export`
 * makes (export/qemu.ts: q35, its disks snapshot=on as the run's config has them, its network
 * and forwards): QEMU starts, its console (stdout) is read for --ready, the host command runs
 * against the same forwards, its metric is the run's figure, and QEMU is stopped. No KVM stats:
 * QEMU's counters are its own process's.
 */
export async function runHostCmdOnQemu(p: Prepared, bench: UserBenchmark, deadlines: { ready: Deadline; command: Deadline }, signal?: AbortSignal): Promise<RunOutcome> {
  const t0 = performance.now();
  const dir = mkdtempSync(join(tmpdir(), 'unhalt-qemu-'));
  const child = spawn(QEMU_BINARY, [...p.qemuArgs!.map((a) => a.replaceAll(QEMU_TTYS1_PLACEHOLDER, join(dir, 'ttyS1')))], { stdio: ['ignore', 'pipe', 'pipe'] });
  let stderr = '';
  child.stderr!.setEncoding('utf8').on('data', (d: string) => { stderr = (stderr + d).slice(-4000); });
  const exited = new Promise<string>((resolve) => {
    child.on('error', (e) => resolve(`QEMU could not run: ${e.message} (install qemu-system-x86)`));
    child.on('close', (code, sig) => resolve(`QEMU exited (${sig ?? `status ${code}`})${stderr.trim() ? `: ${stderr.trim().split('\n')[0]}` : ''}`));
  });
  let cmd: ReturnType<typeof spawn> | undefined;
  const unlisten = onAbort(signal, () => { cmd?.kill('SIGKILL'); child.kill('SIGKILL'); });
  const stop = async () => {
    child.kill('SIGTERM');
    const t = setTimeout(() => child.kill('SIGKILL'), 5000);
    await exited;
    clearTimeout(t);
    unlisten();
    rmSync(dir, { recursive: true, force: true });
  };
  const fail = async (error: string): Promise<RunOutcome> => {
    cmd?.kill('SIGKILL');
    await stop();
    return { value: null, fields: {}, wallMs: performance.now() - t0, error };
  };
  const source: ConsoleSource = {
    listen: (f) => { const on = (b: Buffer) => f(b); child.stdout!.on('data', on); return () => child.stdout!.off('data', on); },
    ended: exited,
  };
  // QEMU's console must be drained even when nobody waits for a line.
  child.stdout!.resume();
  try {
    const ready = await waitReady(source, bench.ready, deadlines.ready);
    if (ready.error) return await fail(ready.error);
    const readyT = performance.now() - t0;
    const ran = await runCommand(benchCommandOf(bench).argv, deadlines.command, (c) => { cmd = c; });
    if (ran.error) return await fail(ran.error);
    const metric = readMetric(ran.stdout, bench.metric, 'host');
    if ('error' in metric) return await fail(metric.error);
    await stop();
    return { value: metric.value, fields: { ready_ms: readyT, command_ms: ran.ms }, wallMs: performance.now() - t0 };
  } catch (e) {
    return fail(`the run failed: ${(e as Error)?.message ?? String(e)}`);
  }
}

/** Where the export's ttyS1 file goes in a QEMU run of the user's VM (a folder of the run's own). */
export const QEMU_TTYS1_PLACEHOLDER = '@UNHALT_RUN_DIR@/ttyS1';

/** The QEMU command line of a library VM's config, as `unhalt export --format qemu` writes it, and what it cannot do as labelled. */
export function qemuExportCommand(c: VmConfig, host: HostCapabilities): { qemuArgs: string[]; qemuCaveat?: string } {
  const plan = exportPlan({ config: c, boot: resolveBoot(c, host.kind), hostKind: host.kind, agentLog: QEMU_TTYS1_PLACEHOLDER });
  const missing = qemuGaps(c, host);
  const qemuArgs = qemuArgsOf(plan);
  return missing.length ? { qemuArgs, qemuCaveat: missing.join('; ') } : { qemuArgs };
}

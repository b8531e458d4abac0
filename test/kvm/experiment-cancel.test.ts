// Cancelling an experiment ends it promptly, whatever is running: the Unhalt VM is stopped and
// the QEMU child is killed (no process of ours is left), and the runner rejects with
// ExperimentCancelled instead of a result. And the pair comparison a search loop calls. Real
// VMs, real QEMU.
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ExperimentCancelled, runExperiment } from '../../electron/experiments/runner.ts';
import type { ExperimentProgress, ExperimentSpec } from '../../electron/experiments/types.ts';
import { kvmAvailable } from '../support/probe.ts';
import { qemuSkipReason } from '../support/qemu-probe.ts';
import { scaled } from '../support/time-scale.ts';
import { UNHALT_BIN } from '../support/cli.ts';

/** QEMU processes (anyone's child) whose command line contains `marker`. */
function qemuWith(marker: string): number[] {
  return readdirSync('/proc').filter((n) => /^\d+$/.test(n)).filter((n) => {
    try {
      const cmd = readFileSync(`/proc/${n}/cmdline`, 'latin1');
      return cmd.startsWith('qemu-system') && cmd.includes(marker);
    } catch {
      return false;
    }
  }).map(Number);
}

/** Our child processes named qemu-system-*, from /proc. */
function qemuChildren(): number[] {
  const out: number[] = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8');
      const comm = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'));
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      if (ppid === process.pid && comm.startsWith('qemu-system')) out.push(Number(name));
    } catch { /* gone */ }
  }
  return out;
}

// An 8 s idle run (on this host's clock): longer than the 2 s the test waits before cancelling,
// short enough that the QEMU case gets past the first Unhalt run.
const spec = (vsQemu: boolean): ExperimentSpec => ({
  guest: 'probe', workload: 'idle', workloadArgs: `ms=${scaled(8000)}`, runs: 3, ...(vsQemu ? { vsQemu } : {}),
  configs: [{ name: 'a', config: 'cpus=1' }, { name: 'b', config: 'cpus=1,halt-poll-ns=0' }],
});

async function cancelDuring(vsQemu: boolean, runner: 'unhalt' | 'qemu'): Promise<{ error: unknown; ms: number; progress: ExperimentProgress[] }> {
  const abort = new AbortController();
  const progress: ExperimentProgress[] = [];
  let cancelledAt = 0;
  const run = runExperiment(spec(vsQemu), (p) => {
    progress.push(p);
    if (!cancelledAt && p.current?.includes(`(${runner})`)) {
      // Give the VM or QEMU time to be up and running the workload.
      setTimeout(() => { cancelledAt = performance.now(); abort.abort(); }, scaled(2000));
    }
  }, abort.signal);
  const error = await run.then(() => undefined, (e: unknown) => e);
  return { error, ms: performance.now() - cancelledAt, progress };
}

describe.skipIf(!kvmAvailable)('cancelling an experiment', () => {
  it('stops the running Unhalt VM at once and rejects with ExperimentCancelled', async () => {
    const { error, ms, progress } = await cancelDuring(false, 'unhalt');
    expect(error).toBeInstanceOf(ExperimentCancelled);
    expect(ms).toBeLessThan(scaled(5000));
    // The progress total counts every run (2 configs x 3 runs).
    expect(progress[0]).toMatchObject({ done: 0, total: 6 });
  }, scaled(60_000));

  it.skipIf(qemuSkipReason() !== undefined)('kills the running QEMU child', async () => {
    const { error, ms, progress } = await cancelDuring(true, 'qemu');
    expect(error).toBeInstanceOf(ExperimentCancelled);
    expect(ms).toBeLessThan(scaled(5000));
    expect(progress[0]).toMatchObject({ total: 12 });
    expect(qemuChildren()).toEqual([]);
  }, scaled(90_000));
});

describe.skipIf(!kvmAvailable)('comparing two configs (the call a search loop makes)', () => {
  it('runs them alternately and gives the verdict with each side\'s runs', async () => {
    const { compareConfigs } = await import('../../electron/experiments/compare.ts');
    const r = await compareConfigs({
      guest: 'probe', workload: 'pio', workloadArgs: 'count=2000', runs: 3,
      baseline: { name: 'base', config: 'cpus=1' }, candidate: { name: 'nopoll', config: 'cpus=1,halt-poll-ns=0' },
    });
    expect(r.baselineRuns).toHaveLength(3);
    expect(r.candidateRuns).toHaveLength(3);
    expect(r.result.raw.map((x) => x.config)).toEqual(['base', 'nopoll', 'base', 'nopoll', 'base', 'nopoll']);
    // Three runs each can never reach p < 0.05 (the smallest two-sided p of 3 vs 3 is 0.1, or
    // 0.08 by the normal approximation should two values tie).
    expect(r.verdict).toMatchObject({ baseline: 'base', candidate: 'nopoll', n: [3, 3], significant: false, verdict: 'no significant difference' });
    expect(r.verdict!.p).toBeGreaterThan(0.05);
    expect(r.result.notes[0]).toMatch(/fewer than 5 runs/);
  }, scaled(120_000));
});

describe.skipIf(!kvmAvailable || qemuSkipReason() !== undefined)('unhalt bench and SIGINT', () => {
  it('cancels the experiment: QEMU ends with it, nothing is saved, exit 130', async () => {
    const home = mkdtempSync(join(tmpdir(), 'unhalt-bench-int-'));
    // A workload argument no other process uses: it finds this run's QEMU on the host.
    const ms = scaled(8000) + 17;
    const child = spawn(process.execPath, [UNHALT_BIN, 'bench', '--workload', 'idle', '--workload-args', `ms=${ms}`, '--runs', '2', '--vs-qemu',
      '--config', 'a=cpus=1', '--config', 'b=cpus=1,halt-poll-ns=0'], { env: { ...process.env, UNHALT_HOME: home }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (d) => { stderr += d; });
    const exited = new Promise<number | null>((r) => child.on('close', (code) => r(code)));
    const killer = setTimeout(() => child.kill('SIGKILL'), scaled(90_000));
    const end = Date.now() + scaled(60_000);
    while (!stderr.includes('a (qemu) run 1/2') && Date.now() < end) await new Promise((r) => setTimeout(r, 100));
    // The progress line comes before QEMU is spawned: wait for its process, not a fixed time.
    while (qemuWith(`ms=${ms}`).length === 0 && Date.now() < end) await new Promise((r) => setTimeout(r, 100));
    expect(qemuWith(`ms=${ms}`)).toHaveLength(1);
    const t0 = performance.now();
    child.kill('SIGINT');
    const code = await exited;
    clearTimeout(killer);
    expect(performance.now() - t0).toBeLessThan(scaled(5000));
    expect(code, stderr).toBe(130);
    expect(stderr).toMatch(/unhalt: SIGINT: the experiment was cancelled; nothing was saved\n/);
    expect(qemuWith(`ms=${ms}`)).toEqual([]);
    expect(existsSync(join(home, 'experiments')) ? readdirSync(join(home, 'experiments')) : []).toEqual([]);
  }, scaled(120_000));
});

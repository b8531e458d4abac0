// Cancelling an experiment ends it promptly, whatever is running: the Unhalt VM is stopped and
// the QEMU child is killed (no process of ours is left), and the runner rejects with
// ExperimentCancelled instead of a result. And the pair comparison a search loop calls. Real
// VMs, real QEMU.
import { readdirSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { ExperimentCancelled, runExperiment } from '../../electron/experiments/runner.ts';
import type { ExperimentProgress, ExperimentSpec } from '../../electron/experiments/types.ts';
import { kvmAvailable } from '../support/probe.ts';
import { qemuSkipReason } from '../support/qemu-probe.ts';
import { scaled } from '../support/time-scale.ts';

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

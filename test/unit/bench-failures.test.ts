// A failed experiment says so plainly: the markdown, CSV and JSON name every failed run and its
// reason in one line, a config without any value gets a row marked "failed", and an experiment
// where nothing gave a value prints no empty table (and no unit of "()").
import { describe, expect, it } from 'vitest';
import { failureLines, formatCsv, formatMarkdown, sizingLine, statusLine } from '../../electron/experiments/format.ts';
import { failuresOf, summarize } from '../../electron/experiments/summary.ts';
import type { ExperimentResult, ExperimentSpec, RunRecord } from '../../electron/experiments/types.ts';
import { workload } from '../../electron/experiments/workloads.ts';

const pipe = workload('linux', 'pipe');
const spec: ExperimentSpec = {
  guest: 'linux', workload: 'pipe', runs: 2,
  configs: [{ name: 'pv-off', config: 'cpus=2,kvm-pv-unhalt=off' }, { name: 'pv-on', config: 'cpus=2,kvm-pv-unhalt=on' }],
};
const NOT_READY = 'the Linux agent never reported ready on ttyS1: stopped at its 300 s deadline (5x the 60 s boot to agent ready predicted)';
const NO_RESULT = 'no pipe result after "run pipe loops=20000": stopped at its 30 s deadline (the 30 s floor (5x the 5.0 s expected for loops=20000 from calibration is less))';

const ok = (config: string, run: number, ms: number, hypercalls: number): RunRecord => ({
  config, runner: 'unhalt', run, value: ms, fields: { loops: 20000, total_ns: ms * 1e6, per_op_ns: Math.round(ms * 1e6 / 20000) },
  wallMs: ms + 15_000, haltExits: 1200, haltExitsPerS: 240, hypercalls, pollHitRate: 0.5, hostCpuNs: 1e9,
});
const failed = (config: string, run: number, error: string): RunRecord => ({ config, runner: 'unhalt', run, value: null, fields: {}, wallMs: 300_000, error });

function result(raw: RunRecord[]): ExperimentResult {
  const rows = summarize(['pv-off', 'pv-on'], ['unhalt'], raw, pipe);
  const failures = failuresOf(raw);
  return {
    spec, status: failures.length === 0 ? 'ok' : rows.length ? 'partial' : 'failed', unit: pipe.unit, rows, raw, failures,
    environment: { hostKind: 'hardware' }, notes: [],
  };
}

describe('an experiment where every run failed', () => {
  const r = result([failed('pv-off', 1, NOT_READY), failed('pv-on', 1, NO_RESULT), failed('pv-off', 2, NOT_READY), failed('pv-on', 2, NOT_READY)]);

  it('has status failed, no rows, and one failure per run', () => {
    expect(r.status).toBe('failed');
    expect(r.rows).toEqual([]);
    expect(r.failures).toEqual([
      { config: 'pv-off', runner: 'unhalt', run: 1, error: NOT_READY },
      { config: 'pv-on', runner: 'unhalt', run: 1, error: NO_RESULT },
      { config: 'pv-off', runner: 'unhalt', run: 2, error: NOT_READY },
      { config: 'pv-on', runner: 'unhalt', run: 2, error: NOT_READY },
    ]);
  });

  it('markdown: says it failed and why, with no empty table and no "()" unit', () => {
    const md = formatMarkdown(r);
    expect(md).toMatch(/^\*\*the experiment failed: none of its 4 runs gave a result\.\*\*$/m);
    expect(md).not.toMatch(/\| config \|/);
    expect(md).not.toMatch(/\(\)/);
    expect(md).toContain(`failed: pv-off (unhalt) run 1: ${NOT_READY}`);
    expect(md).toContain(`failed: pv-on (unhalt) run 1: ${NO_RESULT}`);
    expect(md.split('\n').filter((l) => l.startsWith('failed: '))).toHaveLength(4);
  });

  it('CSV: every run a line with its reason and the unit', () => {
    const lines = formatCsv(r).trim().split('\n');
    expect(lines).toHaveLength(5);
    expect(lines[1]).toMatch(/^pv-off,unhalt,1,,ms,/);
    expect(lines[1]).toContain(NOT_READY);
  });

  it('the CLI\'s stderr lines: one per failed run, then the verdict', () => {
    expect(failureLines(r.failures)[1]).toBe(`failed: pv-on (unhalt) run 1: ${NO_RESULT}`);
    expect(statusLine(r)).toBe('the experiment failed: none of its 4 runs gave a result');
  });
});

describe('an experiment where some runs failed', () => {
  const r = result([ok('pv-off', 1, 900, 0), failed('pv-on', 1, NOT_READY), ok('pv-off', 2, 1100, 2), failed('pv-on', 2, NO_RESULT)]);

  it('shows the rows it has and marks the config that gave nothing', () => {
    expect(r.status).toBe('partial');
    const md = formatMarkdown(r);
    expect(md).toMatch(/^\*\*partial result: 2 of 4 runs failed; medians are over the runs that gave a value\.\*\*$/m);
    expect(md).toMatch(/\| config \| VMM \| median \(ms\) \| min–max \| ratio to first \| ratio to bare \| halt exits\/s \| poll hit rate \| halt exits \| hypercalls \| runs ok \|/);
    expect(md).toMatch(/^\| pv-off \| unhalt \| 1000 \| 900–1100 \| 1\.00 \| — \| 240 \| 50% \| 1200 \| 1 \| 2\/2 \|$/m);
    expect(md).toMatch(/^\| pv-on \| unhalt \| failed \| — \| — \| — \| — \| — \| — \| — \| 0\/2 \|$/m);
    expect(md.split('\n').filter((l) => l.startsWith('failed: pv-on (unhalt) run '))).toHaveLength(2);
    expect(statusLine(r)).toMatch(/^partial result: 2 of 4 runs failed/);
  });

  it('marks a config with a failed run among good ones', () => {
    const mixed = result([ok('pv-off', 1, 900, 0), ok('pv-on', 1, 800, 40), ok('pv-off', 2, 1100, 0), failed('pv-on', 2, NO_RESULT)]);
    expect(mixed.rows[1]).toMatchObject({ config: 'pv-on', failedRuns: 1, runs: [800], hypercalls: 40 });
    expect(formatMarkdown(mixed)).toMatch(/^\| pv-on \| unhalt \| 800 \| 800–800 \| 0\.80 \| — \| 240 \| 50% \| 1200 \| 40 \| 1\/2 \(1 failed\) \|$/m);
  });

  it('counters come from the runs that gave a value only', () => {
    const hung = { ...failed('pv-on', 2, NOT_READY), haltExits: 99_999, haltExitsPerS: 5000, hypercalls: 7 };
    const rows = summarize(['pv-off', 'pv-on'], ['unhalt'], [ok('pv-on', 1, 800, 40), hung], pipe);
    expect(rows[0]).toMatchObject({ haltExits: 1200, haltExitsPerS: 240, hypercalls: 40, failedRuns: 1 });
  });
});

describe('the size a Linux experiment used', () => {
  it('is in the header, the sizing line and the CSV', () => {
    const r: ExperimentResult = {
      ...result([ok('pv-off', 1, 5000, 0), ok('pv-on', 1, 4000, 30)]),
      workloadArgsUsed: 'loops=20000',
      sizing: { param: 'loops', size: 20_000, source: 'calibrated', targetRunMs: 5000, steps: [{ size: 1000, wallMs: 250 }], perUnitMs: 0.25 },
    };
    const md = formatMarkdown(r);
    expect(md).toMatch(/^workload: pipe \(loops=20000\), guest: linux/);
    expect(md).toContain('size: loops=20000, calibrated so a run takes about 5.0 s (calibration: 1000 loops took 250 ms; 250.0 µs per loop)');
    expect(sizingLine({ ...r.sizing!, source: 'given' }, 'loops=3000')).toMatch(/^size: loops=3000, as given \(/);
    expect(formatCsv(r).split('\n')[1]).toMatch(/,loops=20000$/);
  });
});

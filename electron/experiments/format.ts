// Experiment results as a table shaped like docs/experiments.md's, or CSV. A failed run is
// never left out silently: a config with no value gets a row marked "failed", every failed run a
// line with its reason, and an experiment where nothing gave a value says so instead of a table.
import type { Sizing } from './pacing.ts';
import { describeBench } from './user-bench.ts';
import { conditionsLines } from './conditions-format.ts';
import type { Comparison, ExperimentResult, ExperimentResultRow, RunFailure } from './types.ts';

const num = (v: number | null | undefined, digits = 0): string => (v === null || v === undefined || !Number.isFinite(v) ? '—' : v.toFixed(digits));
const fmt = (v: number): string => (Math.abs(v) >= 100 ? v.toFixed(0) : Math.abs(v) >= 10 ? v.toFixed(1) : v.toFixed(2));
const ms = (v: number): string => (v >= 1000 ? `${(v / 1000).toFixed(v >= 10_000 ? 0 : 1)} s` : `${v.toFixed(0)} ms`);

/** The unit, also from results saved before the result had one of its own. */
const unitOf = (r: ExperimentResult): string => r.unit || r.rows[0]?.unit || '';

/** One line per failed run. */
export function failureLines(failures: readonly RunFailure[]): string[] {
  return failures.map((f) => `failed: ${f.config} (${f.runner}) run ${f.run}: ${f.error}`);
}

/** One line: how the experiment went as a whole (undefined when every run gave a value). */
export function statusLine(r: ExperimentResult): string | undefined {
  const total = r.raw.length;
  if (r.status === 'failed') return `the experiment failed: none of its ${total} run${total === 1 ? '' : 's'} gave a result`;
  if (r.status === 'partial') return `partial result: ${r.failures.length} of ${total} runs failed; medians are over the runs that gave a value`;
  return undefined;
}

export function sizingLine(s: Sizing, argsUsed: string): string {
  const steps = s.steps.map((x, i) => `${x.size}${i === 0 ? ` ${s.param}` : ''} took ${ms(x.wallMs)}`).join(', ');
  const how = s.source === 'given' ? 'as given' : `calibrated so a run takes about ${ms(s.targetRunMs)}`;
  return `size: ${argsUsed}, ${how} (calibration: ${steps}; ${(s.perUnitMs * 1000).toFixed(1)} µs per ${s.param.replace(/s$/, '')})`;
}

export function formatMarkdown(r: ExperimentResult): string {
  const refName = r.rows.some((x) => x.runner === 'qemu') ? 'QEMU' : 'bare';
  const unit = unitOf(r);
  const args = r.workloadArgsUsed ?? r.spec.workloadArgs;
  const lines = [
    `workload: ${r.spec.workload}${args ? ` (${args})` : ''}, guest: ${r.spec.guest}, runs: ${r.spec.runs}, host: ${String(r.environment.hostKind)}`,
    ...headerLines(r),
  ];
  const status = statusLine(r);
  if (status) lines.push('', `**${status}.**`);
  if (r.status !== 'failed') {
    lines.push(
      '',
      `| config | VMM | median${unit ? ` (${unit})` : ''} | min–max | ratio to first | ratio to ${refName} | halt exits/s | poll hit rate | halt exits | hypercalls | runs ok |`,
      '| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |',
      ...tableRows(r),
    );
  }
  if (r.rows.some((x) => x.caveat)) lines.push('', '† ran differently from its label (QEMU lacks the knob): see the notes below');
  if (r.comparisons?.length) lines.push('', 'verdicts (each against the first configuration of its VMM; significant when the 95 % CI excludes 1 and p < 0.05):', ...verdictLines(r.comparisons));
  const sec = r.rows.filter((x) => x.secondary);
  if (sec.length) {
    lines.push('', `also, median ${sec[0]!.secondary!.unit}: ${sec.map((x) => `${x.config}${x.runner === 'unhalt' || x.runner === 'bare' ? '' : ` (${x.runner})`} ${fmt(x.secondary!.median)}`).join(', ')}`);
  }
  if (r.sizing && r.workloadArgsUsed) lines.push('', sizingLine(r.sizing, r.workloadArgsUsed));
  if (r.failures.length) lines.push('', ...failureLines(r.failures));
  if (r.notes.length) lines.push('', ...r.notes.map((n) => `note: ${n}`));
  return `${lines.join('\n')}\n`;
}

/** The library VM an experiment or a tune ran on, in one line. */
export function vmLine(vm: { name: string; image?: string }): string {
  return `vm: ${vm.name}${vm.image ? `, image ${vm.image}` : ''}; every writable disk attached snapshot=on (the runs leave the images unchanged)`;
}

/** What the experiment ran on and under which conditions: the VM, the benchmark, how knobs were applied, the host. */
export function headerLines(r: ExperimentResult): string[] {
  const out: string[] = [];
  const { vm, bench } = r.spec;
  if (vm) out.push(vmLine(vm));
  if (bench) out.push(`benchmark: ${describeBench(bench)}`);
  if (r.knobsApplied === 'boot') out.push('knobs: every run booted its configuration (none was changed in a running guest)');
  if (r.conditions) out.push(...conditionsLines(r.conditions));
  return out;
}

/** The rows with values, and a "failed" row where a config and runner gave none, in run order. */
function tableRows(r: ExperimentResult): string[] {
  const out: string[] = [];
  const seen = new Set<string>();
  const total = (config: string, runner: string) => r.raw.filter((x) => x.config === config && x.runner === runner).length;
  // The rows in their own order (ratios refer to the first of each runner), then configs without one.
  for (const x of r.rows) {
    seen.add(`${x.config}\0${x.runner}`);
    out.push(valueRow(x, total(x.config, x.runner)));
  }
  for (const x of r.raw) {
    const key = `${x.config}\0${x.runner}`;
    if (seen.has(key)) continue;
    seen.add(key);
    out.push(`| ${x.config} | ${x.runner} | failed | — | — | — | — | — | — | — | 0/${total(x.config, x.runner)} |`);
  }
  return out;
}

/** One line per compared pair, e.g. "- poll-1ms vs poll-0 (unhalt): 0.56× (95 % CI 0.48–0.63, p = 0.002): better". */
export function verdictLines(comparisons: readonly Comparison[]): string[] {
  return comparisons.map((c) => `- ${c.candidate} vs ${c.baseline} (${c.runner}, ${c.n[1]} vs ${c.n[0]} runs): ${c.text}`);
}

function valueRow(x: ExperimentResultRow, runs: number): string {
  const ok = x.runs.length;
  const marked = (x.failedRuns ?? 0) > 0 ? ` (${x.failedRuns} failed)` : '';
  return `| ${x.config}${x.caveat ? ' †' : ''} | ${x.runner} | ${fmt(x.median)} | ${fmt(x.min)}–${fmt(x.max)} | ${num(x.ratioToFirst, 2)} | ${num(x.ratioToReference, 2)} `
    + `| ${num(x.haltExitsPerS)} | ${x.pollHitRate === null ? '—' : `${(x.pollHitRate * 100).toFixed(0)}%`} | ${num(x.haltExits)} | ${num(x.hypercalls)} `
    + `| ${ok}/${Math.max(runs, ok)}${marked} |`;
}

export function formatCsv(r: ExperimentResult): string {
  const header = 'config,runner,run,value,unit,halt_exits_per_s,poll_hit_rate,host_cpu_ns,wall_ms,error,halt_exits,hypercalls,workload_args';
  const unit = unitOf(r);
  const q = (s: string) => (/[",\n]/.test(s) ? `"${s.replace(/"/g, '""')}"` : s);
  // The arguments the guests actually used: the calibrated size for Linux workloads.
  const args = q(r.workloadArgsUsed ?? r.spec.workloadArgs ?? '');
  const rows = r.raw.map((x) => [
    q(x.config), x.runner, x.run, x.value ?? '', q(unit), x.haltExitsPerS ?? '', x.pollHitRate ?? '', x.hostCpuNs ?? '', x.wallMs.toFixed(1),
    q(x.error ?? (x.value === null ? 'no value' : '')), x.haltExits ?? '', x.hypercalls ?? '', args,
  ].join(','));
  return `${[header, ...rows].join('\n')}\n`;
}

// A tune's result as markdown (`unhalt tune`, the docs): the recommendation, why, the confidence,
// the price, the curve of the goal against halt-poll-ns, every candidate, what was skipped.
import { fmt, ns, seconds, type Advice, type PointReport } from './advisor.ts';
import { formatP } from './stats.ts';
import type { TuneResult } from './tune.ts';
import { describeBench } from './user-bench.ts';
import { vmLine } from './format.ts';
import { conditionsLines } from './conditions-format.ts';

const pct = (v: number | undefined) => (v === undefined ? '—' : `${Math.round(v * 100)} %`);
const msOf = (v: number | undefined) => (v === undefined ? '—' : `${+(v / 1e6).toPrecision(3)} ms`);
const perS = (v: number | undefined) => (v === undefined ? '—' : String(Math.round(v)));

export function formatTuneMarkdown(t: TuneResult): string {
  const a = t.advice;
  const unitHead = a.metricUnit === 'ns host CPU' ? 'host CPU per run' : a.metricUnit;
  const s = t.tune;
  const lines: string[] = [
    `# Tuning advisor: ${s.workload}${s.workloadArgs ? ` (${s.workloadArgs})` : ''}${s.vmName ? ` for VM "${s.vmName}"` : ''}`,
    '',
    `goal: ${a.goalText}; current configuration: ${s.vm ? `VM "${s.vm.name}" as saved${s.config ? `, with \`${s.config}\`` : ''}` : `\`${s.config}\``}; budget ${seconds(a.budget.budgetMs)}, used ${seconds(a.budget.usedMs)} (${a.budget.rounds} rounds, ${a.budget.runs} runs${a.budget.stoppedBy === 'budget' ? ', stopped by the budget' : ''})`,
    '',
    `**Recommendation: ${a.recommendation.kind === 'change' ? `${a.recommendation.label}` : 'keep the current configuration'}** — ${a.headline}`,
  ];
  // On a library VM with the user's benchmark: what ran, and on which host (as bench's header says it).
  const header = [
    ...(s.vm ? [vmLine(s.vm)] : []),
    ...(s.bench ? [`benchmark: ${describeBench(s.bench)}`] : []),
    ...(t.conditions ? conditionsLines(t.conditions) : []),
  ];
  if (header.length) lines.push('', ...header);
  if (t.recommendedConfig) lines.push('', `recommended configuration: \`${t.recommendedConfig}\``);
  lines.push('', `confidence: ${a.confidence.text}`, '', '## Why', '', ...a.why.map((w) => `- ${w}`));
  if (a.prediction) lines.push(`- ${a.prediction.text}`);
  if (a.price) {
    lines.push('', '## Price in host CPU (medians per run)', '', '| | current | recommended |', '| --- | ---: | ---: |',
      `| host CPU | ${msOf(a.price.hostCpuNs[0] ?? undefined)} | ${msOf(a.price.hostCpuNs[1] ?? undefined)} |`,
      `| polling | ${msOf(a.price.pollNs[0] ?? undefined)} | ${msOf(a.price.pollNs[1] ?? undefined)} |`,
      `| halted, waiting | ${msOf(a.price.haltWaitNs[0] ?? undefined)} | ${msOf(a.price.haltWaitNs[1] ?? undefined)} |`);
  }
  if (a.curve.length) {
    lines.push('', `## ${a.goalText} against halt-poll-ns`, '', `| halt-poll-ns | median (${unitHead}) | 95 % CI | poll hit rate | |`, '| ---: | ---: | ---: | ---: | --- |');
    for (const p of a.curve) {
      lines.push(`| ${ns(p.haltPollNs)} | ${fmt(p.median, a.metricUnit)} | ${p.ci ? `${fmt(p.ci[0], a.metricUnit)}–${fmt(p.ci[1], a.metricUnit)}` : '—'} | ${pct(p.pollHitRate)} | ${p.label === 'current' ? 'current' : p.stopped ? 'stopped early' : ''} |`);
    }
  }
  lines.push('', '## Every configuration measured', '',
    `| configuration | runs | median (${unitHead}) | ratio | 95 % CI | p | poll hit rate | halt exits/s | host CPU/run | poll CPU/run | |`,
    '| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |',
    row(a, a.current), ...a.points.map((p) => row(a, p)));
  if (a.skipped.length) lines.push('', '## Not run', '', ...a.skipped.map((x) => `- ${x.label}: ${x.reason}`));
  if (t.failures.length) lines.push('', '## Failed runs', '', ...t.failures.map((f) => `- ${f.config} run ${f.run}: ${f.error}`));
  return `${lines.join('\n')}\n`;
}

function row(a: Advice, p: PointReport): string {
  const c = p.comparison;
  const note = p.label === 'current' ? 'current' : p.stopped ? `stopped early: ${p.stopped}` : p.meetsBound === false ? 'misses the latency bound' : c?.verdict ?? '';
  return `| ${p.label} | ${p.runs} | ${fmt(p.median, a.metricUnit)} | ${c?.ratio != null ? `${c.ratio.toFixed(2)}×` : '1.00×'} | ${c?.ci95 ? `${c.ci95[0].toFixed(2)}–${c.ci95[1].toFixed(2)}` : '—'} | ${c?.p != null ? formatP(c.p) : '—'} | ${pct(p.pollHitRate)} | ${perS(p.haltExitsPerS)} | ${msOf(p.hostCpuNs)} | ${msOf(p.pollNs)} | ${note} |`;
}

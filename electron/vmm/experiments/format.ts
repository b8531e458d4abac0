// Experiment results as a table shaped like DESIGN.md's reference ones, or CSV.
import type { ExperimentResult, ExperimentResultRow } from './types.ts';

const num = (v: number | null, digits = 0): string => (v === null || !Number.isFinite(v) ? '—' : v.toFixed(digits));
const fmt = (v: number): string => (Math.abs(v) >= 100 ? v.toFixed(0) : Math.abs(v) >= 10 ? v.toFixed(1) : v.toFixed(2));

export function formatMarkdown(r: ExperimentResult): string {
  const refName = r.rows.some((x) => x.runner === 'qemu') ? 'QEMU' : 'bare';
  const lines = [
    `workload: ${r.spec.workload}${r.spec.workloadArgs ? ` (${r.spec.workloadArgs})` : ''}, guest: ${r.spec.guest}, runs: ${r.spec.runs}, host: ${String(r.environment.hostKind)}`,
    '',
    `| config | VMM | median (${r.rows[0]?.unit ?? ''}) | min–max | ratio to first | ratio to ${refName} | halt exits/s | poll hit rate |`,
    '| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |',
    ...r.rows.map((x: ExperimentResultRow) => `| ${x.config} | ${x.runner} | ${fmt(x.median)} | ${fmt(x.min)}–${fmt(x.max)} | ${num(x.ratioToFirst, 2)} | ${num(x.ratioToReference, 2)} | ${num(x.haltExitsPerS)} | ${x.pollHitRate === null ? '—' : `${(x.pollHitRate * 100).toFixed(0)}%`} |`),
  ];
  const sec = r.rows.filter((x) => x.secondary);
  if (sec.length) {
    lines.push('', `also, median ${sec[0]!.secondary!.unit}: ${sec.map((x) => `${x.config}${x.runner === 'unhalt' || x.runner === 'bare' ? '' : ` (${x.runner})`} ${fmt(x.secondary!.median)}`).join(', ')}`);
  }
  const failed = r.raw.filter((x) => x.error);
  if (failed.length) lines.push('', ...failed.map((x) => `failed: ${x.config} (${x.runner}) run ${x.run}: ${x.error}`));
  if (r.notes.length) lines.push('', ...r.notes.map((n) => `note: ${n}`));
  return `${lines.join('\n')}\n`;
}

export function formatCsv(r: ExperimentResult): string {
  const header = 'config,runner,run,value,unit,halt_exits_per_s,poll_hit_rate,host_cpu_ns,wall_ms,error';
  const unit = r.rows[0]?.unit ?? '';
  const q = (s: string) => (/[",\n]/.test(s) ? `"${s.replace(/"/g, '""')}"` : s);
  const rows = r.raw.map((x) => [q(x.config), x.runner, x.run, x.value ?? '', q(unit), x.haltExitsPerS ?? '', x.pollHitRate ?? '', x.hostCpuNs ?? '', x.wallMs.toFixed(1), q(x.error ?? '')].join(','));
  return `${[header, ...rows].join('\n')}\n`;
}

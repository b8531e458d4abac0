// Truth check (issue 5): our `pipe` workload, built for the host (assets/guests/linux/host/
// unhalt-workload, the same C the guest agent runs), against Debian's `perf bench sched pipe`
// (package linux-perf) on the bare host at the same loop count. Runs alternate (perf, ours,
// ours, perf, ...) so drift hits both alike; medians are compared, and the target is agreement
// within 20%. Measured, not asserted: the exit status is 0 either way unless a tool fails.
//
//   node bench/pipe-truth.ts [--runs 5] [--loops 1000000] [--json FILE]
//
// Needs `perf` (apt-get install -y linux-perf) and gcc (the host build is made if missing).
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { LINUX_HOST_WORKLOAD } from '../electron/vmm/guests-linux.ts';
import {
  ROOT, agentEvents, describeHost, fail, finishReport, findEvent, fmt, hostInfo, markdownTable, pairedRatio, parseBenchArgs,
  summarize,
} from './lib.ts';

const USAGE = `usage: node bench/pipe-truth.ts [--runs 5] [--loops 1000000] [--json FILE]
Compares unhalt-workload pipe with perf bench sched pipe on this host (alternating runs, medians).
`;
const opts = parseBenchArgs(USAGE, 5, { loops: '1000000', perf: process.env.PERF ?? 'perf' });
const loops = Number(opts.loops);
if (!Number.isSafeInteger(loops) || loops < 1000) fail(`--loops must be a whole number >= 1000, got "${opts.loops}"`);

// --- prerequisites ---------------------------------------------------------------------------

const perfVersion = spawnSync(opts.perf, ['version'], { encoding: 'utf8' });
if (perfVersion.error) fail(`cannot run "${opts.perf}": ${perfVersion.error.message}; install it with: apt-get install -y linux-perf`);
if (perfVersion.status !== 0) {
  // Debian's /usr/bin/perf is a wrapper that wants perf_<kernel version>; say what it said.
  fail(`"${opts.perf} version" failed (status ${perfVersion.status}): ${(perfVersion.stderr || perfVersion.stdout).trim().split('\n')[0]}`);
}
{
  const r = spawnSync(process.execPath, [join(ROOT, 'native/guest/linux/build-workloads.mjs'), '--quiet'], { encoding: 'utf8' });
  if (r.status !== 0 || !existsSync(LINUX_HOST_WORKLOAD)) fail(`building the host workloads failed: ${r.stderr.trim()}`);
}

// --- one run of each -------------------------------------------------------------------------

interface Sample {
  totalS: number;
  usPerOp: number;
}

function runPerf(): Sample {
  const r = spawnSync(opts.perf, ['bench', 'sched', 'pipe', '-l', String(loops)], { encoding: 'utf8', timeout: 600_000 });
  if (r.status !== 0) fail(`perf bench sched pipe failed (status ${r.status}): ${(r.stderr || r.stdout).trim().split('\n').slice(-2).join(' ')}`);
  // "Total time: 0.124 [sec]" has ms resolution; "12.434300 usecs/op" x loops is the finer total.
  const us = /([\d.]+)\s+usecs\/op/.exec(r.stdout);
  const loopsRan = /Executed (\d+) pipe operations/.exec(r.stdout);
  if (!us) fail(`cannot read perf's output:\n${r.stdout}`);
  if (loopsRan && Number(loopsRan[1]) !== loops) fail(`perf ran ${loopsRan[1]} loops, not ${loops}`);
  const usPerOp = Number(us[1]);
  return { usPerOp, totalS: (usPerOp * loops) / 1e6 };
}

function runOurs(): Sample {
  const r = spawnSync(LINUX_HOST_WORKLOAD, ['pipe', `loops=${loops}`], { encoding: 'utf8', timeout: 600_000 });
  if (r.status !== 0) fail(`unhalt-workload pipe failed (status ${r.status}): ${r.stderr.trim()}`);
  const e = findEvent(agentEvents(r.stdout), 'pipe', 'unhalt-workload');
  return { totalS: e.fields.total_ns! / 1e9, usPerOp: e.fields.total_ns! / loops / 1e3 };
}

// --- alternate -------------------------------------------------------------------------------

const info = { ...hostInfo(), perf: perfVersion.stdout.trim(), loops, runs: opts.runs };
process.stdout.write(describeHost(info));
process.stdout.write(`${opts.perf}: ${info.perf}; ${loops} round trips per run, ${opts.runs} runs each, alternating\n\n`);
const perf: Sample[] = [];
const ours: Sample[] = [];
for (let i = 0; i < opts.runs; i++) {
  // ABBA: perf first on even runs, ours first on odd ones.
  const order = i % 2 === 0 ? [['perf', runPerf], ['ours', runOurs]] as const : [['ours', runOurs], ['perf', runPerf]] as const;
  for (const [name, run] of order) {
    const s = run();
    (name === 'perf' ? perf : ours).push(s);
    process.stderr.write(`run ${i + 1}/${opts.runs} ${name.padEnd(4)} ${fmt(s.totalS, 3)} s, ${fmt(s.usPerOp, 2)} µs/op\n`);
  }
}

const p = summarize(perf.map((s) => s.totalS));
const o = summarize(ours.map((s) => s.totalS));
const ratio = o.median / p.median;
const paired = pairedRatio(ours.map((s) => s.totalS), perf.map((s) => s.totalS));
process.stdout.write(markdownTable(
  ['tool', `median total (s, ${loops} loops)`, 'min–max (s)', 'median µs/op', 'runs'],
  [
    ['perf bench sched pipe', fmt(p.median, 3), `${fmt(p.min, 3)}–${fmt(p.max, 3)}`, fmt((p.median * 1e6) / loops, 2), perf.map((s) => fmt(s.totalS, 3)).join(' ')],
    ['unhalt-workload pipe', fmt(o.median, 3), `${fmt(o.min, 3)}–${fmt(o.max, 3)}`, fmt((o.median * 1e6) / loops, 2), ours.map((s) => fmt(s.totalS, 3)).join(' ')],
  ],
));
const within = Math.abs(ratio - 1) <= 0.2;
process.stdout.write(`\nratio ours/perf: ${fmt(ratio, 3)} (medians), ${fmt(paired, 3)} (median of back-to-back pairs): `
  + `${within ? 'agrees within 20%' : 'DOES NOT agree within 20%'}\n`);
finishReport(opts.json, { info, perf, ours, ratio, pairedRatio: paired, within20: within });

// The wake-up latency of a halted vCPU by someone else's measure: kvm-unit-tests'
// `tscdeadline_latency.flat` arms the TSC-deadline timer DELTA cycles ahead, halts, and records
// how many TSC cycles past the deadline its interrupt handler ran. Under Unhalt with halt polling
// off and on (per VM: --halt-poll-ns), and under QEMU at the host's default, alternately, run after
// run: the median and 90th percentile per run, then the median of those per side, and the ratio
// polling on / off. It is the guest-timed twin of the probe guest's `timer` scenario.
//
//   node bench/tscdeadline-latency.ts [--runs 5] [--poll-ns 200000] [--delta 200000] [--samples 1000] [--json F]
//
// On a PVM host polling changes nothing (PVM emulates the guest's hlt); in the nested lane's L1 it
// is hardware-semantics KVM, emulated: ratios, not sizes (bench/l1-tscdeadline.sh).
import { writeFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { buildKvmUnitTests } from '../native/guest/kvm-unit-tests/build.mjs';
import { median } from '../electron/experiments/stats.ts';
import { QEMU_CPU, runUnderQemu, runUnderUnhalt, type RunResult, type UnitTest } from '../test/support/kvm-unit-tests.ts';

const { values } = parseArgs({
  options: {
    runs: { type: 'string', default: '5' }, 'poll-ns': { type: 'string', default: '200000' },
    delta: { type: 'string', default: '200000' }, samples: { type: 'string', default: '1000' }, json: { type: 'string' },
  },
});
const whole = (name: string, text: string, min: number): number => {
  const n = Number(text);
  if (!Number.isInteger(n) || n < min) throw new Error(`--${name} must be a whole number from ${min}, got "${text}"`);
  return n;
};
const runs = whole('runs', values.runs, 1);
const pollNs = whole('poll-ns', values['poll-ns'], 1);
const delta = whole('delta', values.delta, 1000);
// The test's table holds 10,000; it keeps filling while it prints, so only the first `samples`
// were taken halted.
const samples = Math.min(whole('samples', values.samples, 10), 10_000);
const suite = buildKvmUnitTests({ log: (m) => process.stderr.write(`tscdeadline-latency: ${m}\n`) });
const test: UnitTest = { name: 'tscdeadline_latency', file: 'tscdeadline_latency.flat', smp: 1, args: `${delta} ${samples}`, qemuParams: '', timeoutS: 120, groups: [] };

type Side = 'polling off' | 'polling on' | 'QEMU';
const SIDES: Side[] = ['polling off', 'polling on', 'QEMU'];
// The run ends once the first `samples` latencies are out: the rest were taken while the guest
// printed (not halted), and printing 10,000 lines through a serial port takes minutes in L1.
const enough = (output: string): boolean => (output.match(/^latency: \d+\r?\n/gm)?.length ?? 0) >= samples;
const run = (side: Side): Promise<RunResult> => side === 'QEMU'
  ? runUnderQemu(suite, test, 300_000, undefined, enough)
  : runUnderUnhalt(suite, test, 300_000, { haltPollNs: side === 'polling on' ? pollNs : 0, enough });

/** The first `samples` `latency: N` lines of a run, sorted. */
function latencies(r: RunResult): number[] {
  const xs: number[] = [];
  for (const m of r.output.matchAll(/^latency: (\d+)\r?$/gm)) if (xs.length < samples) xs.push(Number(m[1]));
  return xs.sort((a, b) => a - b);
}
const quantile = (sorted: number[], q: number): number => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;

const per: Record<Side, { p50: number[]; p90: number[] }> = { 'polling off': { p50: [], p90: [] }, 'polling on': { p50: [], p90: [] }, QEMU: { p50: [], p90: [] } };
const errors: string[] = [];
for (let i = 0; i < runs; i++) {
  // Rotate who goes first, so none always runs on a warmer host.
  const order = SIDES.map((_, k) => SIDES[(k + i) % SIDES.length]!);
  for (const side of order) {
    const r = await run(side);
    const xs = latencies(r);
    if (xs.length < samples) errors.push(`${side}, run ${i + 1}: ${r.verdict}, ${xs.length} of ${samples} latencies`);
    else {
      per[side].p50.push(quantile(xs, 0.5));
      per[side].p90.push(quantile(xs, 0.9));
    }
  }
  process.stderr.write(`tscdeadline-latency: run ${i + 1}/${runs} done\n`);
}
const rows = SIDES.map((side) => ({
  side, runs: per[side].p50.length,
  p50: per[side].p50.length ? median(per[side].p50) : undefined,
  p90: per[side].p90.length ? median(per[side].p90) : undefined,
}));
const off = rows[0]!, on = rows[1]!;
const fmt = (n: number | undefined, d = 0) => (n === undefined ? '—' : n.toFixed(d));
console.log(`## tscdeadline_latency.flat: TSC cycles from the deadline to the handler, ${samples} halted wake-ups a run, delta ${delta}, median of ${runs} runs (QEMU -cpu ${QEMU_CPU})\n`);
console.log(`| VMM | median | p90 | runs |\n|---|---:|---:|---:|\n${rows.map((r) => `| ${r.side === 'QEMU' ? 'QEMU (host default polling)' : `Unhalt, ${r.side === 'polling on' ? `halt-poll-ns ${pollNs}` : 'halt-poll-ns 0'}`} | ${fmt(r.p50)} | ${fmt(r.p90)} | ${r.runs} |`).join('\n')}`);
if (off.p50 && on.p50 !== undefined) console.log(`\npolling on / off: median ${fmt(on.p50 / off.p50, 2)}x, p90 ${fmt(on.p90! / off.p90!, 2)}x`);
if (errors.length) console.log(`\nRuns without a figure:\n${errors.map((e) => `- ${e}`).join('\n')}`);
if (values.json) writeFileSync(values.json, `${JSON.stringify({ runs, samples, delta, pollNs, qemuCpu: QEMU_CPU, rows, errors }, null, 2)}\n`);

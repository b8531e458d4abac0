// The whole kvm-unit-tests table: every x86 test of the suite's unittests.cfg, in scope under
// Unhalt and under QEMU `-cpu host` on the same KVM (one after the other, test by test), or listed
// with the reason it is out of scope. Not a speed figure: a verdict per test per VMM.
//
//   node bench/kvm-unit-tests.ts [--only smptest,tsc] [--no-qemu] [--timeout-scale 10]
//
// Where KVM has hardware semantics it judges us; a PVM host's table says what PVM does (QEMU
// -cpu host does not start there). In the nested lane's L1 (about a minute a test under QEMU):
//
//   UNHALT_NESTED_FILES=test/kvm/boot.test.ts UNHALT_NESTED_L1S=1 \
//     UNHALT_NESTED_L1_APPEND=unhalt.script=/project/bench/l1-kvm-unit-tests.sh npm test -- nested
import { parseArgs } from 'node:util';
import { buildKvmUnitTests } from '../native/guest/kvm-unit-tests/build.mjs';
import { outOfScope, runUnderQemu, runUnderUnhalt, unitTests, type RunResult } from '../test/support/kvm-unit-tests.ts';

const { values } = parseArgs({
  options: { only: { type: 'string' }, 'no-qemu': { type: 'boolean' }, 'timeout-scale': { type: 'string', default: '1' } },
});
const scale = Number(values['timeout-scale']);
if (!(scale > 0)) throw new Error('--timeout-scale must be a positive number');
const only = values.only?.split(',').filter(Boolean);
const suite = buildKvmUnitTests({ log: (m) => process.stderr.write(`kvm-unit-tests: ${m}\n`) });
const tests = unitTests(suite).filter((t) => !only || only.includes(t.name));
if (only) for (const name of only) if (!tests.some((t) => t.name === name)) throw new Error(`no test ${name} in x86/unittests.cfg`);

const cell = (r: RunResult): string => `${r.verdict} (${r.status ?? 'killed'}; ${(r.ms / 1000).toFixed(1)} s)`;
const totals = { unhalt: new Map<string, number>(), qemu: new Map<string, number>() };
const count = (m: Map<string, number>, k: string) => m.set(k, (m.get(k) ?? 0) + 1);
const rows: string[] = [];
const out: string[] = [];
for (const t of tests) {
  const why = outOfScope(t);
  if (why) {
    out.push(`| ${t.name} | ${why} |`);
    continue;
  }
  const ms = Math.round(t.timeoutS * 1000 * scale);
  const ours = await runUnderUnhalt(suite, t, ms);
  count(totals.unhalt, ours.verdict);
  let theirs = '—';
  let mismatch = '';
  if (!values['no-qemu']) {
    const q = await runUnderQemu(suite, t, ms);
    count(totals.qemu, q.verdict);
    theirs = q.verdict === 'ERROR' && !q.output ? `ERROR: ${q.stderr.trim().split('\n')[0]?.slice(0, 80)}` : cell(q);
    if (q.verdict === 'PASS' && ours.verdict !== 'PASS') mismatch = ' **ours fails**';
  }
  const row = `| ${t.name} | ${t.smp} | ${cell(ours)}${mismatch} | ${theirs} |`;
  rows.push(row);
  process.stderr.write(`${row}\n`);
}
const sum = (m: Map<string, number>) => [...m].map(([k, n]) => `${n} ${k}`).join(', ') || '—';
console.log(`## kvm-unit-tests (${tests.length} tests; in scope ${rows.length})\n`);
console.log(`Each cell: the verdict (the exit status; the time).\n\n| test | vCPUs | Unhalt | QEMU -cpu host |\n|---|---|---|---|\n${rows.join('\n')}\n`);
console.log(`Unhalt: ${sum(totals.unhalt)}. QEMU: ${sum(totals.qemu)}.\n`);
console.log(`Out of scope:\n\n| test | why |\n|---|---|\n${out.join('\n')}`);

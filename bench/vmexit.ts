// The cost of one exit, by someone else's measure: kvm-unit-tests' vmexit.flat times each of its
// exits in TSC cycles inside the guest, under Unhalt and under QEMU on the same KVM, alternately,
// run after run. The median per exit and the ratio Unhalt / QEMU. `inl_from_qemu` is a round trip
// to the VMM's user space (a port nobody claims); `inl_from_kernel` and `cpuid` stay in KVM.
//
//   node bench/vmexit.ts [--runs 5] [--exits cpuid,vmcall,inl_from_qemu,...] [--warm] [--json F]
//
// vmexit.flat times each exit right after boot, while a VMM may still be starting (our vCPU
// workers boot, V8 compiles the exit path): on a one-CPU host, such as the nested lane's L1, that
// work takes the guest's CPU and its cycles count as the exit's. `--warm` times each exit after
// warm-up exits in the same VM (electron/kvm-unit-tests/vmexit.ts warmUpFor): a running VMM's cost.
//
// On a PVM host the figures are PVM's (QEMU runs there as `-cpu host,-arch-capabilities`); in the
// nested lane's L1 they are hardware-semantics KVM's, emulated (bench/l1-vmexit.sh).
import { writeFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { buildKvmUnitTests } from '../native/guest/kvm-unit-tests/build.mjs';
import { median } from '../electron/experiments/stats.ts';
import { exitCycles, VMEXIT_EXITS, vmexitTest } from '../electron/kvm-unit-tests/vmexit.ts';
import { QEMU_CPU, runUnderQemu, runUnderUnhalt } from '../test/support/kvm-unit-tests.ts';

const { values } = parseArgs({ options: { runs: { type: 'string', default: '5' }, exits: { type: 'string' }, warm: { type: 'boolean', default: false }, json: { type: 'string' } } });
const runs = Number(values.runs);
if (!Number.isInteger(runs) || runs < 1) throw new Error('--runs must be a whole number from 1');
const exits: readonly string[] = values.exits?.split(',').filter(Boolean) ?? VMEXIT_EXITS;
const suite = buildKvmUnitTests({ log: (m) => process.stderr.write(`vmexit: ${m}\n`) });
const samples = { unhalt: new Map<string, number[]>(), qemu: new Map<string, number[]>() };
const errors: string[] = [];
// One VM per exit and run, so an exit that hangs a vCPU (a hypercall on PVM) costs only itself.
for (let i = 0; i < runs; i++) {
  for (const exit of exits) {
    const one = vmexitTest(exit, values.warm);
    // Alternate who goes first, so neither always runs on a warmer host.
    const order = i % 2 === 0 ? (['unhalt', 'qemu'] as const) : (['qemu', 'unhalt'] as const);
    for (const who of order) {
      const r = who === 'unhalt' ? await runUnderUnhalt(suite, one, 60_000) : await runUnderQemu(suite, one, 60_000);
      const got = exitCycles(r.output).get(exit);
      if (got === undefined) errors.push(`${who}, ${exit}, run ${i + 1}: ${r.verdict}`);
      else samples[who].set(exit, [...(samples[who].get(exit) ?? []), got]);
    }
  }
  process.stderr.write(`vmexit: run ${i + 1}/${runs} done\n`);
}
const medianOf = (xs: number[] | undefined): number | undefined => (xs?.length ? median(xs) : undefined);
const rows = exits.map((e) => {
  const u = medianOf(samples.unhalt.get(e));
  const q = medianOf(samples.qemu.get(e));
  return { exit: e, unhalt: u, qemu: q, ratio: u !== undefined && q ? u / q : undefined };
});
const fmt = (n: number | undefined, d = 0) => (n === undefined ? '—' : n.toFixed(d));
console.log(`## vmexit.flat: TSC cycles per exit, median of ${runs} runs each, alternating (QEMU -cpu ${QEMU_CPU})${values.warm ? ', each after its warm-up exits' : ', each right after boot'}\n`);
console.log(`| exit | Unhalt | QEMU | Unhalt / QEMU |\n|---|---:|---:|---:|\n${rows.map((r) => `| ${r.exit} | ${fmt(r.unhalt)} | ${fmt(r.qemu)} | ${fmt(r.ratio, 2)} |`).join('\n')}`);
if (errors.length) console.log(`\nRuns without a figure (a hang is cut after 60 s):\n${errors.map((e) => `- ${e}`).join('\n')}`);
if (values.json) writeFileSync(values.json, `${JSON.stringify({ runs, warm: values.warm, qemuCpu: QEMU_CPU, rows, errors }, null, 2)}\n`);

// Real KVM: three VMs (1, 2 and 3 vCPUs) run at once from one process, each with its own console
// and its own telemetry (a Sampler per VM), and none disturbs the others' output: lines typed
// into each console, interleaved, come back only on that console and in order; exits caused by
// typing into one VM show up only in that VM's telemetry.
import { describe, expect, it } from 'vitest';
import type { SampleRecord } from '../../electron/vmm/telemetry/fields.ts';
import { Sampler } from '../../electron/vmm/telemetry/sampler.ts';
import { kvmAvailable, startProbe } from '../support/probe.ts';
import { scaled } from '../support/time-scale.ts';

const SIZES = [1, 2, 3] as const;
const LINES_PER_VM = 12;

/** Sum of a cumulative VMM counter over a VM's vCPUs, sampled now. */
function ioExits(s: Sampler): number {
  return s.sampleNow().reduce((sum, r) => sum + (r.vmm_io_exits ?? 0), 0);
}

describe.skipIf(!kvmAvailable)('three VMs at once', () => {
  it('each has its own console and its own telemetry; none disturbs the others', async () => {
    const vms = await Promise.all(SIZES.map((cpus, i) => startProbe({ cpus, append: 'scenario=echo', name: `conc-${i}` })));
    try {
      await Promise.all(vms.map((g) => g.waitForConsole('probe> ', scaled(30_000))));
      vms.forEach((g, i) => expect(g.console()).toContain(`${SIZES[i]} of ${SIZES[i]} CPUs up`));

      const samplers = vms.map((g) => Sampler.forVm(g.vm, { intervalMs: 50 }));
      const sampleSizes: number[][] = samplers.map(() => []);
      const vcpuIds: Set<number>[] = samplers.map(() => new Set());
      const records: SampleRecord[][] = samplers.map(() => []);
      samplers.forEach((s, i) => s.subscribe((e) => {
        if (e.type !== 'sample') return;
        sampleSizes[i]!.push(e.records.length);
        for (const r of e.records) { vcpuIds[i]!.add(r.vcpu); records[i]!.push(r); }
      }));

      // Interleave lines across the three consoles: a unique random token per VM and line.
      const tag = Math.random().toString(36).slice(2, 8);
      const tokens = vms.map((_, i) => Array.from({ length: LINES_PER_VM }, (_, n) => `t${tag}v${i}n${n}`));
      for (let n = 0; n < LINES_PER_VM; n++) vms.forEach((g, i) => g.vm.sendConsole(`${tokens[i]![n]}\r`));
      // The whole last answer, its line end included: console bytes come in chunks, and the check
      // below looks for each answer with its \r\n.
      await Promise.all(vms.map((g, i) => g.waitForConsole(`unknown command: ${tokens[i]![LINES_PER_VM - 1]}\r\n`, scaled(30_000))));
      vms.forEach((g, i) => {
        const text = g.console();
        // Its own lines, each once and in order …
        let at = -1;
        for (const t of tokens[i]!) {
          const next = text.indexOf(`unknown command: ${t}\r\n`, at + 1);
          expect(next, `VM ${i}: "${t}" answered after the previous line`).toBeGreaterThan(at);
          at = next;
        }
        // … and nothing of the others'.
        tokens.forEach((other, j) => { if (j !== i) for (const t of other) expect(text).not.toContain(t); });
      });

      // Telemetry: typing into one VM moves only that VM's exit counters.
      const matrix: number[][] = [];
      for (let busy = 0; busy < vms.length; busy++) {
        const before = samplers.map(ioExits);
        const chunk = 'a'.repeat(60);
        for (let k = 0; k < 5; k++) vms[busy]!.vm.sendConsole(`${chunk}\r`);
        await vms[busy]!.waitForConsole(new RegExp(`(unknown command: ${chunk}\\r\\n[^]*){${5}}`), scaled(30_000));
        await new Promise((r) => setTimeout(r, 100));
        const delta = samplers.map((s, i) => ioExits(s) - before[i]!);
        matrix.push(delta);
        expect(delta[busy], `VM ${busy} counted the exits of its own 300 echoed characters`).toBeGreaterThanOrEqual(300);
        delta.forEach((d, i) => { if (i !== busy) expect(d, `idle VM ${i} while VM ${busy} was busy`).toBeLessThan(50); });
      }

      // Each sampler saw exactly its own vCPUs in every sample.
      samplers.forEach((s, i) => {
        expect(s.cpus).toBe(SIZES[i]);
        expect(sampleSizes[i]!.length).toBeGreaterThan(5);
        expect(new Set(sampleSizes[i]!)).toEqual(new Set([SIZES[i]]));
        expect([...vcpuIds[i]!].sort()).toEqual(Array.from({ length: SIZES[i]! }, (_, v) => v));
        expect(records[i]!.every((r) => (r.vmm_exits ?? 0) >= 0)).toBe(true);
      });
      process.stdout.write(`three VMs (${SIZES.join(', ')} vCPUs): ${LINES_PER_VM} interleaved lines each, all answered on their own console only; `
        + `samples per sampler ${sampleSizes.map((x) => x.length).join('/')}; io exits while typing into VM 0/1/2 (rows) seen by VM 0/1/2 (columns): `
        + `${matrix.map((r) => `[${r.join(', ')}]`).join(' ')}\n`);
      // Their KVM stats (where the host has them) are per VM too: vCPU 0 of each VM did exits.
      samplers.forEach((s) => {
        const last = s.sampleNow();
        if (s.kvmStats.available) expect(last[0]!.exits ?? 0).toBeGreaterThan(0);
        expect(last[0]!.vmm_exits ?? 0).toBeGreaterThan(0);
      });
    } finally {
      vms.forEach((g) => { if (g.vm.state === 'running') g.vm.sendConsole('poweroff\r'); });
      const exits = await Promise.all(vms.map((g) => g.vm.ended));
      expect(exits.map((e) => e.kind)).toEqual(['poweroff', 'poweroff', 'poweroff']);
    }
  }, scaled(120_000));
});

// The exported QEMU command line, run as it is written (`sh FILE`, the way a user pastes it):
// it boots the probe guest, the guest prints its banner on ttyS0, and the paravirt features the
// guest sees in CPUID 0x40000001 are the ones Unhalt gives the same configuration.
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { type AgentEvent, parseAgentLine } from '../../electron/vmm/agent/line-protocol.ts';
import { resolveBoot, resolveKnobs, RunnabilityError } from '../../electron/vmm/config/resolve.ts';
import { validateConfig } from '../../electron/vmm/config/vm-config.ts';
import { exportConfig } from '../../electron/vmm/export/export.ts';
import { featureMask, PV_FEATURES } from '../../electron/vmm/machine/features.ts';
import { probeHost } from '../../electron/vmm/machine/host-caps.ts';
import { qemuSkipReason } from '../support/qemu-probe.ts';
import { scaled } from '../support/time-scale.ts';

const skip = qemuSkipReason();
if (skip) console.warn(`skipping the QEMU export tests: ${skip}`);

/** The CPUID 0x40000001 EAX bits Unhalt knows (a newer QEMU or host may offer more). */
const KNOWN_EAX = PV_FEATURES.filter((f) => f.register === 'eax').reduce((m, f) => (m | featureMask(f)) >>> 0, 0);

interface ScriptRun { status: number | null; stdout: string; stderr: string; events: AgentEvent[] }

async function runScript(text: string, dir: string, timeoutMs: number): Promise<ScriptRun> {
  const file = join(dir, 'vm.sh');
  writeFileSync(file, text);
  const child = spawn('sh', [file], { cwd: dir, stdio: ['pipe', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (b: Buffer) => { stdout += b.toString('latin1'); });
  child.stderr.on('data', (b: Buffer) => { stderr += b.toString('latin1'); });
  // The script execs QEMU, so the child is QEMU itself.
  const killer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
  const status = await new Promise<number | null>((resolve, reject) => {
    child.on('error', reject);
    child.on('close', (code) => { clearTimeout(killer); resolve(code); });
  });
  const raw = readFileSync(join(dir, 'ttyS1.log'), 'latin1');
  const events = raw.split('\n').map(parseAgentLine).filter((e): e is AgentEvent => typeof e === 'object');
  return { status, stdout, stderr, events };
}

const CASES: { what: string; raw: Record<string, unknown> }[] = [
  {
    what: 'unhalt-1.0, a feature off, halt polling and pinning (comments only)',
    raw: { name: 'export q1', cpus: 2, append: 'scenario=hello', machine: 'unhalt-1.0', cpuFeatures: { 'kvm-steal-time': false }, haltPollNs: 200000, pin: [0] },
  },
  {
    what: 'unhalt-1.1 with cpu-pm=on (kvm-pv-unhalt turned off)',
    raw: { name: 'export q2', cpus: 2, append: 'scenario=hello', cpuPm: true },
  },
];

describe('the exported QEMU command line', () => {
  for (const { what, raw } of CASES) {
    it.skipIf(!!skip)(`boots the probe guest: ${what}`, async (ctx) => {
      const host = probeHost();
      const config = validateConfig(raw);
      let expected;
      try {
        expected = resolveKnobs(config, host);
      } catch (e) {
        if (!(e instanceof RunnabilityError)) throw e;
        ctx.skip(`this host cannot run it, so there is nothing to compare with: ${e.message}`);
        return;
      }
      const dir = mkdtempSync(join(tmpdir(), 'unhalt-export-qemu-'));
      try {
        const { text } = exportConfig('qemu', { config, boot: resolveBoot(config, host.kind), hostKind: host.kind, agentLog: 'ttyS1.log' });
        const run = await runScript(text, dir, scaled(30_000));
        const context = `stdout: ${JSON.stringify(run.stdout.slice(-300))}; stderr: ${run.stderr.slice(-300)}`;
        expect(run.stdout, context).toContain('Unhalt probe guest: 2 of 2 CPUs up');
        expect(run.events.find((e) => e.event === 'hello')?.fields.cpus_up, context).toBe(2);
        expect(run.events.at(-1)?.event, context).toBe('poweroff');
        expect(run.status, context).toBe(0); // an ACPI power-off on q35
        const leaf = run.events.find((e) => e.event === 'cpuid' && e.fields.leaf === 0x40000001)!.fields;
        expect(((leaf.eax! & KNOWN_EAX) >>> 0).toString(16), 'CPUID 0x40000001 EAX under QEMU vs Unhalt').toBe(expected.kvmFeatures.toString(16));
        expect(leaf.edx, 'CPUID 0x40000001 EDX').toBe(expected.kvmHints);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    }, scaled(60_000));
  }
});

// The exported QEMU command line, run as it is written (`sh FILE`, the way a user pastes it):
// it boots the probe guest, the guest prints its banner on ttyS0, and the paravirt features the
// guest sees in CPUID 0x40000001 are the ones Unhalt gives the same configuration.
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { LibraryStore } from '../../electron/service/library-store.ts';
import { type AgentEvent, parseAgentLine } from '../../electron/vmm/agent/line-protocol.ts';
import { resolveBoot, resolveKnobs, RunnabilityError } from '../../electron/vmm/config/resolve.ts';
import { validateConfig } from '../../electron/vmm/config/vm-config.ts';
import { exportConfig } from '../../electron/vmm/export/export.ts';
import { featureMask, PV_FEATURES } from '../../electron/vmm/machine/features.ts';
import { probeHost } from '../../electron/vmm/machine/host-caps.ts';
import { runCli } from '../support/cli.ts';
import { qemuSkipReason } from '../support/qemu-probe.ts';
import { removeTempHomes, tempHome } from '../support/temp-home.ts';
import { scaled } from '../support/time-scale.ts';

const skip = qemuSkipReason();
if (skip) console.warn(`skipping the QEMU export tests: ${skip}`);

/** The CPUID 0x40000001 EAX bits Unhalt knows (a newer QEMU or host may offer more). */
const KNOWN_EAX = PV_FEATURES.filter((f) => f.register === 'eax').reduce((m, f) => (m | featureMask(f)) >>> 0, 0);

interface ScriptRun { status: number | null; stdout: string; stderr: string; events: AgentEvent[] }

async function runScript(text: string, dir: string, timeoutMs: number, agentLog = 'ttyS1.log'): Promise<ScriptRun> {
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
  const raw = readFileSync(join(dir, agentLog), 'latin1');
  const events = raw.split('\n').map(parseAgentLine).filter((e): e is AgentEvent => typeof e === 'object');
  return { status, stdout, stderr, events };
}

afterAll(removeTempHomes);

/** `via: 'cli'`: the VM is saved in a library and exported with `unhalt export VM --output F`. */
const CASES: { what: string; raw: Record<string, unknown>; via?: 'cli' }[] = [
  {
    via: 'cli',
    what: 'unhalt export VM of a library VM: unhalt-1.0, a feature off, halt polling and pinning (comments only)',
    raw: { name: 'export q1', cpus: 2, append: 'scenario=hello', machine: 'unhalt-1.0', cpuFeatures: { 'kvm-steal-time': false }, haltPollNs: 200000, pin: [0] },
  },
  {
    what: 'unhalt-1.1 with cpu-pm=on (kvm-pv-unhalt turned off)',
    raw: { name: 'export q2', cpus: 2, append: 'scenario=hello', cpuPm: true },
  },
];

describe('the exported QEMU command line', () => {
  for (const { what, raw, via } of CASES) {
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
        let run: ScriptRun;
        if (via === 'cli') {
          const home = tempHome('export');
          const store = await LibraryStore.open(home);
          await store.mutate((vms) => { vms.push({ id: 'vm-1', config, createdAt: 1, updatedAt: 1 }); });
          const out = join(dir, 'exported.sh');
          const cli = await runCli(['export', config.name, '--format', 'qemu', '--output', out], { env: { UNHALT_HOME: home } });
          expect(cli.stderr).toBe('');
          expect(cli.code).toBe(0);
          run = await runScript(readFileSync(out, 'utf8'), dir, scaled(30_000), 'export-q1.ttyS1.log');
        } else {
          const { text } = exportConfig('qemu', { config, boot: resolveBoot(config, host.kind), hostKind: host.kind, agentLog: 'ttyS1.log' });
          run = await runScript(text, dir, scaled(30_000));
        }
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

describe('unhalt export: what a user can get wrong', () => {
  it('names the VMs there are, refuses an unknown format, and wants a VM or --config', async () => {
    const home = tempHome('export');
    const store = await LibraryStore.open(home);
    await store.mutate((vms) => { vms.push({ id: 'vm-1', config: validateConfig({ name: 'web 1' }), createdAt: 1, updatedAt: 1 }); });
    const env = { UNHALT_HOME: home };
    const unknown = await runCli(['export', 'db', '--format', 'qemu'], { env });
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toMatch(/^unhalt: no VM named "db" in .*vms\.json; VMs: web 1\n$/);
    const format = await runCli(['export', 'web 1', '--format', 'vmware'], { env });
    expect(format.stderr).toBe('unhalt: --format must be one of qemu, libvirt, kubevirt, got "vmware"\n');
    const neither = await runCli(['export', '--format', 'qemu'], { env });
    expect(neither.stderr).toMatch(/^unhalt: name one VM of the library/);
    const both = await runCli(['export', 'web 1', '--config', 'cpus=2', '--format', 'qemu'], { env });
    expect(both.code).toBe(1);
    // Found regardless of case and spacing, as the library compares names; stdout carries the export only.
    const ok = await runCli(['export', 'WEB  1', '--format', 'libvirt', '--for-host', 'hardware'], { env });
    expect(ok.code).toBe(0);
    expect(ok.stdout).toContain('<name>web 1</name>');
    expect(ok.stdout).not.toContain('arch-capabilities');
    const rec = await runCli(['export', '--config', 'cpus=2,halt-poll-ns=1000000', '--format', 'kubevirt'], { env });
    expect(rec.code).toBe(0);
    expect(rec.stdout).toContain('/sys/module/kvm/parameters/halt_poll_ns');
  }, scaled(60_000));
});

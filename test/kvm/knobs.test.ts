// The knobs on real KVM with the probe guest, which reads back what it was given.
import { readFileSync } from 'node:fs';
import { release } from 'node:os';
import { describe, expect, it } from 'vitest';
import { probeHost } from '../../electron/vmm/machine/host-caps.ts';
import { CAP } from '../../native/kvm/abi.ts';
import { Kvm } from '../../native/kvm/kvm.ts';
import { Sampler } from '../../electron/vmm/telemetry/sampler.ts';
import { runCli } from '../support/cli.ts';
import { vcpuTotal } from '../support/counters.ts';
import { hardwareKvm, NEEDS_HARDWARE, onPvm as pvm } from '../support/kvm-semantics.ts';
import { kvmAvailable, startProbe } from '../support/probe.ts';
import { scaled } from '../support/time-scale.ts';

async function cpuidSeen(config: Record<string, unknown>) {
  const g = await startProbe({ append: 'scenario=hello', config });
  await g.waitForEvent('hello');
  const leaf = g.events.find((e) => e.event === 'cpuid' && e.fields.leaf === 0x40000001)!;
  await g.vm.ended;
  return leaf.fields;
}

async function haltPollDuringIdle(haltPollNs: number) {
  const g = await startProbe({ append: 'scenario=idle ms=600', config: { haltPollNs } });
  const sampler = Sampler.forVm(g.vm, { intervalMs: 50 });
  await g.vm.ended;
  const last = sampler.records().filter((r) => r.vcpu === 0).at(-1)!;
  return last;
}

describe.skipIf(!kvmAvailable)('knobs on real KVM', () => {
  it('the guest sees the CPUID 0x40000001 each machine type resolves to', async () => {
    const v10 = await cpuidSeen({ machine: 'unhalt-1.0' });
    const v11 = await cpuidSeen({ machine: 'unhalt-1.1' });
    expect(v10.eax! & 0x80).toBe(0);
    expect(v11.eax! & 0x80).toBe(0x80);
    expect(v11.eax! & ~0x80).toBe(v10.eax);
    expect(v10.edx).toBe(0);
  });

  it('explicit features override the machine type, including the realtime hint in EDX', async () => {
    const f = await cpuidSeen({ machine: 'unhalt-1.1', cpuFeatures: { 'kvm-pv-unhalt': false, 'kvm-steal-time': false, 'kvm-hint-dedicated': true } });
    expect(f.eax! & 0x80).toBe(0);
    expect(f.eax! & 0x20).toBe(0);
    expect(f.edx).toBe(1);
  });

  it('cpu-pm=on turns the default pv-unhalt off in the guest CPUID', async () => {
    const f = await cpuidSeen({ cpuPm: true });
    expect(f.eax! & 0x80).toBe(0);
  });

  it('halt-poll-ns=0: no polls while an idle guest halts; a large value: polls attempted', async () => {
    const off = await haltPollDuringIdle(0);
    expect(off.halt_exits).toBeGreaterThan(50);
    expect(off.halt_attempted_poll).toBe(0);
    const on = await haltPollDuringIdle(2_000_000);
    expect(on.halt_attempted_poll).toBeGreaterThan(50);
  });

  it('halt polling changes while the VM runs, and shows up in the stats', async () => {
    // The guest idles long enough for both samples even where waits are stretched (TCG's L1).
    const g = await startProbe({ append: `scenario=idle ms=${Math.round(scaled(3000))}`, config: { haltPollNs: 0 } });
    const sampler = Sampler.forVm(g.vm, { intervalMs: 50 });
    await g.waitForEvent('boot');
    await new Promise((r) => setTimeout(r, 300));
    const before = sampler.sampleNow()[0]!.halt_attempted_poll;
    g.vm.setHaltPollNs(2_000_000);
    sampler.markEvent('halt-poll-ns=2000000');
    await new Promise((r) => setTimeout(r, scaled(400)));
    const after = sampler.sampleNow()[0]!.halt_attempted_poll;
    expect(before).toBe(0);
    expect(after).toBeGreaterThan(20);
    expect(sampler.markers.map((m) => m.label)).toContain('halt-poll-ns=2000000');
    await g.vm.stop();
  });

  it('cpu-pm=on: halt exits flatline on hardware-backed KVM', async (ctx) => {
    if (!hardwareKvm()) {
      console.log(`skipped: ${NEEDS_HARDWARE} (on PVM the emulated guest kernel still exits on HLT with cpu-pm=on)`);
      ctx.skip();
    }
    const g = await startProbe({ append: 'scenario=idle ms=600', config: { cpuPm: true } });
    const sampler = Sampler.forVm(g.vm, { intervalMs: 50 });
    await g.vm.ended;
    expect(sampler.records().filter((r) => r.vcpu === 0).at(-1)!.halt_exits).toBeLessThan(5);
  });

  it('cpu-pm: KVM takes KVM_CAP_X86_DISABLE_EXITS only before the first vCPU, and the VM builder gets the order right', async () => {
    const kvm = Kvm.open();
    const vm = kvm.createVm();
    const hlt = 2;
    try {
      const vcpu = vm.createVcpu(0);
      // Linux 6.2 and later refuse it once a vCPU exists (EINVAL); older kernels take it but it
      // never reaches the vCPUs already made — which is why the builder enables it first.
      let late: unknown;
      try { vm.enableCap(CAP.X86_DISABLE_EXITS, [hlt]); } catch (e) { late = e; }
      const [major = 0, minor = 0] = release().split('.').map(Number);
      if (major > 6 || (major === 6 && minor >= 2)) expect(String(late)).toMatch(/KVM_ENABLE_CAP failed: EINVAL/);
      else console.log(`Linux ${release()} takes KVM_CAP_X86_DISABLE_EXITS after a vCPU exists${late ? ` (here: ${String(late)})` : ''}`);
      vcpu.close();
    } finally {
      vm.close();
      kvm.close();
    }
    // The real builder enables it first; a wrong order would fail the start with that EINVAL.
    const g = await startProbe({ cpus: 2, append: 'scenario=hello', config: { cpuPm: true } });
    expect((await g.vm.ended).kind).toBe('poweroff');
  });

  it('cpu-pm=on warns on a PVM host that halt exits stay, and only there', async () => {
    const r = await runCli(['run', '--guest', 'probe', '--append', 'scenario=hello', '--overcommit', 'cpu-pm=on']);
    expect(r.code).toBe(0);
    const warning = /warning: cpu-pm=on on this PVM host: the emulated guest kernel still exits on HLT/;
    if (pvm) expect(r.stderr).toMatch(warning);
    else expect(r.stderr).not.toMatch(warning);
  });

  it('PV spinlock kicks are KVM hypercalls only with kvm-pv-unhalt=on (hardware-backed KVM)', async (ctx) => {
    if (!hardwareKvm()) {
      console.log(`skipped: ${NEEDS_HARDWARE} (KVM hypercalls hang a vCPU on PVM; the probe kicks with IPIs there)`);
      ctx.skip();
    }
    const hypercalls = async (pv: boolean) => {
      const g = await startProbe({ cpus: 4, append: 'scenario=spinlock ms=500 spin=16', config: { cpuFeatures: { 'kvm-pv-unhalt': pv } } });
      const sampler = Sampler.forVm(g.vm, { intervalMs: 100 });
      const result = await g.waitForEvent('spinlock');
      await g.vm.ended;
      const total = vcpuTotal(sampler, 'hypercalls');
      return { total, kicks: result.fields.kicks! };
    };
    const off = await hypercalls(false);
    const on = await hypercalls(true);
    expect(off.total).toBe(0);
    expect(on.kicks).toBeGreaterThan(0);
    expect(on.total).toBeGreaterThan(0);
  });

  it('pins vCPU threads to the listed host CPUs, and re-pins while running', async () => {
    const cpus = probeHost().hostCpus;
    const target = cpus.length > 1 ? [cpus[1]!, cpus[0]!] : [cpus[0]!];
    const g = await startProbe({ cpus: 2, append: 'scenario=echo', config: { pin: target } });
    await g.waitForConsole('probe> ');
    const allowed = (tid: number) => /Cpus_allowed_list:\s*(\S+)/.exec(readFileSync(`/proc/self/task/${tid}/status`, 'utf8'))![1];
    const tids = g.vm.vcpuThreadIds();
    expect(tids.map(allowed)).toEqual([String(target[0]), String(target[1 % target.length])]);
    g.vm.setPin([cpus[0]!]);
    expect(tids.map(allowed)).toEqual([String(cpus[0]), String(cpus[0])]);
    await g.vm.stop();
  });

  it('mem-lock=on reports a clear error when locking is refused (CAP_IPC_LOCK dropped)', async (ctx) => {
    if (process.getuid?.() !== 0) {
      console.log('skipped: needs root to drop CAP_IPC_LOCK with setpriv');
      ctx.skip();
    }
    // The probe guest named: where KVM has hardware semantics the default guest is Linux, which
    // needs more than 64 MiB and would be refused before any locking.
    const r = await runCli(['run', '--guest', 'probe', '--memory', '64', '--overcommit', 'mem-lock=on'], {
      prefix: ['prlimit', '--memlock=65536', 'setpriv', '--inh-caps=-ipc_lock', '--bounding-set=-ipc_lock'],
    });
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/locking 64 MiB of guest memory \(mlock\) failed: (ENOMEM|EPERM|EAGAIN).*RLIMIT_MEMLOCK/);
  });

  it('mem-lock=on locks guest RAM when allowed', async () => {
    const g = await startProbe({ append: 'scenario=echo', config: { memLock: true } });
    await g.waitForConsole('probe> ');
    expect(Number(/VmLck:\s+(\d+)/.exec(readFileSync('/proc/self/status', 'utf8'))![1])).toBeGreaterThanOrEqual(64 * 1024);
    await g.vm.stop();
  });
});

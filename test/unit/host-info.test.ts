// What the wizard may offer, with reasons, for simulated hosts that lack something.
import { describe, expect, it } from 'vitest';
import { buildHostInfo } from '../../electron/service/host-info.ts';
import { SIM_KVM_FEATURES, simulatedHost } from '../support/simulated-host.ts';
import { availableParallelism, totalmem } from 'node:os';
import { readFileSync } from 'node:fs';
import { hostCpuList, parseCpuList } from '../../electron/vmm/host.ts';
import { KvmUnavailableError, classifyKvmAccess } from '../../electron/vmm/kvm-access.ts';

const option = (info: ReturnType<typeof buildHostInfo>, name: string) => info.options.find((o) => o.option === name);

describe('host info', () => {
  it('a full hardware host offers everything but what Unhalt can never give', () => {
    const info = buildHostInfo([], () => simulatedHost());
    expect(info.kind).toBe('hardware');
    expect(info.maxVcpus).toBe(710);
    expect(option(info, 'machine:unhalt-1.1')).toEqual({ option: 'machine:unhalt-1.1', available: true });
    expect(option(info, 'feature:kvm-msi-ext-dest-id')).toEqual({ option: 'feature:kvm-msi-ext-dest-id', available: false, reason: 'needs a userspace I/O APIC (split irqchip); Unhalt uses the in-kernel one' });
    expect(option(info, 'cpu-pm')).toMatchObject({ available: true, reason: expect.stringMatching(/halt exits flatline/) });
    expect(option(info, 'halt-poll-ns')).toMatchObject({ available: true, reason: 'host default halt_poll_ns=200000' });
    expect(info.features.find((f) => f.name === 'kvm-pv-unhalt')).toMatchObject({ hostOffers: true, usesHypercalls: true });
    expect(info.machineTypes.find((m) => m.newest)?.name).toBe('unhalt-1.2');
    expect(info.telemetry).toEqual({ binaryStats: true });
  });

  it('greys out cpu-pm without HLT in the disable-exits mask, and halt polling without its cap', () => {
    const info = buildHostInfo([], () => simulatedHost({ disableExits: 0x4, haltPoll: false, binaryStats: false }));
    expect(option(info, 'cpu-pm')).toEqual({ option: 'cpu-pm', available: false, reason: 'cpu-pm=on needs KVM_CAP_X86_DISABLE_EXITS with HLT, which this host\'s KVM does not offer (offered: PAUSE); use cpu-pm=off' });
    expect(option(info, 'halt-poll-ns')).toMatchObject({ available: false, reason: expect.stringMatching(/KVM_CAP_HALT_POLL/) });
    expect(info.telemetry.binaryStats).toBe(false);
    expect(info.telemetry.note).toMatch(/KVM_CAP_BINARY_STATS_FD/);
  });

  it('a host without PV_UNHALT: the feature and the machine type that defaults it on are unavailable', () => {
    const info = buildHostInfo([], () => simulatedHost({ kvmFeatures: SIM_KVM_FEATURES & ~0x80 }));
    expect(option(info, 'feature:kvm-pv-unhalt')).toEqual({ option: 'feature:kvm-pv-unhalt', available: false, reason: 'this host\'s KVM does not offer it (CPUID 0x40000001 EAX bit 7)' });
    expect(option(info, 'machine:unhalt-1.1')).toEqual({ option: 'machine:unhalt-1.1', available: false, reason: 'turns kvm-pv-unhalt on by default, but this host\'s KVM does not offer it (CPUID 0x40000001 EAX bit 7)' });
    expect(option(info, 'machine:unhalt-1.0')?.available).toBe(true);
  });

  it('on PVM: hypercall features and cpu-pm carry warnings, and the probe guest is the default', () => {
    const info = buildHostInfo([], () => simulatedHost({ kind: 'pvm' }));
    for (const f of ['kvm-pv-unhalt', 'kvm-pv-ipi', 'kvm-pv-sched-yield']) {
      expect(option(info, `feature:${f}`)).toMatchObject({ available: true, reason: expect.stringMatching(/hypercalls, which hang a vCPU on this PVM host/) });
    }
    expect(option(info, 'feature:kvmclock')).toEqual({ option: 'feature:kvmclock', available: true });
    expect(option(info, 'cpu-pm')).toMatchObject({ available: true, reason: expect.stringMatching(/still exits on HLT/) });
    expect(info.defaultGuest).toEqual({ kind: 'probe', reason: expect.stringMatching(/PVM/) });
    expect(info.guests.map((g) => g.kind)).toEqual(['probe', 'linux']);
    expect(info.guests[0]!.label).toBe('Probe (diagnostic guest)');
  });

  it('without a usable KVM the problem is said once; what only KVM tells is left open, what the OS tells is known', () => {
    const info = buildHostInfo([{ name: 'library', ok: true, detail: '0 VMs' }], () => { throw new Error('open /dev/kvm failed: ENOENT'); });
    expect(info.kvmProblem).toBe('KVM is not usable on this host: open /dev/kvm failed: ENOENT');
    // No option repeats it: KVM's features and knobs are judged at a start; Unhalt's own limits still show.
    for (const o of info.options) expect(o.reason ?? '').not.toMatch(/KVM is not usable/);
    expect(option(info, 'feature:kvm-pv-unhalt')).toEqual({ option: 'feature:kvm-pv-unhalt', available: true });
    expect(option(info, 'machine:unhalt-1.1')).toEqual({ option: 'machine:unhalt-1.1', available: true });
    expect(option(info, 'feature:kvm-msi-ext-dest-id')).toMatchObject({ available: false, reason: expect.stringMatching(/split irqchip/) });
    expect(option(info, 'cpu-pm')?.available).toBe(true);
    expect(info.telemetry).toEqual({ binaryStats: false });
    expect(info.maxVcpus).toBe(0);
    expect(info.hostCpus.length).toBeGreaterThan(0);
    expect(option(info, 'pin')?.available).toBe(true);
    expect(info.doctor.at(-1)).toEqual({ name: 'library', ok: true, detail: '0 VMs' });
    // The host's CPUs and memory come from the OS, not from KVM: never 0.
    expect(info.hostCpus).toEqual(hostCpuList());
    expect(info.hostCpus.length).toBeGreaterThan(0);
    expect(info.memoryMiB).toBe(Math.floor(totalmem() / 1048576));
    expect(info.kvm.ok).toBe(false);
  });

  it('without KVM, the verdict of kvm-access (cause and fix) is what the notice and a refused start say', () => {
    const access = classifyKvmAccess({
      device: '/dev/kvm', override: false, defaultDevice: '/dev/kvm', open: 'ENOENT', nodeKind: 'missing', user: 'ada', uid: 1000,
      modules: ['kvm', 'kvm_pvm'], cpuFlags: { vmx: false, svm: false, hypervisor: true },
    });
    const info = buildHostInfo([], () => { throw new KvmUnavailableError(access); });
    expect(info.kvm).toEqual(access);
    // Said once, in the words a start is refused with; the options leave what only KVM tells open.
    expect(info.kvmProblem).toBe(`KVM is not usable on this host: ${access.problem}. To fix: ${access.fix}`);
    expect(option(info, 'cpu-pm')).toEqual({ option: 'cpu-pm', available: true });
    expect(info.hostCpus.length).toBeGreaterThan(0);
  });

  it('host CPUs: the affinity mask, else the online list, else availableParallelism', () => {
    expect(parseCpuList('0-3,8,10-11\n')).toEqual([0, 1, 2, 3, 8, 10, 11]);
    expect(parseCpuList('0\n')).toEqual([0]);
    const online = parseCpuList(readFileSync('/sys/devices/system/cpu/online', 'utf8'));
    expect(hostCpuList().every((c) => online.includes(c))).toBe(true);
    expect(hostCpuList().length).toBeLessThanOrEqual(Math.max(availableParallelism(), online.length));
  });
});

// The runnability check with simulated hosts that lack something: the real resolution code,
// one specific error each, naming the feature, the reason and the way out.
import { describe, expect, it } from 'vitest';
import { RunnabilityError, resolveKnobs, resolveWithoutKvm } from '../../electron/vmm/config/resolve.ts';
import { judgedAtStart } from '../../electron/vmm/config/host-rules.ts';
import { ConfigError, validateConfig } from '../../electron/vmm/config/vm-config.ts';
import { simulatedHost, SIM_KVM_FEATURES } from '../support/simulated-host.ts';

const noUnhalt = simulatedHost({ kvmFeatures: SIM_KVM_FEATURES & ~0x80 });

describe('runnability', () => {
  it('a machine type default the host cannot give names the way out', () => {
    expect(() => resolveKnobs(validateConfig({ machine: 'unhalt-1.1' }), noUnhalt)).toThrow(RunnabilityError);
    expect(() => resolveKnobs(validateConfig({ machine: 'unhalt-1.1' }), noUnhalt))
      .toThrow(/machine type unhalt-1.1 turns kvm-pv-unhalt on by default, but this host's KVM does not offer it \(CPUID 0x40000001 EAX bit 7\); use an older machine type or --cpu host,kvm-pv-unhalt=off/);
  });

  it('the older machine type, or turning the feature off, runs there', () => {
    expect(resolveKnobs(validateConfig({ machine: 'unhalt-1.0' }), noUnhalt).kvmFeatures & 0x80).toBe(0);
    expect(resolveKnobs(validateConfig({ machine: 'unhalt-1.1', cpuFeatures: { 'kvm-pv-unhalt': false } }), noUnhalt).kvmFeatures & 0x80).toBe(0);
  });

  it('an explicit feature the host lacks is refused', () => {
    expect(() => resolveKnobs(validateConfig({ machine: 'unhalt-1.0', cpuFeatures: { 'kvm-pv-unhalt': true } }), noUnhalt))
      .toThrow(/kvm-pv-unhalt=on was asked for, but this host's KVM does not offer it/);
    expect(() => resolveKnobs(validateConfig({ cpuFeatures: { 'kvm-msi-ext-dest-id': true } }), simulatedHost()))
      .toThrow(/split irqchip/);
  });

  it('cpu-pm=on needs the disable-exits capability with HLT', () => {
    expect(() => resolveKnobs(validateConfig({ cpuPm: true }), simulatedHost({ disableExits: 0 })))
      .toThrow(/cpu-pm=on needs KVM_CAP_X86_DISABLE_EXITS with HLT.*offered: none.*use cpu-pm=off/);
  });

  it('explicit pv-unhalt with cpu-pm=on is contradictory', () => {
    expect(() => resolveKnobs(validateConfig({ cpuPm: true, cpuFeatures: { 'kvm-pv-unhalt': true } }), simulatedHost()))
      .toThrow(/kvm-pv-unhalt=on contradicts cpu-pm=on/);
  });

  it('halt-poll-ns needs KVM_CAP_HALT_POLL; pinning needs CPUs that exist', () => {
    expect(() => resolveKnobs(validateConfig({ haltPollNs: 0 }), simulatedHost({ haltPoll: false }))).toThrow(/KVM_CAP_HALT_POLL/);
    expect(() => resolveKnobs(validateConfig({ pin: [0, 9] }), simulatedHost())).toThrow(/host CPU 9 does not exist/);
    expect(() => resolveKnobs(validateConfig({ cpus: 800 }), simulatedHost())).toThrow(ConfigError);
  });

  it('warns on PVM hosts about hypercall features and cpu-pm', () => {
    const pvm = simulatedHost({ kind: 'pvm' });
    const r = resolveKnobs(validateConfig({ guest: 'custom', kernel: '/k', cpuPm: true }), pvm);
    expect(r.warnings.join('\n')).toMatch(/cpu-pm=on on this PVM host.*halt exits do not go away/);
    expect(r.warnings.join('\n')).toMatch(/kvm-pv-ipi, kvm-pv-sched-yield are on: the guest side uses KVM hypercalls, which hang a vCPU/);
    const probe = resolveKnobs(validateConfig({}), pvm);
    expect(probe.warnings.join()).not.toMatch(/hypercalls/);
  });

  it('without KVM nothing is judged against a host: the features are as asked, and what waits for a start is named', () => {
    const c = validateConfig({ machine: 'unhalt-1.1', cpus: 4, cpuPm: true, haltPollNs: 0, cpuFeatures: { 'kvm-pv-ipi': false } });
    const r = resolveWithoutKvm(c);
    expect(r.features.find((f) => f.name === 'kvm-pv-unhalt')).toMatchObject({ value: false, source: 'cpu-pm' });
    expect(r.features.find((f) => f.name === 'kvm-pv-ipi')).toMatchObject({ value: false, source: 'explicit' });
    expect(r.kvmFeatures & 0x80).toBe(0);
    expect(r.warnings).toEqual([]);
    const on = r.features.filter((f) => f.value).map((f) => f.name);
    expect(judgedAtStart(c, r.features)).toBe('this host lacks a usable KVM: the VM can be saved and exported, but not started here; what only KVM can tell is checked '
      + `when it starts: 4 vCPUs against KVM's vCPU limit, the paravirt features on (${on.join(', ')}), cpu-pm=on (KVM_CAP_X86_DISABLE_EXITS), halt-poll-ns (KVM_CAP_HALT_POLL)`);
    // A contradiction is the configuration's own, KVM or not.
    expect(() => resolveWithoutKvm(validateConfig({ cpuPm: true, cpuFeatures: { 'kvm-pv-unhalt': true } }))).toThrow(/contradicts cpu-pm=on/);
  });
});

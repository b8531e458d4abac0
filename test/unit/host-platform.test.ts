// The host-platform classification (bare metal, virtual machine, emulated CPU) from fixture
// /proc/cpuinfo texts and the other sources an unprivileged process can read.
import { describe, expect, it } from 'vitest';
import { classifyHostVirtualization, platformTimingNote } from '../../electron/vmm/host.ts';

const cpuinfo = (model: string, flags: string) =>
  `processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: ${model}\nflags\t\t: ${flags}\n\nprocessor\t: 1\nmodel name\t: ${model}\nflags\t\t: ${flags}\n`;

// Shapes seen: QEMU TCG -cpu max (the nested lane's L1), qemu64, a cloud KVM guest, bare metal.
const TCG_MAX = cpuinfo('QEMU TCG CPU version 2.5+', 'fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge cmov hypervisor lahf_lm svm npt vgif');
const QEMU64 = cpuinfo('QEMU Virtual CPU version 2.5+', 'fpu de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov pat pse36 clflush mmx fxsr sse sse2 syscall nx lm rep_good nopl cpuid pni cx16 x2apic hypervisor lahf_lm');
const CLOUD_KVM = cpuinfo('Intel(R) Xeon(R) Processor', 'fpu vme de pse tsc msr pae mce cx8 apic sep ss syscall nx pdpe1gb rdtscp lm constant_tsc rep_good nopl xtopology cpuid tsc_known_freq pni pclmulqdq vmx ssse3 fma cx16 hypervisor lahf_lm');
const BARE = cpuinfo('AMD EPYC 7763 64-Core Processor', 'fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov svm npt lbrv');

describe('host platform', () => {
  it('QEMU TCG from its CPU model name alone is an emulated CPU', () => {
    const v = classifyHostVirtualization({ cpuinfo: TCG_MAX });
    expect(v).toMatchObject({ platform: 'emulated', hypervisor: 'QEMU TCG' });
    expect(v.evidence.join(' ')).toMatch(/QEMU TCG CPU/);
    expect(platformTimingNote(v)).toMatch(/10-50x/);
  });

  it('QEMU TCG from the CPUID vendor leaf, whatever the model is called', () => {
    const v = classifyHostVirtualization({ cpuinfo: QEMU64, cpuidVendor: 'TCGTCGTCGTCG' });
    expect(v).toMatchObject({ platform: 'emulated', hypervisor: 'QEMU TCG', cpuidVendor: 'TCGTCGTCGTCG' });
  });

  it('qemu64 without a vendor leaf is a virtual machine (KVM or TCG cannot be told apart)', () => {
    const v = classifyHostVirtualization({ cpuinfo: QEMU64, dmiVendor: 'QEMU\n', dmiProduct: 'Standard PC (Q35 + ICH9, 2009)\n' });
    expect(v).toMatchObject({ platform: 'virtual-machine', hypervisor: 'QEMU' });
    expect(v.evidence).toEqual(expect.arrayContaining([expect.stringMatching(/hypervisor bit/), expect.stringMatching(/QEMU Virtual CPU/), expect.stringMatching(/DMI system vendor "QEMU"/)]));
  });

  it('names the hypervisor from the vendor leaf (NUL padding dropped)', () => {
    for (const [sig, name] of [['KVMKVMKVM\0\0\0', 'KVM'], ['Microsoft Hv', 'Microsoft Hyper-V'], ['VMwareVMware', 'VMware'], ['XenVMMXenVMM', 'Xen']]) {
      expect(classifyHostVirtualization({ cpuinfo: CLOUD_KVM, cpuidVendor: sig })).toMatchObject({ platform: 'virtual-machine', hypervisor: name });
    }
    expect(classifyHostVirtualization({ cpuinfo: CLOUD_KVM, cpuidVendor: 'SomethingNew' }).hypervisor).toBe('unknown ("SomethingNew")');
  });

  it('the hypervisor bit alone is a virtual machine, and its note warns about timings', () => {
    const v = classifyHostVirtualization({ cpuinfo: CLOUD_KVM });
    expect(v.platform).toBe('virtual-machine');
    expect(v.hypervisor).toBeUndefined();
    expect(platformTimingNote(v)).toMatch(/nested/);
  });

  it('Hyper-V from DMI, Xen from /sys/hypervisor', () => {
    expect(classifyHostVirtualization({ cpuinfo: CLOUD_KVM, dmiVendor: 'Microsoft Corporation', dmiProduct: 'Virtual Machine' }).hypervisor).toBe('Microsoft Hyper-V');
    expect(classifyHostVirtualization({ cpuinfo: BARE, sysHypervisorType: 'xen\n' })).toMatchObject({ platform: 'virtual-machine', hypervisor: 'Xen' });
  });

  it('bare metal: no hypervisor bit, no vendor leaf, real firmware', () => {
    const v = classifyHostVirtualization({ cpuinfo: BARE, dmiVendor: 'Dell Inc.', dmiProduct: 'PowerEdge R7525' });
    expect(v.platform).toBe('bare-metal');
    expect(platformTimingNote(v)).toMatch(/real hardware/);
  });

  it('nothing readable is reported as bare metal, saying so', () => {
    expect(classifyHostVirtualization({})).toMatchObject({ platform: 'bare-metal', evidence: [expect.stringMatching(/no hypervisor/)] });
  });
});

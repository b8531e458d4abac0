import { describe, expect, it } from 'vitest';
import type { CpuidEntry } from '../../native/kvm/abi.ts';
import { buildCpuid } from '../../electron/vmm/cpu/cpuid.ts';

const leaf = (fn: number, index = 0, regs: Partial<CpuidEntry> = {}): CpuidEntry =>
  ({ function: fn, index, flags: 0, eax: 0, ebx: 0, ecx: 0, edx: 0, ...regs });

// A fixed simulated host's KVM_GET_SUPPORTED_CPUID (a subset).
const host: CpuidEntry[] = [
  leaf(0, 0, { eax: 0x1f }),
  leaf(1, 0, { eax: 0x806f8, ebx: 0x800, ecx: 0x7ffafbff, edx: 0xbfebfbff }),
  leaf(4, 0, { eax: 0x121 }), leaf(4, 1, { eax: 0x122 }), leaf(4, 4, { eax: 0 }),
  leaf(0xb, 0), leaf(0xb, 1), leaf(0xb, 2),
  leaf(0x40000000, 0, { eax: 0x40000001 }),
  leaf(0x40000001, 0, { eax: 0x1007efb }),
  leaf(0x80000008, 0, { eax: 0x3030 }),
];

describe('per-vCPU CPUID', () => {
  it('gives each vCPU its APIC ID and the VM topology', () => {
    const c = buildCpuid(host, { vcpuId: 3, cpus: 4, kvmFeatures: 0x80, kvmHints: 1 });
    const get = (fn: number, i = 0) => c.find((e) => e.function === fn && e.index === i)!;
    expect(get(1).ebx >>> 24).toBe(3);
    expect((get(1).ebx >>> 16) & 0xff).toBe(4);
    expect(get(1).ecx >>> 31).toBe(1); // hypervisor bit
    expect((get(1).edx >>> 28) & 1).toBe(1); // HTT with >1 CPU
    expect(get(4, 0).eax >>> 26).toBe(3);
    expect(get(0xb, 0)).toMatchObject({ ebx: 1, ecx: 0x100, edx: 3 });
    expect(get(0xb, 1)).toMatchObject({ eax: 2, ebx: 4, ecx: 0x201, edx: 3 });
    expect(get(0xb, 2)).toMatchObject({ ebx: 0, ecx: 2, edx: 3 });
    expect(get(0x80000008).ecx & 0xff).toBe(3);
    expect(get(0x40000000)).toMatchObject({ eax: 0x40000001, ebx: 0x4b4d564b, ecx: 0x564b4d56, edx: 0x4d });
    expect(get(0x40000001)).toMatchObject({ eax: 0x80, edx: 1 });
  });

  it('a single vCPU has no HTT bit', () => {
    const c = buildCpuid(host, { vcpuId: 0, cpus: 1, kvmFeatures: 0, kvmHints: 0 });
    expect((c.find((e) => e.function === 1)!.edx >>> 28) & 1).toBe(0);
  });
});

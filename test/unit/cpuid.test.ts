// buildCpuid on simulated hosts: the guest CPUID as QEMU builds it for KVM: TSC-deadline from
// the capability, leaf 0xD consistent with the XSAVE state offered, topology leaves from the
// vCPU count.
import { describe, expect, it } from 'vitest';
import type { CpuidEntry } from '../../native/kvm/abi.ts';
import { buildCpuid, type CpuidOptions } from '../../electron/vmm/cpu/cpuid.ts';
import { compactedSize, standardSize } from '../../electron/vmm/cpu/xsave-leaf.ts';

const leaf = (fn: number, index = 0, regs: Partial<CpuidEntry> = {}): CpuidEntry =>
  ({ function: fn, index, flags: 0, eax: 0, ebx: 0, ecx: 0, edx: 0, ...regs });
const indexed = (fn: number, index: number, regs: Partial<CpuidEntry> = {}) => ({ ...leaf(fn, index, regs), flags: 1 });

const INTEL = { ebx: 0x756e6547, ecx: 0x6c65746e, edx: 0x49656e69 };
const AMD = { ebx: 0x68747541, ecx: 0x444d4163, edx: 0x69746e65 };
const XSAVE = 1 << 26;
const AVX = 1 << 28;
const AVX512F = 1 << 16;
const PKU = 1 << 3;
const AMX = (1 << 22) | (1 << 24) | (1 << 25); // AMX-BF16, AMX-TILE, AMX-INT8

/** Sapphire-Rapids-like XSAVE layout (size, offset, ecx) per component, as KVM reports it. */
const XSAVE_SUBLEAVES: Record<number, [number, number, number]> = {
  2: [256, 576, 0], 5: [64, 1088, 0], 6: [512, 1152, 0], 7: [1024, 1664, 0], 9: [8, 2688, 0],
  17: [64, 2752, 2], 18: [8192, 2816, 6],
};

interface HostShape { vendor?: typeof INTEL; leaf1Ecx?: number; leaf7Ebx?: number; leaf7Ecx?: number; leaf7Edx?: number; xcr0?: number; xsaveVariants?: number }

/** A simulated KVM_GET_SUPPORTED_CPUID: the leaves buildCpuid changes, with a host's values in them. */
function host(s: HostShape = {}): CpuidEntry[] {
  const xcr0 = s.xcr0 ?? 0x2e7;
  const vendor = s.vendor ?? INTEL;
  const amd = vendor === AMD;
  const e: CpuidEntry[] = [
    leaf(0, 0, { eax: 0x20, ...vendor }),
    leaf(1, 0, { eax: 0x806f8, ebx: 0x00ff0800, ecx: s.leaf1Ecx ?? (0x7ffafbff & ~(1 << 24) & ~(1 << 21)) >>> 0, edx: 0x0f8bfbff }),
    indexed(4, 0, { eax: 0x121 | (0x3f << 26) | (1 << 14) }), indexed(4, 1, { eax: 0x122 }), indexed(4, 2, { eax: 0x143 }),
    indexed(4, 3, { eax: 0x163 | (0xff << 14) }), indexed(4, 4),
    indexed(7, 0, { eax: 1, ebx: s.leaf7Ebx ?? (0xf1bf07ab >>> 0), ecx: s.leaf7Ecx ?? 0x1b417fde, edx: s.leaf7Edx ?? 0xbc010400 }),
    indexed(7, 1, { eax: (1 << 21) | (1 << 4) }),
    indexed(0xb, 0, { eax: 1, ebx: 2, ecx: 0x100, edx: 7 }), // the host's SMT level; no core level listed
    indexed(0xd, 0, { eax: xcr0, ebx: 2696, ecx: 11008 }),
    indexed(0xd, 1, { eax: s.xsaveVariants ?? 0xf, ecx: 0 }),
    ...Object.entries(XSAVE_SUBLEAVES).map(([i, [size, offset, ecx]]) => indexed(0xd, Number(i), { eax: size, ebx: offset, ecx })),
    indexed(0x1f, 0, { eax: 1, ebx: 2, ecx: 0x100, edx: 7 }),
    leaf(0x40000000, 0, { eax: 0x40000001 }),
    leaf(0x40000001, 0, { eax: 0x1007efb }),
    leaf(0x80000000, 0, { eax: amd ? 0x80000021 : 0x80000008 }),
    leaf(0x80000001, 0, { ecx: amd ? 0x75c237ff : 0x121, edx: 0x2fd3fbff }),
    leaf(0x80000008, 0, { eax: 0x3030, ecx: amd ? 0x703f : 0 }),
  ];
  if (amd) e.push(leaf(0x8000001e, 0, { eax: 0x11, ebx: 0x108, ecx: 0x3 }));
  return e;
}

function guest(h: CpuidEntry[], o: Partial<CpuidOptions> = {}) {
  const c = buildCpuid(h, { vcpuId: 0, cpus: 1, kvmFeatures: 0x80, kvmHints: 0, tscDeadline: true, ...o });
  const get = (fn: number, i = 0) => c.find((e) => e.function === fn && e.index === i);
  const need = (fn: number, i = 0) => {
    const e = get(fn, i);
    if (!e) throw new Error(`no CPUID leaf 0x${fn.toString(16)}.${i}`);
    return e;
  };
  const subleaves = (fn: number) => c.filter((e) => e.function === fn).map((e) => e.index);
  return { c, get, need, subleaves };
}

describe('CPUID.01H:ECX bits userspace sets', () => {
  it('TSC-deadline exactly when KVM_CAP_TSC_DEADLINE_TIMER is reported', () => {
    expect((guest(host(), { tscDeadline: true }).need(1).ecx >>> 24) & 1).toBe(1);
    expect((guest(host(), { tscDeadline: false }).need(1).ecx >>> 24) & 1).toBe(0);
    // A stray bit in the supported list does not survive a host without the capability.
    expect((guest(host({ leaf1Ecx: (1 << 24) | XSAVE }), { tscDeadline: false }).need(1).ecx >>> 24) & 1).toBe(0);
  });

  it('x2APIC (in-kernel LAPIC) and the hypervisor bit are always set', () => {
    const ecx = guest(host()).need(1).ecx;
    expect((ecx >>> 21) & 1).toBe(1);
    expect(ecx >>> 31).toBe(1);
  });

  it('KVM signature and feature leaves carry the configured paravirt features', () => {
    const g = guest(host(), { kvmFeatures: 0x80, kvmHints: 1 });
    expect(g.need(0x40000000)).toMatchObject({ eax: 0x40000001, ebx: 0x4b4d564b, ecx: 0x564b4d56, edx: 0x4d });
    expect(g.need(0x40000001)).toMatchObject({ eax: 0x80, ebx: 0, ecx: 0, edx: 1 });
  });
});

describe('leaf 0xD is consistent with the XSAVE state offered', () => {
  /** What a guest (Linux's fpu init) recomputes from the sub-leaves it finds. */
  function recomputed(g: ReturnType<typeof guest>) {
    const xcr0 = g.need(0xd, 0).eax;
    const layouts = g.subleaves(0xd).filter((i) => i >= 2).map((i) => {
      const e = g.need(0xd, i);
      return { index: i, size: e.eax, offset: e.ebx, ecx: e.ecx };
    });
    for (const l of layouts) expect((xcr0 | g.need(0xd, 1).ecx) & (1 << l.index)).not.toBe(0); // no sub-leaf for an unoffered component
    for (let i = 2; i < 32; i++) if (xcr0 & (1 << i)) expect(g.get(0xd, i)).toBeDefined(); // and one for each offered
    return { xcr0, standard: standardSize(layouts, xcr0), compacted: compactedSize(layouts, xcr0) };
  }

  it('AVX + AVX-512 + PKU offered: XCR0 0x2e7 and the sizes computed from its components', () => {
    const g = guest(host({ leaf1Ecx: XSAVE | AVX }));
    const r = recomputed(g);
    expect(r.xcr0).toBe(0x2e7);
    expect(r.standard).toBe(2696); // PKRU at 2688 + 8
    expect(g.need(0xd, 0)).toMatchObject({ eax: 0x2e7, ebx: 2696, ecx: 2696, edx: 0 });
    expect(g.need(0xd, 1)).toMatchObject({ eax: 0xf, ebx: 576 + 256 + 64 + 512 + 1024 + 8, ecx: 0, edx: 0 });
    expect(g.subleaves(0xd)).toEqual([0, 1, 2, 5, 6, 7, 9]);
  });

  it('features not offered drop their components, sub-leaves and sizes', () => {
    // No AVX in leaf 1 (so no YMM, and AVX-512 without YMM is dropped too), no PKU in leaf 7.
    const g = guest(host({ leaf1Ecx: XSAVE, leaf7Ecx: 0x1b417fde & ~PKU }));
    const r = recomputed(g);
    expect(r.xcr0).toBe(0x3);
    expect(g.need(0xd, 0)).toMatchObject({ eax: 0x3, ebx: 576, ecx: 576 });
    expect(g.need(0xd, 1).ebx).toBe(576);
    expect(g.subleaves(0xd)).toEqual([0, 1]);
    expect((g.need(7).ebx >>> 16) & 1).toBe(0); // AVX-512F goes with its state
  });

  it('only AVX (no AVX-512): the area ends after the YMM state', () => {
    const g = guest(host({ leaf1Ecx: XSAVE | AVX, leaf7Ebx: 0xf1bf07ab & ~AVX512F, leaf7Ecx: 0 }));
    expect(g.need(0xd, 0)).toMatchObject({ eax: 0x7, ebx: 832, ecx: 832 });
    expect(g.subleaves(0xd)).toEqual([0, 1, 2]);
  });

  it('the host XCR0 is a ceiling: a feature whose state KVM does not offer loses its bit (AMX without permission)', () => {
    const g = guest(host({ leaf1Ecx: XSAVE | AVX, leaf7Edx: 0xbc010400 | AMX, xcr0: 0x2e7 }));
    expect(g.need(0xd, 0).eax).toBe(0x2e7);
    expect(g.need(7).edx & AMX).toBe(0);
    expect((g.need(7, 1).eax >>> 21) & 1).toBe(0); // AMX-FP16
    expect(g.get(0xd, 17)).toBeUndefined();
  });

  it('AMX with its state: tile data is 64-byte aligned when compacted and keeps its XFD bit', () => {
    const g = guest(host({ leaf1Ecx: XSAVE | AVX, leaf7Edx: 0xbc010400 | AMX, xcr0: 0x602e7 }));
    const r = recomputed(g);
    expect(r.xcr0).toBe(0x602e7);
    expect(g.need(0xd, 0)).toMatchObject({ ebx: 11008, ecx: 11008 });
    expect(g.need(0xd, 18)).toMatchObject({ eax: 8192, ebx: 2816, ecx: 6 });
    // 576 + 256 + 64 + 512 + 1024 + 8 + 64 = 2504, aligned to 2560 for tile data, + 8192.
    expect(g.need(0xd, 1).ebx).toBe(2560 + 8192);
    expect(g.need(7).edx & AMX).toBe(AMX);
  });

  it('XSAVE not offered: no 0xD entry, so KVM answers the whole leaf with zeros (this PVM host\'s supported list)', () => {
    const g = guest(host({ leaf1Ecx: 0x81202000 }));
    expect(g.subleaves(0xd)).toEqual([]);
    expect(g.need(0).eax).toBeGreaterThanOrEqual(0xd); // below the maximum basic leaf: zeros, not another leaf's values
  });
});

describe('topology leaves from the vCPU count (one package, one thread per core)', () => {
  for (const cpus of [1, 2, 4, 8]) {
    it(`${cpus} vCPU${cpus > 1 ? 's' : ''}, Intel`, () => {
      const bits = Math.ceil(Math.log2(cpus));
      for (const vcpuId of [0, cpus - 1]) {
        const g = guest(host(), { cpus, vcpuId });
        const l1 = g.need(1);
        expect(l1.ebx >>> 24).toBe(vcpuId);
        expect((l1.ebx >>> 16) & 0xff).toBe(cpus > 1 ? cpus : 0);
        expect(l1.ebx & 0xffff).toBe(0x0800); // CLFLUSH line size stays the host's
        expect((l1.edx >>> 28) & 1).toBe(cpus > 1 ? 1 : 0); // HTT
        for (const i of [0, 1, 2]) expect(g.need(4, i).eax >>> 26).toBe(cpus - 1);
        for (const i of [0, 1, 2]) expect((g.need(4, i).eax >>> 14) & 0xfff).toBe(0); // L1/L2: one thread each
        expect((g.need(4, 3).eax >>> 14) & 0xfff).toBe((1 << bits) - 1); // L3: the package
        expect(g.need(4, 4).eax).toBe(0);
        for (const fn of [0xb, 0x1f]) {
          expect(g.subleaves(fn)).toEqual([0, 1, 2]);
          expect(g.need(fn, 0)).toMatchObject({ eax: 0, ebx: 1, ecx: 0x100, edx: vcpuId });
          expect(g.need(fn, 1)).toMatchObject({ eax: bits, ebx: cpus, ecx: 0x201, edx: vcpuId });
          expect(g.need(fn, 2)).toMatchObject({ eax: 0, ebx: 0, ecx: 2, edx: vcpuId });
        }
        expect(g.need(0x80000008).ecx).toBe(cpus > 1 ? (bits << 12) | (cpus - 1) : 0);
        expect((g.need(0x80000001).ecx >>> 1) & 1).toBe(0); // never CmpLegacy on Intel
        expect(g.get(0x8000001e)).toBeUndefined();
      }
    });

    it(`${cpus} vCPU${cpus > 1 ? 's' : ''}, AMD`, () => {
      for (const vcpuId of [0, cpus - 1]) {
        const g = guest(host({ vendor: AMD }), { cpus, vcpuId });
        expect((g.need(0x80000001).ecx >>> 1) & 1).toBe(cpus > 1 ? 1 : 0); // CmpLegacy with more than one core
        expect(g.need(0x8000001e)).toMatchObject({ eax: vcpuId, ebx: vcpuId, ecx: 0, edx: 0 });
        expect(g.need(0x80000008).ecx & 0xff).toBe(cpus > 1 ? cpus - 1 : 0);
      }
    });
  }

  it('no 0x1F leaf when the maximum basic leaf is below it', () => {
    const h = host().map((e) => (e.function === 0 ? { ...e, eax: 0x16 } : e)).filter((e) => e.function <= 0x16 || e.function >= 0x40000000);
    const g = guest(h, { cpus: 2 });
    expect(g.subleaves(0x1f)).toEqual([]);
    expect(g.subleaves(0xb)).toEqual([0, 1, 2]);
  });
});

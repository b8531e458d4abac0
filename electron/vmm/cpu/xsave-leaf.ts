// CPUID leaf 0xD (processor extended state), rebuilt from the XSAVE state components the guest is
// actually offered, the way QEMU does it for KVM. KVM_GET_SUPPORTED_CPUID reports the host's
// XCR0/IA32_XSS ceiling and sizes for *all* of it; passed through unchanged, a guest whose CPUID
// lacks, say, AVX still reads a 2,696-byte area for XCR0 it can never enable, and Linux stops at
// "XSAVE consistency problem" (then triple-faults). So:
// - a component is offered when the host supports it (0xD.0 EAX / 0xD.1 ECX), KVM describes it (its
//   own sub-leaf), and the CPUID feature that uses it is offered to the guest;
// - sub-leaf 0: EAX/EDX = the XCR0 mask offered, ECX = the XSAVE area size for all of it, EBX the
//   same (as QEMU on KVM: KVM rewrites EBX from the guest's real XCR0 on KVM_SET_CPUID2 and XSETBV);
// - sub-leaf 1: the XSAVE instruction variants KVM supports, EBX = compacted size of XCR0|XSS
//   (also rewritten by KVM at run time when XSAVEC/XSAVES is offered), ECX/EDX = the XSS mask;
// - one sub-leaf per offered component, none for the others;
// - no XSAVE in CPUID.01H:ECX[26]: no 0xD entry at all, as in QEMU's table. A hardware-semantics
//   KVM answers a missing leaf below the maximum with zeros; PVM (this machine's KVM) reports no
//   XSAVE in KVM_GET_SUPPORTED_CPUID yet gives its guests the hardware's XSAVE features in leaves
//   1 and 7 whatever the table says, and answers leaf 0xD itself, consistently, only when the table
//   has none (zero entries there would leave it XCR0 0x2e7 with empty component sub-leaves).
import { CPUID_FLAG_SIGNIFICANT_INDEX, type CpuidEntry } from '../../../native/kvm/abi.ts';

export const XSAVE_LEAF = 0xd;
/** FXSAVE legacy region (512) + XSAVE header (64): components 0 (x87) and 1 (SSE) live here. */
export const XSAVE_LEGACY_SIZE = 576;

/** Where a feature bit lives in CPUID. */
export interface FeatureBit { leaf: number; sub: number; reg: 'eax' | 'ebx' | 'ecx' | 'edx'; bit: number }

const bit = (leaf: number, sub: number, reg: FeatureBit['reg'], b: number): FeatureBit => ({ leaf, sub, reg, bit: b });

export const XSAVE_FEATURE = bit(1, 0, 'ecx', 26);

/**
 * State components (XCR0 / IA32_XSS bit index) and the feature that needs each. `uses` are the
 * feature bits that cannot work without the component: cleared when the host's KVM has the feature
 * but not its state (AMX on a host where this process has no permission for dynamic XSAVE state:
 * KVM then hides XTILECFG/XTILEDATA from XCR0 but still reports AMX-TILE in leaf 7).
 * Components that come in groups are offered together or not at all.
 */
interface Component { index: number; supervisor: boolean; needs: FeatureBit; uses?: FeatureBit[] }
const AVX = bit(1, 0, 'ecx', 28);
const MPX = bit(7, 0, 'ebx', 14);
const AVX512F = bit(7, 0, 'ebx', 16);
const INTEL_PT = bit(7, 0, 'ebx', 25);
const PKU = bit(7, 0, 'ecx', 3);
const CET_SS = bit(7, 0, 'ecx', 7);
const ARCH_LBR = bit(7, 0, 'edx', 19);
const AMX_TILE = bit(7, 0, 'edx', 24);
const AMX_USES = [AMX_TILE, bit(7, 0, 'edx', 22), bit(7, 0, 'edx', 25), bit(7, 1, 'eax', 21), bit(7, 1, 'edx', 8)];
const APX = bit(7, 1, 'edx', 21);

const COMPONENTS: Component[] = [
  { index: 2, supervisor: false, needs: AVX, uses: [AVX] }, // YMM upper halves
  { index: 3, supervisor: false, needs: MPX, uses: [MPX] }, // MPX BNDREGS
  { index: 4, supervisor: false, needs: MPX, uses: [MPX] }, // MPX BNDCSR
  { index: 5, supervisor: false, needs: AVX512F, uses: [AVX512F] }, // opmask
  { index: 6, supervisor: false, needs: AVX512F, uses: [AVX512F] }, // ZMM_Hi256
  { index: 7, supervisor: false, needs: AVX512F, uses: [AVX512F] }, // Hi16_ZMM
  { index: 8, supervisor: true, needs: INTEL_PT },
  { index: 9, supervisor: false, needs: PKU },
  { index: 11, supervisor: true, needs: CET_SS }, // CET user state
  { index: 12, supervisor: true, needs: CET_SS }, // CET supervisor state
  { index: 15, supervisor: true, needs: ARCH_LBR },
  { index: 17, supervisor: false, needs: AMX_TILE, uses: AMX_USES }, // XTILECFG
  { index: 18, supervisor: false, needs: AMX_TILE, uses: AMX_USES }, // XTILEDATA
  { index: 19, supervisor: false, needs: APX, uses: [APX] },
];
/** Components that only make sense together (and the prerequisite of each group). */
const GROUPS: { members: number[]; requires: number[] }[] = [
  { members: [2], requires: [1] },
  { members: [3, 4], requires: [] },
  { members: [5, 6, 7], requires: [2] },
  { members: [11, 12], requires: [] },
  { members: [17, 18], requires: [] },
];

/** 0xD.1 EAX: XSAVEOPT(0) XSAVEC(1) XGETBV1(2) XSAVES(3) XFD(4). */
const XSAVE_VARIANTS_MASK = 0x1f;
const XSAVES = 1 << 3;
/** Sub-leaf ECX of a component: bit 0 supervisor (IA32_XSS), bit 1 64-byte aligned when compacted, bit 2 XFD. */
const ECX_SUPERVISOR = 1 << 0;
const ECX_ALIGN64 = 1 << 1;
const ECX_XFD = 1 << 2;

type Lookup = (leaf: number, sub?: number) => CpuidEntry | undefined;

export function featureOffered(find: Lookup, f: FeatureBit): boolean {
  const e = find(f.leaf, f.sub);
  return !!e && ((e[f.reg] >>> f.bit) & 1) === 1;
}

function clearFeature(find: Lookup, f: FeatureBit): void {
  const e = find(f.leaf, f.sub);
  if (e) e[f.reg] = (e[f.reg] & ~(1 << f.bit)) >>> 0;
}

/** One state component as the host's KVM describes it (sub-leaf `index` of 0xD). */
export interface ComponentLayout { index: number; size: number; offset: number; ecx: number }

/** XSAVE area size, standard format: the end of the furthest component (offsets are fixed). */
export function standardSize(components: readonly ComponentLayout[], mask: number): number {
  let size = XSAVE_LEGACY_SIZE;
  for (const c of components) if ((mask >>> c.index) & 1) size = Math.max(size, c.offset + c.size);
  return size;
}

/** XSAVE area size, compacted format (XSAVEC/XSAVES): components packed in index order, some 64-byte aligned. */
export function compactedSize(components: readonly ComponentLayout[], mask: number): number {
  let size = XSAVE_LEGACY_SIZE;
  for (const c of [...components].sort((a, b) => a.index - b.index)) {
    if (!((mask >>> c.index) & 1)) continue;
    if (c.ecx & ECX_ALIGN64) size = Math.ceil(size / 64) * 64;
    size += c.size;
  }
  return size;
}

/**
 * Rewrites `entries` (a copy of the supported CPUID, other leaves already adjusted) in place:
 * replaces every 0xD entry and clears feature bits whose state component is not offered.
 */
export function rebuildXsaveLeaf(entries: CpuidEntry[]): void {
  const find: Lookup = (leaf, sub = 0) => entries.find((e) => e.function === leaf && e.index === sub);
  const host = entries.filter((e) => e.function === XSAVE_LEAF);
  const rest = entries.filter((e) => e.function !== XSAVE_LEAF);
  entries.length = 0;
  entries.push(...rest);
  const hostSub = (i: number) => host.find((e) => e.index === i);
  const zero = (index: number): CpuidEntry =>
    ({ function: XSAVE_LEAF, index, flags: CPUID_FLAG_SIGNIFICANT_INDEX, eax: 0, ebx: 0, ecx: 0, edx: 0 });
  if (!host.length || !hostSub(0) || !featureOffered(find, XSAVE_FEATURE)) return;
  const leaf0 = zero(0);
  const leaf1 = zero(1);
  entries.push(leaf0, leaf1);

  const hostXcr0 = hostSub(0)!.eax; // bits 32-63 (EDX): no component defined there is offered
  const variants = (hostSub(1)?.eax ?? 0) & XSAVE_VARIANTS_MASK;
  const hostXss = variants & XSAVES ? hostSub(1)?.ecx ?? 0 : 0;

  // What the host has, that KVM describes, and whose feature the guest sees.
  let offered = hostXcr0 & 0x3; // x87 and SSE: always there with XSAVE
  const byIndex = new Map(COMPONENTS.map((c) => [c.index, c]));
  for (const c of COMPONENTS) {
    const hostHas = (((c.supervisor ? hostXss : hostXcr0) >>> c.index) & 1) === 1;
    const sub = hostSub(c.index);
    if (hostHas && sub && sub.eax > 0 && featureOffered(find, c.needs)) offered |= 1 << c.index;
  }
  for (const g of GROUPS) {
    const complete = g.members.every((i) => (offered >>> i) & 1) && g.requires.every((i) => (offered >>> i) & 1);
    if (!complete) for (const i of g.members) offered &= ~(1 << i);
  }
  offered >>>= 0;
  // A feature whose state the guest cannot enable is not offered either.
  for (const c of COMPONENTS) {
    if ((offered >>> c.index) & 1) continue;
    for (const f of c.uses ?? []) clearFeature(find, f);
  }

  const layouts: ComponentLayout[] = [];
  for (const c of COMPONENTS) {
    if (!((offered >>> c.index) & 1)) continue;
    const sub = hostSub(c.index)!;
    layouts.push({ index: c.index, size: sub.eax, offset: c.supervisor ? 0 : sub.ebx, ecx: sub.ecx });
  }
  const xcr0 = layouts.filter((l) => !byIndex.get(l.index)!.supervisor).reduce((m, l) => m | (1 << l.index), offered & 0x3) >>> 0;
  const xss = (offered & ~xcr0) >>> 0;

  leaf0.eax = xcr0;
  leaf0.ecx = standardSize(layouts, xcr0);
  leaf0.ebx = leaf0.ecx;
  leaf1.eax = variants;
  leaf1.ebx = compactedSize(layouts, (xcr0 | xss) >>> 0);
  leaf1.ecx = xss;
  for (const l of layouts) {
    const supervisor = byIndex.get(l.index)!.supervisor;
    entries.push({
      function: XSAVE_LEAF, index: l.index, flags: CPUID_FLAG_SIGNIFICANT_INDEX,
      eax: l.size, ebx: l.offset,
      ecx: (supervisor ? ECX_SUPERVISOR : 0) | (l.ecx & ECX_ALIGN64) | (supervisor ? 0 : l.ecx & ECX_XFD),
      edx: 0,
    });
  }
}

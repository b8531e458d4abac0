// Register state the boot CPU starts with, per boot protocol; plus the MSRs and LAPIC LVT setup
// every vCPU gets.
import type { Regs, Segment, Sregs } from '../../../native/kvm/abi.ts';
import type { Vcpu } from '../../../native/kvm/kvm.ts';
import type { GuestMemory } from '../memory/guest-memory.ts';
import type { BootPlan } from '../boot/boot-plan.ts';
import { LAYOUT } from '../boot/layout.ts';

const CR0_PE = 1n;
const CR0_ET = 0x10n;
const CR0_PG = 0x80000000n;
const CR4_PAE = 0x20n;
const EFER_LME = 0x100n;
const EFER_LMA = 0x400n;

/** GDT entries: 0x10 code32, 0x18 data, 0x20 TSS, 0x28 code64 (flat, like Linux's boot GDT). */
const GDT = [
  0n, 0n,
  0x00cf9b000000ffffn, // 0x10 code32: base 0, limit 4 GiB, execute/read, accessed
  0x00cf93000000ffffn, // 0x18 data: read/write, accessed
  0x00008b0000000067n, // 0x20 32-bit busy TSS, base 0, limit 0x67
  0x00af9b000000ffffn, // 0x28 code64
];

function segment(selector: number, type: number, code64 = false): Segment {
  return {
    base: 0n, limit: 0xffffffff, selector, type, present: 1, dpl: 0, db: code64 ? 0 : 1, s: 1,
    l: code64 ? 1 : 0, g: 1, avl: 0, unusable: 0,
  };
}

export function writeBootGdt(mem: GuestMemory): void {
  GDT.forEach((d, i) => mem.writeU64(LAYOUT.gdt + i * 8, d));
}

/** Identity-maps the first 4 GiB with 2 MiB pages for the Linux 64-bit boot protocol. */
export function writeIdentityPageTables(mem: GuestMemory): number {
  const pml4 = LAYOUT.pml4;
  const pdpt = pml4 + 0x1000;
  const pd = pml4 + 0x2000;
  mem.fill(pml4, 0x6000);
  mem.writeU64(pml4, BigInt(pdpt) | 3n);
  for (let i = 0; i < 4; i++) {
    mem.writeU64(pdpt + i * 8, BigInt(pd + i * 0x1000) | 3n);
    for (let j = 0; j < 512; j++) {
      const phys = (BigInt(i) << 30n) | (BigInt(j) << 21n);
      mem.writeU64(pd + i * 0x1000 + j * 8, phys | 0x83n); // present, writable, 2 MiB page
    }
  }
  return pml4;
}

export function setBootCpuState(vcpu: Vcpu, mem: GuestMemory, plan: BootPlan): void {
  // Multiboot leaves page 0 to the kernel (kvm-unit-tests puts its SIPI trampoline there) and
  // says GDTR may be invalid: the segments' hidden parts are all the entry needs.
  const ownGdt = plan.protocol !== 'multiboot';
  if (ownGdt) writeBootGdt(mem);
  const s: Sregs = vcpu.getSregs();
  const long = plan.mode === 'long64';
  s.cs = segment(long ? 0x28 : 0x10, 0xb, long);
  s.ds = s.es = s.fs = s.gs = s.ss = segment(0x18, 0x3);
  s.tr = { ...segment(0x20, 0xb), limit: 0x67, s: 0, db: 0, g: 0 };
  s.gdt = ownGdt ? { base: BigInt(LAYOUT.gdt), limit: GDT.length * 8 - 1 } : { base: 0n, limit: 0 };
  s.idt = { base: 0n, limit: 0 };
  s.cr0 = (s.cr0 | CR0_PE | CR0_ET) & ~CR0_PG;
  if (long) {
    s.cr3 = BigInt(writeIdentityPageTables(mem));
    s.cr4 |= CR4_PAE;
    s.cr0 |= CR0_PG;
    s.efer |= EFER_LME | EFER_LMA;
  }
  vcpu.setSregs(s);
  const regs: Regs = {
    rax: BigInt(plan.rax ?? 0), rbx: BigInt(plan.rbx), rcx: 0n, rdx: 0n, rsi: BigInt(plan.rsi), rdi: 0n, rsp: 0n, rbp: 0n,
    r8: 0n, r9: 0n, r10: 0n, r11: 0n, r12: 0n, r13: 0n, r14: 0n, r15: 0n,
    rip: BigInt(plan.entry), rflags: 0x2n,
  };
  vcpu.setRegs(regs);
  vcpu.resetFpu();
}

const MSR_IA32_MISC_ENABLE = 0x1a0;
const MSR_MTRR_DEF_TYPE = 0x2ff;

/** MSRs every vCPU starts with: fast strings on, MTRRs enabled with write-back default. */
export function setBootMsrs(vcpu: Vcpu): void {
  vcpu.setMsrs([
    { index: MSR_IA32_MISC_ENABLE, data: 1n },
    { index: MSR_MTRR_DEF_TYPE, data: (1n << 11n) | 6n },
  ]);
}

const APIC_LVT_LINT0 = 0x350;
const APIC_LVT_LINT1 = 0x360;
const APIC_MODE_EXTINT = 0x7;
const APIC_MODE_NMI = 0x4;

/** LINT0 as ExtINT (the 8259 PIC's output) and LINT1 as NMI, as a PC's firmware leaves them. */
export function setLapicLints(vcpu: Vcpu): void {
  const lapic = vcpu.getLapic();
  const setMode = (reg: number, mode: number) => {
    const v = lapic.readUInt32LE(reg);
    lapic.writeUInt32LE(((v & ~0x700) | (mode << 8)) >>> 0, reg);
  };
  setMode(APIC_LVT_LINT0, APIC_MODE_EXTINT);
  setMode(APIC_LVT_LINT1, APIC_MODE_NMI);
  vcpu.setLapic(lapic);
}

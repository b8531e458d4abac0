// The KVM userspace ABI (x86-64): ioctl numbers, capability numbers, exit reasons and struct
// layouts, from include/uapi/linux/kvm.h and arch/x86/include/uapi/asm/kvm.h.

const KVMIO = 0xae;
const IOC_WRITE = 1;
const IOC_READ = 2;
const ioc = (dir: number, nr: number, size: number): number =>
  ((dir << 30) | (size << 16) | (KVMIO << 8) | nr) >>> 0;
const io = (nr: number): number => ioc(0, nr, 0);
const iow = (nr: number, size: number): number => ioc(IOC_WRITE, nr, size);
const ior = (nr: number, size: number): number => ioc(IOC_READ, nr, size);
const iowr = (nr: number, size: number): number => ioc(IOC_READ | IOC_WRITE, nr, size);

export const SIZEOF = {
  regs: 144,
  sregs: 312,
  fpu: 416,
  lapic: 1024,
  cpuidEntry2: 40,
  msrEntry: 16,
  userspaceMemoryRegion: 32,
  irqLevel: 8,
  pitConfig: 64,
  enableCap: 104,
  segment: 24,
  ioeventfd: 64,
  msi: 32,
  clockData: 48,
} as const;

/** ioctl request numbers, each with the name errors report. */
export const IOCTL = {
  KVM_GET_API_VERSION: io(0x00),
  KVM_CREATE_VM: io(0x01),
  KVM_CHECK_EXTENSION: io(0x03),
  KVM_GET_VCPU_MMAP_SIZE: io(0x04),
  KVM_GET_SUPPORTED_CPUID: iowr(0x05, 8),
  KVM_CREATE_VCPU: io(0x41),
  KVM_SET_USER_MEMORY_REGION: iow(0x46, SIZEOF.userspaceMemoryRegion),
  KVM_SET_TSS_ADDR: io(0x47),
  KVM_SET_IDENTITY_MAP_ADDR: iow(0x48, 8),
  KVM_CREATE_IRQCHIP: io(0x60),
  KVM_IRQ_LINE: iow(0x61, SIZEOF.irqLevel),
  KVM_CREATE_PIT2: iow(0x77, SIZEOF.pitConfig),
  KVM_IOEVENTFD: iow(0x79, SIZEOF.ioeventfd),
  KVM_SET_CLOCK: iow(0x7b, SIZEOF.clockData),
  KVM_GET_CLOCK: ior(0x7c, SIZEOF.clockData),
  KVM_RUN: io(0x80),
  KVM_GET_REGS: ior(0x81, SIZEOF.regs),
  KVM_SET_REGS: iow(0x82, SIZEOF.regs),
  KVM_GET_SREGS: ior(0x83, SIZEOF.sregs),
  KVM_SET_SREGS: iow(0x84, SIZEOF.sregs),
  KVM_GET_MSRS: iowr(0x88, 8),
  KVM_SET_MSRS: iow(0x89, 8),
  KVM_GET_FPU: ior(0x8c, SIZEOF.fpu),
  KVM_SET_FPU: iow(0x8d, SIZEOF.fpu),
  KVM_GET_LAPIC: ior(0x8e, SIZEOF.lapic),
  KVM_SET_LAPIC: iow(0x8f, SIZEOF.lapic),
  KVM_SET_CPUID2: iow(0x90, 8),
  KVM_GET_MP_STATE: ior(0x98, 4),
  KVM_ENABLE_CAP: iow(0xa3, SIZEOF.enableCap),
  KVM_GET_TSC_KHZ: io(0xa3),
  KVM_SIGNAL_MSI: iow(0xa5, SIZEOF.msi),
  KVM_KVMCLOCK_CTRL: io(0xad),
  KVM_GET_STATS_FD: io(0xce),
} as const;

export type IoctlName = keyof typeof IOCTL;

export const KVM_API_VERSION = 12;

/** Capability numbers (KVM_CAP_*) the VMM asks about. */
export const CAP = {
  IRQCHIP: 0,
  HLT: 1,
  USER_MEMORY: 3,
  SET_TSS_ADDR: 4,
  EXT_CPUID: 7,
  NR_VCPUS: 9,
  NR_MEMSLOTS: 10,
  IRQFD: 32,
  PIT2: 33,
  /** KVM_IOEVENTFD: a guest write to an address signals an eventfd instead of exiting to userspace. */
  IOEVENTFD: 36,
  /** KVM_SIGNAL_MSI: inject an MSI (address, data) into the in-kernel irqchip. */
  SIGNAL_MSI: 77,
  /** An ioeventfd with len 0 matches a write of any width. */
  IOEVENTFD_ANY_LENGTH: 122,
  SET_IDENTITY_MAP_ADDR: 37,
  /** KVM_GET_CLOCK / KVM_SET_CLOCK: the VM's kvm-clock read and set by userspace. */
  ADJUST_CLOCK: 39,
  IMMEDIATE_EXIT: 136,
  MAX_VCPUS: 66,
  GET_TSC_KHZ: 61,
  /** The in-kernel LAPIC has the TSC-deadline timer mode (CPUID.01H:ECX[24] is userspace's to set). */
  TSC_DEADLINE_TIMER: 72,
  X86_DISABLE_EXITS: 143,
  HALT_POLL: 182,
  BINARY_STATS_FD: 203,
} as const;

/** struct kvm_ioeventfd flags. */
export const IOEVENTFD_FLAG = { DATAMATCH: 1, PIO: 2, DEASSIGN: 4 } as const;

/** KVM_EXIT_* reasons. */
export const EXIT = {
  UNKNOWN: 0,
  EXCEPTION: 1,
  IO: 2,
  HYPERCALL: 3,
  DEBUG: 4,
  HLT: 5,
  MMIO: 6,
  IRQ_WINDOW_OPEN: 7,
  SHUTDOWN: 8,
  FAIL_ENTRY: 9,
  INTR: 10,
  SET_TPR: 11,
  TPR_ACCESS: 12,
  NMI: 16,
  INTERNAL_ERROR: 17,
  SYSTEM_EVENT: 24,
  IOAPIC_EOI: 26,
} as const;

export const EXIT_NAMES: Record<number, string> = Object.fromEntries(
  Object.entries(EXIT).map(([name, value]) => [value, name.toLowerCase()]),
);

export const INTERNAL_ERROR_NAMES: Record<number, string> = {
  1: 'emulation failure',
  2: 'simultaneous exception',
  3: 'delivery event',
  4: 'unexpected exit reason',
};

export const SYSTEM_EVENT_NAMES: Record<number, string> = {
  1: 'shutdown',
  2: 'reset',
  3: 'crash',
  4: 'wakeup',
  5: 'suspend',
  6: 'SEV termination',
};

/** Offsets inside the mmap'd struct kvm_run. */
export const RUN = {
  immediateExit: 1,
  exitReason: 8,
  union: 32,
  // io
  ioDirection: 32,
  ioSize: 33,
  ioPort: 34,
  ioCount: 36,
  ioDataOffset: 40,
  // mmio
  mmioPhysAddr: 32,
  mmioData: 40,
  mmioLen: 48,
  mmioIsWrite: 52,
  // fail_entry
  failReason: 32,
  failCpu: 40,
  // internal
  internalSuberror: 32,
  internalNdata: 36,
  internalData: 40,
  // system_event
  systemEventType: 32,
  systemEventNdata: 36,
  /** Bytes of kvm_run that hold the header and every exit record we decode. */
  headerBytes: 176,
} as const;

export const KVM_EXIT_IO_IN = 0;
export const KVM_EXIT_IO_OUT = 1;
export const KVM_PIT_SPEAKER_DUMMY = 1;

/** Offsets inside struct kvm_sregs. */
export const SREGS = {
  cs: 0, ds: 24, es: 48, fs: 72, gs: 96, ss: 120, tr: 144, ldt: 168,
  gdt: 192, idt: 208,
  cr0: 224, cr2: 232, cr3: 240, cr4: 248, cr8: 256, efer: 264, apicBase: 272,
} as const;

export const REG_NAMES = [
  'rax', 'rbx', 'rcx', 'rdx', 'rsi', 'rdi', 'rsp', 'rbp',
  'r8', 'r9', 'r10', 'r11', 'r12', 'r13', 'r14', 'r15', 'rip', 'rflags',
] as const;
export type RegName = (typeof REG_NAMES)[number];
export type Regs = Record<RegName, bigint>;

export interface Segment {
  base: bigint;
  limit: number;
  selector: number;
  type: number;
  present: number;
  dpl: number;
  db: number;
  s: number;
  l: number;
  g: number;
  avl: number;
  unusable: number;
}

export interface DescriptorTable {
  base: bigint;
  limit: number;
}

export interface Sregs {
  cs: Segment; ds: Segment; es: Segment; fs: Segment; gs: Segment; ss: Segment; tr: Segment; ldt: Segment;
  gdt: DescriptorTable; idt: DescriptorTable;
  cr0: bigint; cr2: bigint; cr3: bigint; cr4: bigint; cr8: bigint; efer: bigint; apicBase: bigint;
}

const SEGMENT_NAMES = ['cs', 'ds', 'es', 'fs', 'gs', 'ss', 'tr', 'ldt'] as const;
const CONTROL_NAMES = ['cr0', 'cr2', 'cr3', 'cr4', 'cr8', 'efer', 'apicBase'] as const;

export function decodeRegs(buf: Buffer): Regs {
  const regs = {} as Regs;
  REG_NAMES.forEach((name, i) => { regs[name] = buf.readBigUInt64LE(i * 8); });
  return regs;
}

export function encodeRegs(regs: Regs, buf = Buffer.alloc(SIZEOF.regs)): Buffer {
  REG_NAMES.forEach((name, i) => buf.writeBigUInt64LE(BigInt.asUintN(64, regs[name]), i * 8));
  return buf;
}

function decodeSegment(buf: Buffer, off: number): Segment {
  return {
    base: buf.readBigUInt64LE(off), limit: buf.readUInt32LE(off + 8), selector: buf.readUInt16LE(off + 12),
    type: buf[off + 14]!, present: buf[off + 15]!, dpl: buf[off + 16]!, db: buf[off + 17]!, s: buf[off + 18]!,
    l: buf[off + 19]!, g: buf[off + 20]!, avl: buf[off + 21]!, unusable: buf[off + 22]!,
  };
}

function encodeSegment(seg: Segment, buf: Buffer, off: number): void {
  buf.writeBigUInt64LE(seg.base, off);
  buf.writeUInt32LE(seg.limit >>> 0, off + 8);
  buf.writeUInt16LE(seg.selector, off + 12);
  buf[off + 14] = seg.type; buf[off + 15] = seg.present; buf[off + 16] = seg.dpl; buf[off + 17] = seg.db;
  buf[off + 18] = seg.s; buf[off + 19] = seg.l; buf[off + 20] = seg.g; buf[off + 21] = seg.avl;
  buf[off + 22] = seg.unusable; buf[off + 23] = 0;
}

export function decodeSregs(buf: Buffer): Sregs {
  const s = {} as Sregs;
  for (const name of SEGMENT_NAMES) s[name] = decodeSegment(buf, SREGS[name]);
  s.gdt = { base: buf.readBigUInt64LE(SREGS.gdt), limit: buf.readUInt16LE(SREGS.gdt + 8) };
  s.idt = { base: buf.readBigUInt64LE(SREGS.idt), limit: buf.readUInt16LE(SREGS.idt + 8) };
  for (const name of CONTROL_NAMES) s[name] = buf.readBigUInt64LE(SREGS[name]);
  return s;
}

/** Encodes into `buf`, which should hold the vCPU's current sregs (the interrupt bitmap is kept). */
export function encodeSregs(s: Sregs, buf: Buffer): Buffer {
  for (const name of SEGMENT_NAMES) encodeSegment(s[name], buf, SREGS[name]);
  buf.writeBigUInt64LE(s.gdt.base, SREGS.gdt); buf.writeUInt16LE(s.gdt.limit, SREGS.gdt + 8);
  buf.writeBigUInt64LE(s.idt.base, SREGS.idt); buf.writeUInt16LE(s.idt.limit, SREGS.idt + 8);
  for (const name of CONTROL_NAMES) buf.writeBigUInt64LE(s[name], SREGS[name]);
  return buf;
}

export interface CpuidEntry {
  function: number;
  index: number;
  flags: number;
  eax: number;
  ebx: number;
  ecx: number;
  edx: number;
}

/** KVM_CPUID_FLAG_SIGNIFCANT_INDEX: the entry applies to one sub-leaf (`index`) only. */
export const CPUID_FLAG_SIGNIFICANT_INDEX = 1;

export function encodeCpuid2(entries: readonly CpuidEntry[]): Buffer {
  const buf = Buffer.alloc(8 + entries.length * SIZEOF.cpuidEntry2);
  buf.writeUInt32LE(entries.length, 0);
  entries.forEach((e, i) => {
    const o = 8 + i * SIZEOF.cpuidEntry2;
    buf.writeUInt32LE(e.function >>> 0, o);
    buf.writeUInt32LE(e.index >>> 0, o + 4);
    buf.writeUInt32LE(e.flags >>> 0, o + 8);
    buf.writeUInt32LE(e.eax >>> 0, o + 12);
    buf.writeUInt32LE(e.ebx >>> 0, o + 16);
    buf.writeUInt32LE(e.ecx >>> 0, o + 20);
    buf.writeUInt32LE(e.edx >>> 0, o + 24);
  });
  return buf;
}

export function decodeCpuid2(buf: Buffer): CpuidEntry[] {
  const n = buf.readUInt32LE(0);
  const out: CpuidEntry[] = [];
  for (let i = 0; i < n; i++) {
    const o = 8 + i * SIZEOF.cpuidEntry2;
    out.push({
      function: buf.readUInt32LE(o), index: buf.readUInt32LE(o + 4), flags: buf.readUInt32LE(o + 8),
      eax: buf.readUInt32LE(o + 12), ebx: buf.readUInt32LE(o + 16), ecx: buf.readUInt32LE(o + 20),
      edx: buf.readUInt32LE(o + 24),
    });
  }
  return out;
}

export interface MsrEntry {
  index: number;
  data: bigint;
}

export function encodeMsrs(entries: readonly MsrEntry[]): Buffer {
  const buf = Buffer.alloc(8 + entries.length * SIZEOF.msrEntry);
  buf.writeUInt32LE(entries.length, 0);
  entries.forEach((e, i) => {
    buf.writeUInt32LE(e.index >>> 0, 8 + i * 16);
    buf.writeBigUInt64LE(e.data, 8 + i * 16 + 8);
  });
  return buf;
}

export function decodeMsrs(buf: Buffer): MsrEntry[] {
  const n = buf.readUInt32LE(0);
  return Array.from({ length: n }, (_, i) => ({
    index: buf.readUInt32LE(8 + i * 16), data: buf.readBigUInt64LE(8 + i * 16 + 8),
  }));
}

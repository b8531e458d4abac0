// ACPI tables for the Unhalt board (docs/guest-contract.md): RSDP (rev 2) -> XSDT -> FADT,
// MADT; FADT -> FACS, DSDT. Linux finds its CPUs only through the MADT (Debian's kernel has
// no MP-table parser) and powers off through the FADT's PM1a control block and the DSDT's
// \_S5 package. One pure function lays everything out in one block placed at `baseAddress`
// (0xE0000: the legacy RSDP scan range, so guests given no rsdp_paddr find it too).

export interface AcpiOptions {
  /** Number of vCPUs, 1..255: APIC IDs 0..cpus-1 (xAPIC, no x2APIC entries needed). */
  cpus: number;
  /** Guest-physical address the returned bytes are copied to (16-byte aligned). */
  baseAddress: number;
  /** The PCI host bridge's 32-bit memory window (DSDT \_SB.PCI0._CRS); absent: no PCI0 (tests of the bare tables). */
  pciMmioWindow?: { base: number; size: number };
  /** The board has the ACPI PM timer (unhalt-1.2+): the FADT's PM_TMR_BLK points at it; absent: no PM timer. */
  pmTimer?: boolean;
}

export interface AcpiTables {
  bytes: Uint8Array;
  rsdpAddress: number;
  /** Where each table landed (guest-physical), for logs and tests. */
  tables: { signature: string; address: number; length: number }[];
}

export const LAPIC_ADDRESS = 0xfee00000;
export const IOAPIC_ADDRESS = 0xfec00000;
export const SCI_IRQ = 9;
export const PM1A_EVT_BLK = 0x600;
export const PM1A_CNT_BLK = 0x604;
export const PM_TMR_BLK = 0x608; // devices/pm-timer.ts
export const RESET_PORT = 0x64; // i8042 command port: 0xFE resets
export const RESET_VALUE = 0xfe;

const OEM_ID = 'UNHALT';
const OEM_TABLE_ID = 'UNHALT  ';
const CREATOR_ID = 'UHLT';
const HEADER = 36;
const BIOS_AREA_END = 0x100000;

/** Lays out all tables; throws if they would not fit below 1 MiB when placed there. */
export function buildAcpiTables(opts: AcpiOptions): AcpiTables {
  const { cpus, baseAddress } = opts;
  if (!Number.isInteger(cpus) || cpus < 1 || cpus > 255) throw new RangeError(`cpus must be 1..255, got ${cpus}`);
  if (!Number.isInteger(baseAddress) || baseAddress % 16 !== 0 || baseAddress < 0) {
    throw new RangeError('baseAddress must be 16-byte aligned');
  }

  const dsdt = buildDsdt(opts.pciMmioWindow);
  const madt = buildMadt(cpus);
  const facs = buildFacs();
  // Layout: RSDP first (the legacy scan looks at 16-byte boundaries), FACS 64-byte aligned.
  let at = 0;
  const place = (len: number, align: number): number => {
    const addr = alignUp(baseAddress + at, align);
    at = addr - baseAddress + len;
    return addr;
  };
  const rsdpAddr = place(36, 16);
  const facsAddr = place(facs.length, 64);
  const dsdtAddr = place(dsdt.length, 16);
  const fadtAddr = place(276, 16);
  const madtAddr = place(madt.length, 16);
  const xsdtAddr = place(HEADER + 8 * 2, 16);
  const fadt = buildFadt(facsAddr, dsdtAddr, opts.pmTimer === true);
  const xsdt = buildXsdt([fadtAddr, madtAddr]);
  const rsdp = buildRsdp(xsdtAddr);

  if (baseAddress < BIOS_AREA_END && baseAddress + at > BIOS_AREA_END) {
    throw new RangeError(`ACPI tables (${at} bytes) do not fit below 1 MiB`);
  }
  const bytes = new Uint8Array(at);
  const put = (table: Uint8Array, addr: number): void => bytes.set(table, addr - baseAddress);
  put(rsdp, rsdpAddr);
  put(facs, facsAddr);
  put(dsdt, dsdtAddr);
  put(fadt, fadtAddr);
  put(madt, madtAddr);
  put(xsdt, xsdtAddr);
  const tables = [
    { signature: 'RSD PTR ', address: rsdpAddr, length: rsdp.length },
    { signature: 'FACS', address: facsAddr, length: facs.length },
    { signature: 'DSDT', address: dsdtAddr, length: dsdt.length },
    { signature: 'FACP', address: fadtAddr, length: fadt.length },
    { signature: 'APIC', address: madtAddr, length: madt.length },
    { signature: 'XSDT', address: xsdtAddr, length: xsdt.length },
  ];
  return { bytes, rsdpAddress: rsdpAddr, tables };
}

// --- tables -------------------------------------------------------------------------------

function buildRsdp(xsdtAddr: number): Uint8Array {
  const t = new Table(36);
  t.ascii(0, 'RSD PTR ');
  t.ascii(9, OEM_ID);
  t.u8(15, 2); // revision 2: XSDT present
  t.u32(16, 0); // no RSDT: every ACPI 2+ OS uses the XSDT
  t.u32(20, 36);
  t.u64(24, xsdtAddr);
  t.u8(8, checksum(t.bytes.subarray(0, 20))); // ACPI 1.0 checksum covers the first 20 bytes
  t.u8(32, checksum(t.bytes));
  return t.bytes;
}

function buildXsdt(entries: number[]): Uint8Array {
  const t = new Table(HEADER + 8 * entries.length);
  entries.forEach((addr, i) => t.u64(HEADER + 8 * i, addr));
  return t.finish('XSDT', 1);
}

// FADT revision 6 (ACPI 6.3), 276 bytes, full (not hardware-reduced) fixed hardware.
// With `pmTimer` only PM_TMR_BLK, PM_TMR_LEN and X_PM_TMR_BLK differ: an older machine type's
// FADT is byte for byte what it always was (test/unit/acpi.test.ts holds its digest).
function buildFadt(facsAddr: number, dsdtAddr: number, pmTimer: boolean): Uint8Array {
  const t = new Table(276);
  t.u32(36, facsAddr); // FIRMWARE_CTRL (below 4 GiB, so the 32-bit field; X_ left 0)
  t.u32(40, dsdtAddr); // DSDT
  t.u8(44, 1); // was INT_MODEL: 1 = APIC, for ACPI 1.0 readers
  t.u8(45, 0); // Preferred_PM_Profile: unspecified
  t.u16(46, SCI_IRQ); // SCI_INT
  t.u32(48, 0); // SMI_CMD 0: no SMM, the machine is always in ACPI mode (SCI_EN reads 1)
  t.u32(56, PM1A_EVT_BLK);
  t.u32(64, PM1A_CNT_BLK);
  // PM_TMR_BLK: the PM timer where the board has one; else none (the guest uses TSC/LAPIC/kvmclock).
  t.u32(76, pmTimer ? PM_TMR_BLK : 0);
  t.u8(88, 4); // PM1_EVT_LEN
  t.u8(89, 2); // PM1_CNT_LEN
  if (pmTimer) t.u8(91, 4); // PM_TMR_LEN
  t.u16(96, 0x0fff); // P_LVL2_LAT > 100: C2 not supported
  t.u16(98, 0x0fff); // P_LVL3_LAT > 1000: C3 not supported
  // IAPC_BOOT_ARCH: LEGACY_DEVICES (ISA UARTs) | 8042 | VGA not present | CMOS RTC not present
  // (ports 0x70/0x71 are empty, so Linux must not register an RTC).
  t.u16(109, (1 << 0) | (1 << 1) | (1 << 2) | (1 << 5));
  // Flags: WBINVD | PROC_C1 (HLT) | PWR_BUTTON, SLP_BUTTON (none as fixed features) |
  // FIX_RTC (no RTC wake status) | RESET_REG_SUP | HEADLESS.
  t.u32(112, (1 << 0) | (1 << 2) | (1 << 4) | (1 << 5) | (1 << 6) | (1 << 10) | (1 << 12));
  t.gas(116, 1, 8, 1, RESET_PORT); // RESET_REG: system I/O 0x64, byte access
  t.u8(128, RESET_VALUE);
  t.u16(129, 0); // ARM_BOOT_ARCH
  t.u8(131, 3); // FADT minor version: 6.3
  t.u64(132, 0); // X_FIRMWARE_CTRL (FIRMWARE_CTRL is used)
  t.u64(140, dsdtAddr); // X_DSDT
  t.gas(148, 1, 32, 2, PM1A_EVT_BLK); // X_PM1a_EVT_BLK: two 16-bit registers
  t.gas(172, 1, 16, 2, PM1A_CNT_BLK); // X_PM1a_CNT_BLK
  if (pmTimer) t.gas(208, 1, 32, 3, PM_TMR_BLK); // X_PM_TMR_BLK: one 32-bit register (24 bits count: TMR_VAL_EXT clear)
  // X_PM1b_*, X_PM2_CNT, X_GPE0/1, SLEEP_CONTROL/STATUS, hypervisor id (and X_PM_TMR without a timer): 0.
  return t.finish('FACP', 6);
}

// FACS: required with non-hardware-reduced FADTs (no waking vector, no global lock in use).
function buildFacs(): Uint8Array {
  const t = new Table(64);
  t.ascii(0, 'FACS');
  t.u32(4, 64);
  t.u8(32, 2); // version
  return t.bytes; // the FACS has no checksum
}

function buildMadt(cpus: number): Uint8Array {
  const lapics = 8 * cpus;
  const t = new Table(HEADER + 8 + lapics + 12 + 10 * 2);
  t.u32(36, LAPIC_ADDRESS);
  t.u32(40, 1); // PCAT_COMPAT: dual 8259s present (KVM's in-kernel irqchip has them)
  let o = 44;
  for (let id = 0; id < cpus; id++, o += 8) {
    t.u8(o, 0); // Processor Local APIC
    t.u8(o + 1, 8);
    t.u8(o + 2, id); // ACPI processor UID
    t.u8(o + 3, id); // APIC ID
    t.u32(o + 4, 1); // enabled
  }
  t.u8(o, 1); // I/O APIC
  t.u8(o + 1, 12);
  t.u8(o + 2, cpus); // I/O APIC ID: the first ID after the CPUs'
  t.u32(o + 4, IOAPIC_ADDRESS);
  t.u32(o + 8, 0); // GSI base
  o += 12;
  o = interruptOverride(t, o, 0, 2, 0x0005); // PIT IRQ0 -> GSI2, edge, active high
  interruptOverride(t, o, SCI_IRQ, SCI_IRQ, 0x000d); // SCI: level, active high
  return t.finish('APIC', 5);
}

function interruptOverride(t: Table, o: number, irq: number, gsi: number, flags: number): number {
  t.u8(o, 2);
  t.u8(o + 1, 10);
  t.u8(o + 2, 0); // bus: ISA
  t.u8(o + 3, irq);
  t.u32(o + 4, gsi);
  t.u16(o + 8, flags);
  return o + 10;
}

// DSDT: Name (_S5, Package () { 5, 5, 0, 0 }) — SLP_TYPa, SLP_TYPb, reserved, reserved — and,
// with a PCI window, the PCI host bridge \_SB.PCI0 (pciHostBridge).
function buildDsdt(pciWindow?: { base: number; size: number }): Uint8Array {
  const aml = [
    ...amlName('_S5_', amlPackage([amlInteger(5), amlInteger(5), amlInteger(0), amlInteger(0)])),
    ...(pciWindow ? amlScope('\\_SB_', pciHostBridge(pciWindow)) : []),
  ];
  const t = new Table(HEADER + aml.length);
  t.bytes.set(aml, HEADER);
  return t.finish('DSDT', 2); // revision 2: 64-bit AML integers
}

/**
 * Device (PCI0): a PCI host bridge (PNP0A03, segment 0, bus 0) that Linux enumerates through
 * configuration mechanism #1 (ports 0xCF8-0xCFF, consumed here) with its windows in _CRS: bus
 * number 0, the I/O ports around the configuration ports, and the 32-bit memory window its BARs
 * are assigned in. No _PRT: the functions on it have no INTx pin (MSI-X only).
 */
function pciHostBridge(window: { base: number; size: number }): number[] {
  const crs = [
    ...wordAddress(2, 0, 0, 0, 1), // WordBusNumber 0..0
    0x47, 0x01, 0xf8, 0x0c, 0xf8, 0x0c, 0x01, 0x08, // IO (Decode16, 0xCF8, 0xCF8, 1, 8)
    ...wordAddress(1, 0x03, 0x0000, 0x0cf7, 0x0cf8), // WordIO 0x0000-0x0CF7, entire range
    ...wordAddress(1, 0x03, 0x0d00, 0xffff, 0xf300), // WordIO 0x0D00-0xFFFF
    ...dwordMemory(window.base, window.size),
    0x79, 0x00, // EndTag (checksum 0: not computed)
  ];
  return amlDevice('PCI0', [
    ...amlName('_HID', amlInteger(eisaId('PNP0A03'))),
    ...amlName('_UID', amlInteger(0)),
    ...amlName('_SEG', amlInteger(0)),
    ...amlName('_BBN', amlInteger(0)),
    ...amlName('_CRS', amlBuffer(crs)),
  ]);
}

// Word Address Space Descriptor (ACPI 6.4, 6.4.3.5.3): a producer with fixed minimum and maximum.
function wordAddress(type: number, typeFlags: number, min: number, max: number, length: number): number[] {
  const w = (v: number) => [v & 0xff, v >>> 8];
  return [0x88, 0x0d, 0x00, type, 0x0c, typeFlags, ...w(0), ...w(min), ...w(max), ...w(0), ...w(length)];
}

// DWord Address Space Descriptor, memory: producer, fixed, non-cacheable, read-write.
function dwordMemory(base: number, size: number): number[] {
  const d = (v: number) => [v & 0xff, (v >>> 8) & 0xff, (v >>> 16) & 0xff, v >>> 24];
  return [0x87, 0x17, 0x00, 0x00, 0x0c, 0x01, ...d(0), ...d(base), ...d(base + size - 1), ...d(0), ...d(size)];
}

/** EISA ID (e.g. "PNP0A03") as the DWORD that ASL's EisaId() makes. */
export function eisaId(id: string): number {
  if (!/^[A-Z]{3}[0-9A-F]{4}$/.test(id)) throw new RangeError(`bad EISA ID ${id}`);
  const c = (i: number) => id.charCodeAt(i) - 0x40;
  const b0 = (c(0) << 2) | (c(1) >>> 3);
  const b1 = ((c(1) & 7) << 5) | c(2);
  const product = parseInt(id.slice(3), 16);
  return (b0 | (b1 << 8) | ((product >>> 8) << 16) | ((product & 0xff) << 24)) >>> 0;
}

// --- AML encoding (ACPI spec, chapter 20) ---------------------------------------------------

const NAME_OP = 0x08;
const PACKAGE_OP = 0x12;
const ZERO_OP = 0x00;
const ONE_OP = 0x01;
const BYTE_PREFIX = 0x0a;
const WORD_PREFIX = 0x0b;
const DWORD_PREFIX = 0x0c;

export function amlInteger(v: number): number[] {
  if (!Number.isInteger(v) || v < 0 || v > 0xffffffff) throw new RangeError(`AML integer ${v}`);
  if (v === 0) return [ZERO_OP];
  if (v === 1) return [ONE_OP];
  if (v <= 0xff) return [BYTE_PREFIX, v];
  if (v <= 0xffff) return [WORD_PREFIX, v & 0xff, v >>> 8];
  return [DWORD_PREFIX, v & 0xff, (v >>> 8) & 0xff, (v >>> 16) & 0xff, v >>> 24];
}

/** PkgLength: the encoded length counts its own bytes too. */
export function amlPkgLength(contentLength: number): number[] {
  for (let n = 1; n <= 4; n++) {
    const total = contentLength + n;
    if (n === 1 && total <= 0x3f) return [total];
    if (n > 1 && total < 1 << (4 + 8 * (n - 1))) {
      const out = [((n - 1) << 6) | (total & 0x0f)];
      for (let i = 1; i < n; i++) out.push((total >>> (4 + 8 * (i - 1))) & 0xff);
      return out;
    }
  }
  throw new RangeError('AML package too long');
}

export function amlPackage(elements: number[][]): number[] {
  if (elements.length > 255) throw new RangeError('AML package has more than 255 elements');
  const body = [elements.length, ...elements.flat()];
  return [PACKAGE_OP, ...amlPkgLength(body.length), ...body];
}

const SCOPE_OP = 0x10;
const BUFFER_OP = 0x11;
const EXT_OP_PREFIX = 0x5b;
const DEVICE_OP = 0x82;

function nameSegBytes(nameSeg: string): number[] {
  if (!/^[A-Z_][A-Z0-9_]{3}$/.test(nameSeg)) throw new RangeError(`bad NameSeg ${nameSeg}`);
  return [...nameSeg].map((c) => c.charCodeAt(0));
}

/** Scope (\NAME) { body }: a root-relative name of one segment. */
export function amlScope(rootName: string, body: number[]): number[] {
  if (!rootName.startsWith('\\')) throw new RangeError('amlScope takes a root name (\\XXXX)');
  const content = [0x5c, ...nameSegBytes(rootName.slice(1)), ...body];
  return [SCOPE_OP, ...amlPkgLength(content.length), ...content];
}

export function amlDevice(nameSeg: string, body: number[]): number[] {
  const content = [...nameSegBytes(nameSeg), ...body];
  return [EXT_OP_PREFIX, DEVICE_OP, ...amlPkgLength(content.length), ...content];
}

export function amlBuffer(bytes: number[]): number[] {
  const content = [...amlInteger(bytes.length), ...bytes];
  return [BUFFER_OP, ...amlPkgLength(content.length), ...content];
}

export function amlName(nameSeg: string, value: number[]): number[] {
  if (!/^[A-Z_][A-Z0-9_]{3}$/.test(nameSeg)) throw new RangeError(`bad NameSeg ${nameSeg}`);
  return [NAME_OP, ...[...nameSeg].map((c) => c.charCodeAt(0)), ...value];
}

// --- byte helpers -----------------------------------------------------------------------------

export function checksum(bytes: Uint8Array): number {
  let sum = 0;
  for (const b of bytes) sum = (sum + b) & 0xff;
  return (0x100 - sum) & 0xff;
}

function alignUp(v: number, align: number): number {
  return Math.ceil(v / align) * align;
}

class Table {
  readonly bytes: Uint8Array;
  private readonly dv: DataView;

  constructor(length: number) {
    this.bytes = new Uint8Array(length);
    this.dv = new DataView(this.bytes.buffer);
  }

  u8(o: number, v: number): void {
    this.dv.setUint8(o, v);
  }

  u16(o: number, v: number): void {
    this.dv.setUint16(o, v, true);
  }

  u32(o: number, v: number): void {
    this.dv.setUint32(o, v, true);
  }

  u64(o: number, v: number): void {
    this.dv.setBigUint64(o, BigInt(v), true);
  }

  ascii(o: number, s: string): void {
    for (let i = 0; i < s.length; i++) this.bytes[o + i] = s.charCodeAt(i);
  }

  /** Generic Address Structure: space (1 = system I/O), bit width, access size, address. */
  gas(o: number, space: number, bitWidth: number, accessSize: number, address: number): void {
    this.u8(o, space);
    this.u8(o + 1, bitWidth);
    this.u8(o + 2, 0); // bit offset
    this.u8(o + 3, accessSize); // 1 byte, 2 word, 3 dword, 4 qword
    this.u64(o + 4, address);
  }

  /** Fills the standard header (OEM "UNHALT") and the checksum; returns the bytes. */
  finish(signature: string, revision: number): Uint8Array {
    this.ascii(0, signature);
    this.u32(4, this.bytes.length);
    this.u8(8, revision);
    this.ascii(10, OEM_ID);
    this.ascii(16, OEM_TABLE_ID);
    this.u32(24, 1); // OEM revision
    this.ascii(28, CREATOR_ID);
    this.u32(32, 1); // creator revision
    this.u8(9, 0);
    this.u8(9, checksum(this.bytes));
    return this.bytes;
  }
}

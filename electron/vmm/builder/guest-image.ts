// The guest's memory as it is at power-on, built without KVM: guest RAM allocated, the ACPI
// tables, the kernel (and initrd and command line) loaded by its boot protocol, the memory map.
// Nothing here opens /dev/kvm, so a unit test builds one and inspects it. The kernel's format is
// judged first, so a file that is no kernel is refused before anything is allocated.
import { type BootPlan } from '../boot/boot-plan.ts';
import { loadBzImage, parseSetupHeader } from '../boot/bzimage.ts';
import type { BootFiles } from '../boot/boot-files.ts';
import { describeUnknownKernel, detectKernelFormat } from '../boot/kernel-format.ts';
import { E820_RAM, E820_RESERVED, type E820Entry, LAYOUT } from '../boot/layout.ts';
import { loadMultiboot, planMultiboot } from '../boot/multiboot.ts';
import { loadPvh } from '../boot/pvh.ts';
import { buildAcpiTables, type AcpiTables } from '../firmware/acpi.ts';
import { PCI_MMIO_WINDOW } from '../devices/board.ts';
import { GuestMemory, HIGH_MEMORY_START, MiB } from '../memory/guest-memory.ts';
import type { MachineSpec } from '../machine-spec.ts';

export interface GuestImage {
  /** 'pvh': an ELF with a PVH entry note; 'bzimage': the Linux boot protocol; 'multiboot': v1, as QEMU's -kernel. */
  format: KernelLoader;
  memory: GuestMemory;
  /** How the boot CPU starts (mode, entry, registers). */
  boot: BootPlan;
  e820: E820Entry[];
  rsdpAddress: number;
}

type ImageSpec = Pick<MachineSpec, 'cpus' | 'memoryMiB' | 'kernelPath' | 'initrdPath' | 'cmdline' | 'board'>;
export type KernelLoader = 'pvh' | 'bzimage' | 'multiboot';

/** Judges the kernel's format, refusing what no loader takes (a bad bzImage or multiboot kernel included). */
export function kernelFormatOf(spec: Pick<MachineSpec, 'kernelPath'>, files: BootFiles): KernelLoader {
  const kernel = files.kernel.bytes;
  const format = detectKernelFormat(kernel);
  if (format === 'bzimage') parseSetupHeader(kernel, spec.kernelPath);
  if (format === 'unknown') throw new Error(`${spec.kernelPath}: ${describeUnknownKernel(kernel, files.kernel.fileSize)}`);
  if (format === 'multiboot') {
    try {
      planMultiboot(kernel);
    } catch (e) {
      throw new Error(`${spec.kernelPath}: ${(e as Error).message}`);
    }
  }
  return format === 'bzimage' || format === 'multiboot' ? format : 'pvh';
}

/**
 * Loads firmware tables and the kernel into guest RAM: `memory` if given (fresh, of the spec's
 * size: a VM shell's, builder/vm-shells.ts), else newly allocated.
 */
export function buildGuestImage(spec: ImageSpec, files: BootFiles, memory?: GuestMemory): GuestImage {
  const format = kernelFormatOf(spec, files);
  if (memory && memory.size !== spec.memoryMiB * MiB) throw new RangeError(`guest RAM of ${memory.size / MiB} MiB given for a ${spec.memoryMiB} MiB machine`);
  memory ??= new GuestMemory(spec.memoryMiB * MiB);
  const acpi = acpiTablesFor(spec.cpus, spec.board?.pmTimer === true);
  memory.write(LAYOUT.acpi, acpi.bytes);
  const e820 = memoryMap(memory);
  const input = { kernel: files.kernel.bytes, initrd: files.initrd, cmdline: spec.cmdline, rsdpAddress: acpi.rsdpAddress, e820 };
  const boot = format === 'bzimage' ? loadBzImage(memory, input)
    : format === 'multiboot' ? loadMultiboot(memory, { ...input, cmdline: multibootCmdline(spec), ...(spec.initrdPath ? { initrdName: spec.initrdPath } : {}) })
      : loadPvh(memory, input);
  memory.endLoading();
  return { format, memory, boot, e820, rsdpAddress: acpi.rsdpAddress };
}

/** What a multiboot kernel reads as its command line: its path, then the arguments, as QEMU gives them. */
export function multibootCmdline(spec: Pick<MachineSpec, 'kernelPath' | 'cmdline'>): string {
  return spec.cmdline ? `${spec.kernelPath} ${spec.cmdline}` : spec.kernelPath;
}

/**
 * The ACPI tables of a machine with `cpus` CPUs and (its version's board) a PM timer or not: the
 * same bytes for every start, so made once per CPU count and board.
 */
const acpiByBoard = new Map<string, AcpiTables>();
export function acpiTablesFor(cpus: number, pmTimer: boolean): AcpiTables {
  const key = `${cpus}/${pmTimer ? 'pm-timer' : '-'}`;
  let t = acpiByBoard.get(key);
  if (!t) {
    t = buildAcpiTables({ cpus, baseAddress: LAYOUT.acpi, pciMmioWindow: PCI_MMIO_WINDOW, ...(pmTimer ? { pmTimer } : {}) });
    acpiByBoard.set(key, t);
  }
  return t;
}

/** The guest's physical memory map (E820 / PVH memmap). */
export function memoryMap(mem: GuestMemory): E820Entry[] {
  const map: E820Entry[] = [
    { addr: 0, size: LAYOUT.lowEnd, type: E820_RAM },
    { addr: LAYOUT.acpi, size: LAYOUT.acpiEnd - LAYOUT.acpi, type: E820_RESERVED },
    { addr: LAYOUT.kernelMin, size: mem.lowMemoryEnd - LAYOUT.kernelMin, type: E820_RAM },
  ];
  const high = mem.regions[1];
  if (high) map.push({ addr: HIGH_MEMORY_START, size: high.size, type: E820_RAM });
  return map;
}

// Guest RAM: one JS-allocated SharedArrayBuffer shared with every vCPU worker and registered with
// KVM at a 2 MiB-aligned offset inside it. Never a koffi.view of mmap'd memory: Electron's V8
// memory cage forbids ArrayBuffers over foreign memory. The SAB must stay referenced for the VM's
// whole life (KVM keeps using the pages; if V8 frees them the guest reads freed memory).
import { extname } from 'node:path';
import { MADV_DONTNEED, MADV_HUGEPAGE, OsError, addressOf, libc } from '../../../native/kvm/libc.ts';
import type { LockRequest, LockResult } from './lock-worker.ts';
import type { GuestRamHandle } from '../devices/virtio/guest-ram.ts';

const LOCK_WORKER_URL = new URL(`./lock-worker${extname(new URL(import.meta.url).pathname)}`, import.meta.url);

export const MiB = 1024 * 1024;
export const GiB = 1024 * MiB;
const ALIGN = 2 * MiB;
/** Guest-physical hole below 4 GiB for the LAPIC, IOAPIC and other MMIO (as on a PC). */
export const MMIO_HOLE_START = 3 * GiB;
export const HIGH_MEMORY_START = 4 * GiB;

export interface RamRegion {
  slot: number;
  guestPhysAddr: number;
  size: number;
  /** Offset of the region inside `sab`. */
  offset: number;
  hostAddress: number;
}

export class GuestMemory {
  readonly size: number;
  readonly sab: SharedArrayBuffer;
  readonly regions: readonly RamRegion[];
  private readonly base: number;
  private readonly all: Uint8Array;
  private readonly view: DataView;
  private locked = false;
  /**
   * While the image is being loaded (until endLoading()): the byte ranges (offsets) written since
   * the allocation. A fresh SharedArrayBuffer reads as zero, so zeroing bytes nobody has written
   * is skipped: a kernel's BSS (1.3 MiB for the probe guest) then costs no page faults, and pages
   * the guest never touches take no host memory. Undefined afterwards: zeroing always writes.
   */
  private written?: [number, number][] = [];

  constructor(size: number) {
    if (!Number.isSafeInteger(size) || size <= 0 || size % MiB !== 0) {
      throw new RangeError(`guest memory must be a positive whole number of MiB, got ${size} bytes`);
    }
    this.size = size;
    try {
      this.sab = new SharedArrayBuffer(size + ALIGN);
    } catch {
      throw new RangeError(`cannot allocate ${size / MiB} MiB of guest memory on this host`);
    }
    const address = addressOf(this.sab);
    this.base = (ALIGN - (address % ALIGN)) % ALIGN;
    this.all = new Uint8Array(this.sab, this.base, size);
    this.view = new DataView(this.sab, this.base, size);
    const low = Math.min(size, MMIO_HOLE_START);
    const regions: RamRegion[] = [
      { slot: 0, guestPhysAddr: 0, size: low, offset: 0, hostAddress: address + this.base },
    ];
    if (size > low) {
      regions.push({
        slot: 1, guestPhysAddr: HIGH_MEMORY_START, size: size - low, offset: low,
        hostAddress: address + this.base + low,
      });
    }
    this.regions = regions;
    // Huge pages make guest page walks cheaper on real hardware; a refusal only costs speed.
    libc.madvise(address + this.base, size, MADV_HUGEPAGE);
  }

  /** Highest guest-physical address + 1 of RAM below the MMIO hole. */
  get lowMemoryEnd(): number {
    return this.regions[0]!.size;
  }

  private offsetOf(gpa: number, length: number): number {
    for (const r of this.regions) {
      if (gpa >= r.guestPhysAddr && gpa + length <= r.guestPhysAddr + r.size) return r.offset + (gpa - r.guestPhysAddr);
    }
    throw new RangeError(
      `guest address range 0x${gpa.toString(16)}+0x${length.toString(16)} is outside guest RAM`,
    );
  }

  /** What a device thread needs to reach guest RAM (plain data: postMessage-able; devices/virtio/guest-ram.ts). */
  ramHandle(): GuestRamHandle {
    // Another thread may write guest RAM from now on.
    this.written = undefined;
    return {
      sab: this.sab, base: this.base, size: this.size,
      ranges: this.regions.map((r) => ({ guestPhysAddr: r.guestPhysAddr, size: r.size, offset: r.offset })),
    };
  }

  /** A view of guest memory (no copy). Anything may be written through it: zeroing always writes from now on. */
  slice(gpa: number, length: number): Uint8Array {
    this.written = undefined;
    const off = this.offsetOf(gpa, length);
    return this.all.subarray(off, off + length);
  }

  /** The offset of [gpa, gpa + length), noted as written while the image loads. */
  private writing(gpa: number, length: number): number {
    const off = this.offsetOf(gpa, length);
    this.written?.push([off, off + length]);
    return off;
  }

  write(gpa: number, data: Uint8Array): void {
    this.all.set(data, this.writing(gpa, data.length));
  }

  writeString(gpa: number, text: string): number {
    const bytes = new TextEncoder().encode(`${text}\0`);
    this.write(gpa, bytes);
    return bytes.length;
  }

  read(gpa: number, length: number): Uint8Array {
    const off = this.offsetOf(gpa, length);
    return this.all.slice(off, off + length);
  }

  fill(gpa: number, length: number, value = 0): void {
    const off = this.offsetOf(gpa, length);
    // Still as allocated (all zero): nothing to write, and no page to fault in.
    if (value === 0 && this.written && !this.written.some(([a, b]) => a < off + length && off < b)) return;
    this.all.fill(value, off, off + length);
    this.written?.push([off, off + length]);
  }

  /** The image is loaded (the guest may run from now on): zeroing always writes. */
  endLoading(): void {
    this.written = undefined;
  }

  writeU16(gpa: number, value: number): void { this.view.setUint16(this.writing(gpa, 2), value, true); }
  writeU32(gpa: number, value: number): void { this.view.setUint32(this.writing(gpa, 4), value >>> 0, true); }
  writeU64(gpa: number, value: bigint | number): void {
    this.view.setBigUint64(this.writing(gpa, 8), BigInt(value), true);
  }
  readU32(gpa: number): number { return this.view.getUint32(this.offsetOf(gpa, 4), true); }
  readU64(gpa: number): bigint { return this.view.getBigUint64(this.offsetOf(gpa, 8), true); }

  /**
   * Locks guest RAM in host memory (mem-lock=on). Rejects with a clear error when refused. The
   * faulting-in and the mlock run on a worker thread (lock-worker.ts): they take seconds for
   * GiBs, and the calling thread must stay free to answer clients.
   */
  async lock(): Promise<void> {
    const request: LockRequest = {
      sab: this.sab,
      ranges: this.regions.map((r) => ({ address: r.hostAddress, size: r.size, offset: this.base + r.offset })),
    };
    const { Worker } = process.getBuiltinModule('node:worker_threads');
    const worker = new Worker(LOCK_WORKER_URL, { workerData: request, name: 'guest-ram-lock' });
    let answer: LockResult | undefined;
    worker.once('message', (m: LockResult) => { answer = m; });
    // Its answer comes before its exit; waiting for the exit leaves no thread behind.
    const result = await new Promise<LockResult>((resolve, reject) => {
      worker.once('error', reject);
      worker.once('exit', (code) => (answer ? resolve(answer) : reject(new Error(`the guest-memory lock thread exited (${code}) before answering`))));
    });
    if (result.errno) {
      throw new OsError(`locking ${this.size / MiB} MiB of guest memory (mlock)`, result.errno,
        'raise RLIMIT_MEMLOCK (ulimit -l) or grant CAP_IPC_LOCK, or turn mem-lock off');
    }
    this.locked = true;
  }

  unlock(): void {
    for (const r of this.regions) libc.munlock(r.hostAddress, r.size);
    this.locked = false;
  }

  get isLocked(): boolean {
    return this.locked;
  }

  /**
   * Gives guest RAM's pages back to the OS now (MADV_DONTNEED: they read as zero from then on),
   * for RAM no VM uses any more: the SAB itself is freed only when its last reference is
   * collected, which can be long after a VM stopped.
   */
  discard(): void {
    if (this.locked) this.unlock();
    libc.madvise(this.regions[0]!.hostAddress, this.size, MADV_DONTNEED);
  }
}

// Typed KVM handles in the shape of rust-vmm's kvm-ioctls: Kvm (the /dev/kvm fd) -> Vm -> Vcpu.
// Every failing ioctl throws a KvmError naming the ioctl and the errno.
import {
  CAP, IOCTL, IOEVENTFD_FLAG, KVM_API_VERSION, KVM_PIT_SPEAKER_DUMMY, RUN, SIZEOF,
  decodeCpuid2, decodeMsrs, decodeRegs, decodeSregs, encodeCpuid2, encodeMsrs, encodeRegs, encodeSregs,
  type CpuidEntry, type IoctlName, type MsrEntry, type Regs, type Sregs,
} from './abi.ts';
import {
  EAGAIN, EINTR, O_CLOEXEC, O_RDWR, OsError, describeErrno,
  callOffThread, closeFdInBackground, errno, libc,
} from './libc.ts';
import { createExitRecord, decodeExit, markInterrupted, type VcpuExit } from './exit-record.ts';
import { mapRunPage, unmapRunPage, type RunPage } from './run-page.ts';
import { ioctlStub, type IoctlStub } from './syscall-stub.ts';

export type { VcpuExit, VcpuExitKind } from './exit-record.ts';

export class KvmError extends OsError {
  readonly ioctl: string;
  constructor(ioctl: string, err: number, detail?: string) {
    super(ioctl, err, detail);
    this.name = 'KvmError';
    this.ioctl = ioctl;
  }
}

function check(name: IoctlName, ret: number): number {
  if (ret < 0) throw new KvmError(name, errno());
  return ret;
}

function ioctlInt(fd: number, name: IoctlName, arg = 0): number {
  return check(name, libc.ioctlInt(fd, IOCTL[name], arg));
}

function ioctlBuf(fd: number, name: IoctlName, buf: Buffer): number {
  return check(name, libc.ioctlBuf(fd, IOCTL[name], buf));
}

/** ioctlInt / ioctlBuf on the thread pool: for set-up ioctls that can sleep in the kernel. */
async function ioctlIntOffThread(fd: number, name: IoctlName, arg = 0): Promise<number> {
  const { ret, err } = await callOffThread(libc.ioctlInt, fd, IOCTL[name], arg);
  if (ret < 0) throw new KvmError(name, err);
  return ret;
}

async function ioctlBufOffThread(fd: number, name: IoctlName, buf: Buffer): Promise<number> {
  const { ret, err } = await callOffThread(libc.ioctlBuf, fd, IOCTL[name], buf);
  if (ret < 0) throw new KvmError(name, err);
  return ret;
}

export const DEFAULT_KVM_DEVICE = '/dev/kvm';

export function kvmDevicePath(): string {
  return process.env.UNHALT_KVM_DEVICE || DEFAULT_KVM_DEVICE;
}

export class Kvm {
  readonly fd: number;
  readonly path: string;

  private constructor(fd: number, path: string) {
    this.fd = fd;
    this.path = path;
  }

  /** Opens the KVM device (UNHALT_KVM_DEVICE overrides /dev/kvm) and checks the API version. */
  static open(path = kvmDevicePath()): Kvm {
    const fd = libc.open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0) {
      const err = errno();
      throw new OsError(`open ${path}`, err, kvmOpenHint(err, path));
    }
    const kvm = new Kvm(fd, path);
    let version: number;
    try {
      version = kvm.apiVersion();
    } catch (e) {
      kvm.close();
      if (e instanceof KvmError) throw new KvmError('KVM_GET_API_VERSION', e.errno, `${path} is not a KVM device`);
      throw e;
    }
    if (version !== KVM_API_VERSION) {
      kvm.close();
      throw new Error(`${path}: unsupported KVM API version ${version} (expected ${KVM_API_VERSION})`);
    }
    return kvm;
  }

  apiVersion(): number {
    return ioctlInt(this.fd, 'KVM_GET_API_VERSION');
  }

  checkExtension(cap: number): number {
    return ioctlInt(this.fd, 'KVM_CHECK_EXTENSION', cap);
  }

  vcpuMmapSize(): number {
    return ioctlInt(this.fd, 'KVM_GET_VCPU_MMAP_SIZE');
  }

  /** The largest vCPU count KVM allows in one VM. */
  maxVcpus(): number {
    return this.checkExtension(CAP.MAX_VCPUS) || this.checkExtension(CAP.NR_VCPUS) || 4;
  }

  supportedCpuid(): CpuidEntry[] {
    for (let nent = 128; nent <= 4096; nent *= 2) {
      const buf = Buffer.alloc(8 + nent * SIZEOF.cpuidEntry2);
      buf.writeUInt32LE(nent, 0);
      const ret = libc.ioctlBuf(this.fd, IOCTL.KVM_GET_SUPPORTED_CPUID, buf);
      if (ret >= 0) return decodeCpuid2(buf);
      const err = errno();
      if (err !== 7 /* E2BIG */) throw new KvmError('KVM_GET_SUPPORTED_CPUID', err);
    }
    throw new KvmError('KVM_GET_SUPPORTED_CPUID', 7);
  }

  createVm(): Vm {
    let fd = -1;
    for (let attempt = 0; attempt < 10 && fd < 0; attempt++) {
      fd = libc.ioctlInt(this.fd, IOCTL.KVM_CREATE_VM, 0);
      if (fd < 0 && errno() !== EINTR) break; // EINTR: a signal arrived while KVM set the VM up
    }
    return new Vm(check('KVM_CREATE_VM', fd), this.vcpuMmapSize());
  }

  close(): void {
    libc.close(this.fd);
  }
}

function kvmOpenHint(err: number, path: string): string {
  if (path !== DEFAULT_KVM_DEVICE && process.env.UNHALT_KVM_DEVICE === path) {
    if (err === 2) return 'UNHALT_KVM_DEVICE names a path that does not exist: point it at a KVM device, or unset it to use /dev/kvm';
    if (err === 21) return 'UNHALT_KVM_DEVICE names a directory, not a KVM device: point it at a KVM device, or unset it to use /dev/kvm';
  }
  if (err === 21) return 'a directory, not a KVM device';
  if (err === 2) return 'no KVM device there (`unhalt doctor` says why and what to do)';
  if (err === 13 || err === 1) return 'no permission (`unhalt doctor` names the group to join)';
  return 'cannot open the KVM device';
}

export interface MemoryRegion {
  slot: number;
  flags?: number;
  guestPhysAddr: number;
  memorySize: number;
  userspaceAddr: number;
}

function encodeMemoryRegion(region: MemoryRegion): Buffer {
  const buf = Buffer.alloc(SIZEOF.userspaceMemoryRegion);
  buf.writeUInt32LE(region.slot, 0);
  buf.writeUInt32LE(region.flags ?? 0, 4);
  buf.writeBigUInt64LE(BigInt(region.guestPhysAddr), 8);
  buf.writeBigUInt64LE(BigInt(region.memorySize), 16);
  buf.writeBigUInt64LE(BigInt(region.userspaceAddr), 24);
  return buf;
}

export class Vm {
  readonly fd: number;
  readonly vcpuMmapSize: number;

  constructor(fd: number, vcpuMmapSize: number) {
    this.fd = fd;
    this.vcpuMmapSize = vcpuMmapSize;
  }

  checkExtension(cap: number): number {
    return ioctlInt(this.fd, 'KVM_CHECK_EXTENSION', cap);
  }

  setTssAddr(addr: number): void {
    ioctlInt(this.fd, 'KVM_SET_TSS_ADDR', addr);
  }

  setIdentityMapAddr(addr: number): void {
    const buf = Buffer.alloc(8);
    buf.writeBigUInt64LE(BigInt(addr));
    ioctlBuf(this.fd, 'KVM_SET_IDENTITY_MAP_ADDR', buf);
  }

  createIrqchip(): void {
    ioctlInt(this.fd, 'KVM_CREATE_IRQCHIP');
  }

  createPit2(flags = KVM_PIT_SPEAKER_DUMMY): void {
    const buf = Buffer.alloc(SIZEOF.pitConfig);
    buf.writeUInt32LE(flags, 0);
    ioctlBuf(this.fd, 'KVM_CREATE_PIT2', buf);
  }

  setUserMemoryRegion(region: MemoryRegion): void {
    ioctlBuf(this.fd, 'KVM_SET_USER_MEMORY_REGION', encodeMemoryRegion(region));
  }

  /**
   * The VM's set-up ioctls, each on the thread pool. KVM_CREATE_IRQCHIP, KVM_CREATE_PIT2,
   * KVM_SET_TSS_ADDR and KVM_SET_USER_MEMORY_REGION change the VM's I/O buses or memory slots
   * and wait in the kernel for an SRCU grace period: tens to hundreds of ms on a loaded host,
   * which the main thread (it answers every client) must not spend blocked.
   */
  async setUpOffThread(opts: { tssAddr: number; identityMapAddr: number; regions: readonly MemoryRegion[] }): Promise<void> {
    await ioctlIntOffThread(this.fd, 'KVM_SET_TSS_ADDR', opts.tssAddr);
    const idmap = Buffer.alloc(8);
    idmap.writeBigUInt64LE(BigInt(opts.identityMapAddr));
    await ioctlBufOffThread(this.fd, 'KVM_SET_IDENTITY_MAP_ADDR', idmap);
    await ioctlIntOffThread(this.fd, 'KVM_CREATE_IRQCHIP');
    const pit = Buffer.alloc(SIZEOF.pitConfig);
    pit.writeUInt32LE(KVM_PIT_SPEAKER_DUMMY, 0);
    await ioctlBufOffThread(this.fd, 'KVM_CREATE_PIT2', pit);
    for (const region of opts.regions) await ioctlBufOffThread(this.fd, 'KVM_SET_USER_MEMORY_REGION', encodeMemoryRegion(region));
  }

  /** Enables a VM capability; args are up to four 64-bit values. */
  enableCap(cap: number, args: readonly (number | bigint)[] = []): void {
    const buf = Buffer.alloc(SIZEOF.enableCap);
    buf.writeUInt32LE(cap, 0);
    args.slice(0, 4).forEach((a, i) => buf.writeBigUInt64LE(BigInt(a), 8 + i * 8));
    ioctlBuf(this.fd, 'KVM_ENABLE_CAP', buf);
  }

  /** KVM_GET_STATS_FD on the VM (needs KVM_CAP_BINARY_STATS_FD). */
  statsFd(): number {
    return ioctlInt(this.fd, 'KVM_GET_STATS_FD');
  }

  /** The guest's kvm-clock, ns (KVM_GET_CLOCK; needs KVM_CAP_ADJUST_CLOCK). */
  getClock(): bigint {
    const buf = Buffer.alloc(SIZEOF.clockData);
    ioctlBuf(this.fd, 'KVM_GET_CLOCK', buf);
    return buf.readBigUInt64LE(0);
  }

  /** Sets the guest's kvm-clock to `ns` (KVM_SET_CLOCK, no flags: every vCPU's clock follows). */
  setClock(ns: bigint): void {
    const buf = Buffer.alloc(SIZEOF.clockData);
    buf.writeBigUInt64LE(ns, 0);
    ioctlBuf(this.fd, 'KVM_SET_CLOCK', buf);
  }

  createVcpu(id: number): Vcpu {
    const fd = ioctlInt(this.fd, 'KVM_CREATE_VCPU', id);
    let run: RunPage;
    try {
      run = mapRunPage(fd, this.vcpuMmapSize);
    } catch (e) {
      libc.close(fd);
      throw e;
    }
    return new Vcpu({ fd, id, run }, true);
  }

  close(): void {
    libc.close(this.fd);
  }

  /** close() off this thread: the kernel destroys the VM when its last fd goes (closeFdInBackground). */
  closeInBackground(): Promise<void> {
    return closeFdInBackground(this.fd);
  }
}

/** Drives one interrupt line; usable from any thread given the VM fd. */
export class IrqLine {
  private readonly buf = Buffer.alloc(SIZEOF.irqLevel);
  private readonly vmFd: number;
  constructor(vmFd: number) {
    this.vmFd = vmFd;
  }
  set(irq: number, level: boolean): void {
    this.buf.writeUInt32LE(irq, 0);
    this.buf.writeUInt32LE(level ? 1 : 0, 4);
    ioctlBuf(this.vmFd, 'KVM_IRQ_LINE', this.buf);
  }
}

/**
 * Injects MSIs (KVM_SIGNAL_MSI) into the in-kernel irqchip; usable from any thread given the VM
 * fd (an I/O thread signals its device's MSI-X vectors with it). One reused buffer per instance.
 */
export class MsiSignal {
  private readonly buf = Buffer.alloc(SIZEOF.msi);
  private readonly vmFd: number;
  constructor(vmFd: number) {
    this.vmFd = vmFd;
  }
  /**
   * Returns whether a LAPIC took the interrupt. Never throws for the message itself: the address
   * and data are the guest's (an MSI-X entry it programmed), and one naming no CPU (KVM answers -1
   * or 0) is the guest's own lost interrupt, not the VMM's failure.
   */
  signal(address: number, data: number): boolean {
    this.buf.writeUInt32LE(address % 0x1_0000_0000 >>> 0, 0);
    this.buf.writeUInt32LE(Math.floor(address / 0x1_0000_0000) >>> 0, 4);
    this.buf.writeUInt32LE(data >>> 0, 8);
    this.buf.writeUInt32LE(0, 12); // flags: no device id (not needed with the x86 irqchip)
    return libc.ioctlBuf(this.vmFd, IOCTL.KVM_SIGNAL_MSI, this.buf) > 0;
  }
}

export interface IoEventFd {
  /** Guest-physical address (MMIO) or port (with pio). */
  address: number;
  /** Width of the write that triggers it: 1, 2, 4, 8, or 0 for any (KVM_CAP_IOEVENTFD_ANY_LENGTH). */
  length: number;
  /** The eventfd KVM signals. */
  fd: number;
  pio?: boolean;
  /** Only a write of this value triggers it. */
  datamatch?: number;
}

/**
 * Assigns (or, with deassign, removes) an ioeventfd: a guest write to the address then signals
 * the eventfd inside KVM, without an exit to userspace. A VM ioctl: any thread may call it.
 */
export function setIoEventFd(vmFd: number, e: IoEventFd, deassign = false): void {
  const buf = Buffer.alloc(SIZEOF.ioeventfd);
  buf.writeBigUInt64LE(BigInt(e.datamatch ?? 0), 0);
  buf.writeBigUInt64LE(BigInt(e.address), 8);
  buf.writeUInt32LE(e.length, 16);
  buf.writeInt32LE(e.fd, 20);
  let flags = 0;
  if (e.datamatch !== undefined) flags |= IOEVENTFD_FLAG.DATAMATCH;
  if (e.pio) flags |= IOEVENTFD_FLAG.PIO;
  if (deassign) flags |= IOEVENTFD_FLAG.DEASSIGN;
  buf.writeUInt32LE(flags, 24);
  ioctlBuf(vmFd, 'KVM_IOEVENTFD', buf);
}

/** What a worker thread needs to drive a vCPU created elsewhere (plain data: postMessage-able). */
export interface VcpuHandle {
  fd: number;
  id: number;
  /** kvm_run, mapped into a SharedArrayBuffer every thread can read (run-page.ts). */
  run: RunPage;
}

export class Vcpu {
  readonly fd: number;
  readonly id: number;
  private readonly runPage: RunPage;
  private readonly owner: boolean;
  /** kvm_run itself (run-page.ts): read and written in place, no copy per exit. */
  private readonly runBytes: Uint8Array;
  private readonly runView: DataView;
  private readonly regsBuf = Buffer.alloc(SIZEOF.regs);
  private readonly sregsBuf = Buffer.alloc(SIZEOF.sregs);
  /** Where in kvm_run the pending in-data must be written back before the next KVM_RUN (0 = none). */
  private pendingInOffset = 0;
  /** This thread's KVM_RUN (made on the first run()): the result or -errno. */
  private enter?: () => number;
  private stub?: IoctlStub;
  readonly exit: VcpuExit;

  constructor(handle: VcpuHandle, owner = false) {
    this.fd = handle.fd;
    this.id = handle.id;
    this.runPage = handle.run;
    this.owner = owner;
    this.runBytes = new Uint8Array(handle.run.sab, handle.run.offset, handle.run.size);
    this.runView = new DataView(handle.run.sab, handle.run.offset, handle.run.size);
    this.exit = createExitRecord();
  }

  handle(): VcpuHandle {
    return { fd: this.fd, id: this.id, run: this.runPage };
  }

  getRegs(): Regs {
    ioctlBuf(this.fd, 'KVM_GET_REGS', this.regsBuf);
    return decodeRegs(this.regsBuf);
  }

  setRegs(regs: Regs): void {
    ioctlBuf(this.fd, 'KVM_SET_REGS', encodeRegs(regs, this.regsBuf));
  }

  getSregs(): Sregs {
    ioctlBuf(this.fd, 'KVM_GET_SREGS', this.sregsBuf);
    return decodeSregs(this.sregsBuf);
  }

  setSregs(sregs: Sregs): void {
    ioctlBuf(this.fd, 'KVM_GET_SREGS', this.sregsBuf); // keep the interrupt bitmap
    ioctlBuf(this.fd, 'KVM_SET_SREGS', encodeSregs(sregs, this.sregsBuf));
  }

  getFpu(): Buffer {
    const buf = Buffer.alloc(SIZEOF.fpu);
    ioctlBuf(this.fd, 'KVM_GET_FPU', buf);
    return buf;
  }

  setFpu(buf: Buffer): void {
    ioctlBuf(this.fd, 'KVM_SET_FPU', buf);
  }

  /** Sets x87 control word and MXCSR to their reset values (as Firecracker and kvmtool do). */
  resetFpu(): void {
    const buf = Buffer.alloc(SIZEOF.fpu);
    buf.writeUInt16LE(0x37f, 128); // fcw
    buf.writeUInt32LE(0x1f80, 408); // mxcsr
    this.setFpu(buf);
  }

  getLapic(): Buffer {
    const buf = Buffer.alloc(SIZEOF.lapic);
    ioctlBuf(this.fd, 'KVM_GET_LAPIC', buf);
    return buf;
  }

  setLapic(buf: Buffer): void {
    ioctlBuf(this.fd, 'KVM_SET_LAPIC', buf);
  }

  setCpuid2(entries: readonly CpuidEntry[]): void {
    ioctlBuf(this.fd, 'KVM_SET_CPUID2', encodeCpuid2(entries));
  }

  setMsrs(entries: readonly MsrEntry[]): void {
    const n = ioctlBuf(this.fd, 'KVM_SET_MSRS', encodeMsrs(entries));
    if (n !== entries.length) {
      const bad = entries[n];
      throw new KvmError('KVM_SET_MSRS', 22, `MSR 0x${bad?.index.toString(16)} was refused`);
    }
  }

  getMsrs(indices: readonly number[]): MsrEntry[] {
    const buf = encodeMsrs(indices.map((index) => ({ index, data: 0n })));
    const n = ioctlBuf(this.fd, 'KVM_GET_MSRS', buf);
    return decodeMsrs(buf).slice(0, n);
  }

  getMpState(): number {
    const buf = Buffer.alloc(4);
    ioctlBuf(this.fd, 'KVM_GET_MP_STATE', buf);
    return buf.readUInt32LE(0);
  }

  tscKhz(): number {
    return ioctlInt(this.fd, 'KVM_GET_TSC_KHZ');
  }

  statsFd(): number {
    return ioctlInt(this.fd, 'KVM_GET_STATS_FD');
  }

  /**
   * KVM_KVMCLOCK_CTRL, on the vCPU's own thread while it is out of KVM_RUN (a vCPU ioctl waits for
   * the vCPU): tells the guest the host stopped this vCPU, so its soft-lockup watchdog does not
   * take a pause for a hang. A hint only: where it fails (the guest has not enabled kvm-clock on
   * this vCPU, EINVAL; an older KVM) there is nothing to tell, and nothing else to do.
   */
  kvmclockStopped(): void {
    libc.ioctlInt(this.fd, IOCTL.KVM_KVMCLOCK_CTRL, 0);
  }

  /** Sets or clears kvm_run.immediate_exit (one half of a kick; a signal is the other). */
  setImmediateExit(on: boolean): void {
    // Another thread (a kick) may set it: an atomic store, seen by the vCPU's next KVM_RUN.
    Atomics.store(this.runBytes, RUN.immediateExit, on ? 1 : 0);
  }

  /**
   * Enters the guest until the next userspace exit and decodes it into `this.exit` (decodeExit).
   * A signal (kick) makes it return kind 'intr' rather than throwing.
   */
  run(): VcpuExit {
    const exit = this.exit;
    const run = this.runBytes;
    if (this.pendingInOffset !== 0) this.commitPendingIn();
    const ret = (this.enter ??= this.makeEnter())();
    if (ret < 0) {
      const err = -ret;
      // EINTR: a kick. EAGAIN: an AP still waiting for its SIPI woke up; just enter again.
      if (err === EINTR || err === EAGAIN) {
        markInterrupted(exit);
        return exit;
      }
      throw new KvmError('KVM_RUN', err);
    }
    decodeExit(this.runView, exit);
    // PIO data lives outside the header: copy it in now, or back before the next entry.
    const kind = exit.kind;
    if (kind === 'io-out') copyBytes(run, exit.dataOffset, exit.data, 0, exit.dataLength);
    else if (kind === 'io-in' || kind === 'mmio-read') this.pendingInOffset = exit.dataOffset;
    return exit;
  }

  /**
   * Writes the data of the last port or MMIO read back into kvm_run now rather than at the next
   * run(): after this, everything KVM needs to resume the vCPU is in kvm_run and the kernel, so
   * another thread (another Vcpu over the same handle) may run it next.
   */
  commitPendingIn(): void {
    if (this.pendingInOffset === 0) return;
    copyBytes(this.exit.data, 0, this.runBytes, this.pendingInOffset, this.exit.dataLength);
    this.pendingInOffset = 0;
  }

  /**
   * KVM_RUN as a stub of no arguments where the host allows one (syscall-stub.ts: a quarter of
   * an exit's user-space time less), else the ordinary ioctl binding. UNHALT_KVM_RUN_STUB=0
   * forces the binding (to compare the two, or to rule the stub out).
   */
  private makeEnter(): () => number {
    if (process.env.UNHALT_KVM_RUN_STUB !== '0') this.stub = ioctlStub(this.fd, IOCTL.KVM_RUN);
    const stub = this.stub;
    if (stub) {
      const { call, result } = stub;
      return () => {
        call();
        return result[0]!;
      };
    }
    const fd = this.fd;
    return () => {
      const ret = libc.ioctlInt(fd, IOCTL.KVM_RUN, 0);
      return ret < 0 ? -errno() : ret;
    };
  }

  /**
   * Releases this thread's KVM_RUN stub; on the creating side also the kvm_run mapping and the
   * fd (only it owns them). No run() after this.
   */
  close(): void {
    this.enter = undefined;
    this.stub?.release();
    this.stub = undefined;
    if (!this.owner) return;
    unmapRunPage(this.runPage);
    libc.close(this.fd);
  }
}

/** Copies `length` bytes: a loop for the 1-4 bytes of a port access (no view object per exit). */
function copyBytes(from: Uint8Array, fromOffset: number, to: Uint8Array, toOffset: number, length: number): void {
  if (length <= 16) {
    for (let i = 0; i < length; i++) to[toOffset + i] = from[fromOffset + i]!;
  } else {
    to.set(from.subarray(fromOffset, fromOffset + length), toOffset);
  }
}

export { describeErrno };

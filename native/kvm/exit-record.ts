// The decoded form of one KVM exit (rust-vmm kvm-ioctls' `VcpuExit`, one record for every
// reason) and its decoder. Pure: it reads the bytes of a struct kvm_run header and touches
// neither KVM nor libc, so an exit record built by hand (a test's, or one no host can be made to
// produce) decodes exactly as a real one does. Vcpu.run calls decodeExit on the mapped kvm_run
// in place (a DataView over the run page's SharedArrayBuffer: no copy crosses the FFI); only the
// copies of PIO data, which lies outside the header, are its own.
import { EXIT, KVM_EXIT_IO_IN, RUN } from './abi.ts';

export type VcpuExitKind =
  | 'io-in' | 'io-out' | 'mmio-read' | 'mmio-write' | 'hlt' | 'shutdown' | 'fail-entry'
  | 'internal-error' | 'system-event' | 'intr' | 'other';

/** The largest PIO or MMIO payload one exit carries here (a `rep ins`/`outs` is cut to this). */
export const EXIT_DATA_BYTES = 4096;

/**
 * One exit record, reused across exits so the exit path allocates nothing. For io-in and
 * mmio-read the handler fills `data[0..dataLength)`; the next run() hands it back to KVM
 * (kvm-ioctls' `&mut data`).
 */
export interface VcpuExit {
  kind: VcpuExitKind;
  reason: number;
  port: number;
  size: number;
  count: number;
  address: number;
  data: Uint8Array;
  dataLength: number;
  /**
   * io-in / io-out: where the payload sits inside the kvm_run mapping (kvm_run.io.data_offset);
   * mmio-read / mmio-write: RUN.mmioData. The caller copies it in (io-out) or back (io-in,
   * mmio-read); decodeExit copies nothing that lies outside the header.
   */
  dataOffset: number;
  /** fail-entry: hardware reason; internal-error: suberror; system-event: type. */
  code: number;
  /** fail-entry: the CPU; internal-error / system-event: the extra data words. */
  extra: bigint[];
}

export function createExitRecord(data = new Uint8Array(EXIT_DATA_BYTES)): VcpuExit {
  return {
    kind: 'other', reason: 0, port: 0, size: 0, count: 0, address: 0,
    data, dataLength: 0, dataOffset: 0, code: 0, extra: [],
  };
}

/** The record of a KVM_RUN that a signal interrupted (EINTR) or an AP's wake-up cut short (EAGAIN). */
export function markInterrupted(exit: VcpuExit): void {
  exit.kind = 'intr';
  exit.reason = EXIT.INTR;
}

/**
 * Decodes the kvm_run header `h` (at least RUN.headerBytes long) into `exit`. MMIO write data
 * lies inside the header and is copied here; PIO data does not (see VcpuExit.dataOffset).
 * The exits that come by the thousand (PIO, MMIO) first, the rest in functions of their own, so
 * that this stays small enough for the JIT to inline into the exit loop.
 */
export function decodeExit(h: DataView, exit: VcpuExit): void {
  const reason = h.getUint32(RUN.exitReason, true);
  exit.reason = reason;
  if (reason === EXIT.IO) {
    const size = h.getUint8(RUN.ioSize);
    const count = h.getUint32(RUN.ioCount, true);
    exit.port = h.getUint16(RUN.ioPort, true);
    exit.size = size;
    exit.count = count;
    exit.dataLength = Math.min(size * count, EXIT_DATA_BYTES);
    // Two 32-bit reads: a BigInt per exit would allocate on the hot path.
    exit.dataOffset = h.getUint32(RUN.ioDataOffset, true) + h.getUint32(RUN.ioDataOffset + 4, true) * 2 ** 32;
    exit.kind = h.getUint8(RUN.ioDirection) === KVM_EXIT_IO_IN ? 'io-in' : 'io-out';
  } else if (reason === EXIT.MMIO) {
    decodeMmio(h, exit);
  } else {
    decodeOtherExit(h, exit, reason);
  }
}

function decodeMmio(h: DataView, exit: VcpuExit): void {
  // Two 32-bit reads, as for PIO's data offset (guest-physical addresses are below 2^52).
  exit.address = h.getUint32(RUN.mmioPhysAddr, true) + h.getUint32(RUN.mmioPhysAddr + 4, true) * 2 ** 32;
  const length = Math.min(h.getUint32(RUN.mmioLen, true), 8);
  exit.dataLength = length;
  exit.size = length;
  exit.dataOffset = RUN.mmioData;
  if (h.getUint8(RUN.mmioIsWrite)) {
    exit.kind = 'mmio-write';
    for (let i = 0; i < length; i++) exit.data[i] = h.getUint8(RUN.mmioData + i);
  } else {
    exit.kind = 'mmio-read';
  }
}

function decodeOtherExit(h: DataView, exit: VcpuExit, reason: number): void {
  switch (reason) {
    case EXIT.HLT: exit.kind = 'hlt'; break;
    case EXIT.SHUTDOWN: exit.kind = 'shutdown'; break;
    case EXIT.INTR: exit.kind = 'intr'; break;
    // The exits below end the VM: allocating for them is fine.
    case EXIT.FAIL_ENTRY:
      exit.kind = 'fail-entry';
      exit.code = Number(h.getBigUint64(RUN.failReason, true));
      exit.extra = [BigInt(h.getUint32(RUN.failCpu, true))];
      break;
    case EXIT.INTERNAL_ERROR:
      exit.kind = 'internal-error';
      exit.code = h.getUint32(RUN.internalSuberror, true);
      exit.extra = dataWords(h, RUN.internalNdata, RUN.internalData);
      break;
    case EXIT.SYSTEM_EVENT:
      exit.kind = 'system-event';
      exit.code = h.getUint32(RUN.systemEventType, true);
      exit.extra = dataWords(h, RUN.systemEventNdata, RUN.internalData);
      break;
    default: exit.kind = 'other';
  }
}

/** Up to 16 u64 words after a u32 count (kvm_run.internal / system_event), bounded by the header. */
function dataWords(h: DataView, countAt: number, dataAt: number): bigint[] {
  const room = Math.floor((h.byteLength - dataAt) / 8);
  const n = Math.min(h.getUint32(countAt, true), 16, room);
  return Array.from({ length: n }, (_, i) => h.getBigUint64(dataAt + i * 8, true));
}

/**
 * Decodes a whole kvm_run image held in memory (the header and, for PIO, the data page after it)
 * the way Vcpu.run decodes the mapped one: for tests and for records no host can be made to
 * write. Returns the record; an io-out's payload is copied into `exit.data`.
 */
export function decodeKvmRunImage(image: Uint8Array, exit = createExitRecord()): VcpuExit {
  decodeExit(new DataView(image.buffer, image.byteOffset, image.byteLength), exit);
  if (exit.kind === 'io-out') exit.data.set(image.subarray(exit.dataOffset, exit.dataOffset + exit.dataLength));
  return exit;
}

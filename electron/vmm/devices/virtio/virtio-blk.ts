// virtio-blk (virtio 1.2, 5.2: block device, type 2) over a raw image file: one request queue;
// each chain is a request — a 16-byte header (type, reserved, sector) in device-readable bytes,
// then data (device-readable for a write, device-writable for a read), then one device-writable
// status byte. The chain is taken as the spec lays it out, as byte streams, with no assumption
// about where descriptors split it (a modern device has no framing rules).
//
// File I/O goes straight between the image and guest RAM: pread/pwrite at the guest-RAM
// SharedArrayBuffer's own addresses (no copy), on the I/O thread. FLUSH is fdatasync, so what
// the guest flushed survives the VMM's death (test/kvm/virtio-blk.test.ts kills it). DISCARD
// punches holes (fallocate PUNCH_HOLE | KEEP_SIZE), offered only where the file system can.
// A snapshot=on disk (disk-overlay.ts) reads each granule from its overlay or its image, writes
// only the overlay, and answers FLUSH at once: nothing it holds is meant to outlive the VM.
//
// What a guest can get wrong, and what it gets:
// - a chain with no room for the header or no device-writable byte for the status: no status
//   can be reported, so the device needs a reset (DEVICE_NEEDS_RESET, as QEMU's "missing
//   headers" does);
// - a read or write whose data is no whole number of sectors, that runs past the capacity, or
//   that is larger than MAX_REQUEST_BYTES; a write or discard on a read-only disk (never touching
//   the file); a discard of a bad range; a failed host call: VIRTIO_BLK_S_IOERR;
// - a request type the device does not implement, discard flags it does not know:
//   VIRTIO_BLK_S_UNSUPP.
import type { DiskBackend } from './disk-image.ts';
import { DISK_ID_BYTES, SECTOR_BYTES } from './disk-image.ts';
import { OverlayMap } from './disk-overlay.ts';
import { ramAddressOnce, type GuestRam } from './guest-ram.ts';
import type { Chain } from './virtqueue.ts';
import { SERVE_NEEDS_RESET, type VirtioDeviceType } from './virtio-device-type.ts';

export const VIRTIO_ID_BLOCK = 2;
export const BLK_QUEUE_SIZE = 256;

export const BLK_T = Object.freeze({ in: 0, out: 1, flush: 4, getId: 8, getLifetime: 10, discard: 11, writeZeroes: 13, secureErase: 14 });
export const BLK_S = Object.freeze({ ok: 0, ioerr: 1, unsupp: 2 });
export const BLK_F = Object.freeze({ sizeMax: 1, segMax: 2, ro: 5, blkSize: 6, flush: 9, discard: 13 });

/** Segments a driver may chain for data (QEMU's rule: the queue size less header and status). */
export const BLK_SEG_MAX = BLK_QUEUE_SIZE - 2;
/** Bytes of data one request may move; a larger one gets IOERR (it would hold the I/O thread). */
export const MAX_REQUEST_BYTES = 32 * 1024 * 1024;
export const MAX_DISCARD_SEGMENTS = 32;
/** Sectors one discard segment may cover (the config's max_discard_sectors). */
export const MAX_DISCARD_SECTORS = 0x3fffff;
const HEADER_BYTES = 16;
const DISCARD_SEGMENT_BYTES = 16;
const DISCARD_F_UNMAP = 1;
/** Bytes of device configuration exposed (capacity .. max_discard_seg + discard_sector_alignment). */
export const BLK_CONFIG_BYTES = 48;

/** Per-disk counters, in shared Float64 slots (bytes overflow 32 bits). */
export const BLK_STAT = Object.freeze({ reads: 0, writes: 1, bytesRead: 2, bytesWritten: 3, flushes: 4, discards: 5, getIds: 6, ioErrors: 7, unsupported: 8 });
export const BLK_STAT_SLOTS = 9;
const STAT_NAMES = Object.keys(BLK_STAT) as (keyof typeof BLK_STAT)[];

/** The shape of every virtio-blk function (board.ts sizes its state with it). */
export const VIRTIO_BLK_SHAPE = Object.freeze({ type: VIRTIO_ID_BLOCK, queues: 1, maxQueueSize: BLK_QUEUE_SIZE });

/** The file calls a back end makes: libc through koffi in the VMM (loaded lazily, only on the I/O thread). */
export interface BlkFileIo {
  preadAddress(fd: number, address: number, length: number, offset: number): number;
  pwriteAddress(fd: number, address: number, length: number, offset: number): number;
  fdatasync(fd: number): number;
  punchHole(fd: number, offset: number, length: number): number;
  /** Address of guest RAM's first byte. */
  ramAddress(ram: GuestRam): number;
}

/** The device configuration (5.2.4) as bytes: constant for a disk's life. */
export function blkConfigBytes(disk: Pick<DiskBackend, 'sizeBytes' | 'discard'>): Uint8Array {
  const b = new Uint8Array(BLK_CONFIG_BYTES);
  const v = new DataView(b.buffer);
  const sectors = Math.floor(disk.sizeBytes / SECTOR_BYTES);
  v.setUint32(0, sectors % 0x1_0000_0000, true); // capacity, in 512-byte sectors
  v.setUint32(4, Math.floor(sectors / 0x1_0000_0000), true);
  v.setUint32(12, BLK_SEG_MAX, true);
  v.setUint32(20, SECTOR_BYTES, true); // blk_size
  v.setUint16(34, 1, true); // num_queues (only meaningful with MQ; said anyway)
  if (disk.discard) {
    v.setUint32(36, MAX_DISCARD_SECTORS, true);
    v.setUint32(40, MAX_DISCARD_SEGMENTS, true);
    v.setUint32(44, 1, true); // discard_sector_alignment, in sectors
  }
  return b;
}

export function blkFeatures(disk: Pick<DiskBackend, 'readonly' | 'discard'>): bigint {
  let f = (1n << BigInt(BLK_F.segMax)) | (1n << BigInt(BLK_F.blkSize)) | (1n << BigInt(BLK_F.flush));
  if (disk.readonly) f |= 1n << BigInt(BLK_F.ro);
  if (disk.discard) f |= 1n << BigInt(BLK_F.discard);
  return f;
}

/**
 * One disk's device type. `stats`: its BLK_STAT_SLOTS shared counters. `io`: the file calls
 * (only the I/O thread serves, so only it needs them).
 */
export function virtioBlkType(disk: DiskBackend, stats: Float64Array, io?: BlkFileIo): VirtioDeviceType {
  const config = blkConfigBytes(disk);
  const configView = new DataView(config.buffer);
  const server = io ? new BlkServer(disk, stats, io) : undefined;
  return Object.freeze({
    ...VIRTIO_BLK_SHAPE,
    name: 'virtio-blk',
    features: blkFeatures(disk),
    classCode: 0x010000, // mass storage (SCSI subclass, prog-if 0): what QEMU's virtio-blk-pci says
    configBytes: BLK_CONFIG_BYTES,
    // pread/pwrite/fdatasync with the bus lock released: a flush must not hold up the vCPUs' UARTs.
    servesUnlocked: true,
    readConfig(offset: number, size: number): number {
      if (offset + size > BLK_CONFIG_BYTES) return 0;
      return size === 1 ? configView.getUint8(offset) : size === 2 ? configView.getUint16(offset, true) : configView.getUint32(offset, true);
    },
    serve(_queue: number, chain: Chain, ram: GuestRam): number {
      if (!server) throw new Error('virtio-blk is served on the I/O thread only');
      return server.serve(chain, ram);
    },
    counters(): Record<string, number> {
      return Object.fromEntries(STAT_NAMES.map((k) => [k, stats[BLK_STAT[k]]!]));
    },
  });
}

/** The request side of one disk: parses a chain, does its I/O, writes the status. */
export class BlkServer {
  private readonly disk: DiskBackend;
  private readonly stats: Float64Array;
  private readonly io: BlkFileIo;
  private readonly header = new Uint8Array(HEADER_BYTES);
  private readonly headerView = new DataView(this.header.buffer);
  private readonly segment = new Uint8Array(DISCARD_SEGMENT_BYTES * MAX_DISCARD_SEGMENTS);
  private readonly segmentView = new DataView(this.segment.buffer);
  /** Guest RAM's address for the request being served (io_ hands the file calls raw addresses). */
  private ramBase = -1;
  private readonly ramAddress: (ram: GuestRam) => number;
  /** snapshot=on: the granules the overlay holds (disk-overlay.ts). */
  private readonly overlay: OverlayMap | undefined;

  constructor(disk: DiskBackend, stats: Float64Array, io: BlkFileIo) {
    this.disk = disk;
    this.stats = stats;
    this.io = io;
    this.ramAddress = ramAddressOnce((ram) => io.ramAddress(ram));
    this.overlay = disk.overlay ? new OverlayMap(disk.overlay, disk.fd, disk.sizeBytes) : undefined;
  }

  /** Serves one chain; the used length (data written + the status byte), or SERVE_NEEDS_RESET. */
  serve(chain: Chain, ram: GuestRam): number {
    let readable = 0;
    let writable = 0;
    for (let i = 0; i < chain.count; i++) {
      if (chain.writable[i]) writable += chain.length[i]!;
      else readable += chain.length[i]!;
    }
    // Without a header or a status byte nothing can be answered: the driver is broken.
    if (readable < HEADER_BYTES || writable < 1) return SERVE_NEEDS_RESET;
    this.ramBase = this.ramAddress(ram);
    gather(chain, ram, false, 0, this.header, HEADER_BYTES);
    const type = this.headerView.getUint32(0, true);
    const sector = Number(this.headerView.getBigUint64(8, true));
    const dataIn = writable - 1; // device-writable bytes before the status byte
    const dataOut = readable - HEADER_BYTES;
    let status: number = BLK_S.ok;
    let written = 0;
    switch (type) {
      case BLK_T.in:
        status = this.transfer(chain, sector, dataIn, false);
        if (status === BLK_S.ok) written = dataIn;
        break;
      case BLK_T.out:
        status = this.disk.readonly ? BLK_S.ioerr : this.transfer(chain, sector, dataOut, true);
        break;
      case BLK_T.flush:
        this.stats[BLK_STAT.flushes]!++;
        // Read-only: nothing to sync. A snapshot: its overlay dies with the VM, so syncing buys nothing.
        if (!this.disk.readonly && !this.overlay && this.io.fdatasync(this.disk.fd) !== 0) status = BLK_S.ioerr;
        break;
      case BLK_T.getId: {
        const n = Math.min(dataIn, DISK_ID_BYTES);
        const id = new Uint8Array(DISK_ID_BYTES);
        new TextEncoder().encodeInto(this.disk.serial, id);
        scatter(chain, ram, 0, id, n);
        written = n;
        this.stats[BLK_STAT.getIds]!++;
        break;
      }
      case BLK_T.discard:
        status = !this.disk.discard ? BLK_S.unsupp : this.disk.readonly ? BLK_S.ioerr : this.discard(chain, ram, dataOut);
        break;
      default:
        status = BLK_S.unsupp;
    }
    if (status === BLK_S.ioerr) this.stats[BLK_STAT.ioErrors]!++;
    else if (status === BLK_S.unsupp) this.stats[BLK_STAT.unsupported]!++;
    // The status is the last device-writable byte.
    this.setStatus(chain, ram, status);
    return written + 1;
  }

  private setStatus(chain: Chain, ram: GuestRam, status: number): void {
    for (let i = chain.count - 1; i >= 0; i--) {
      if (chain.writable[i] && chain.length[i]! > 0) {
        ram.bytes[chain.offset[i]! + chain.length[i]! - 1] = status;
        return;
      }
    }
  }

  /** Checks a data range against the disk; the sectors' byte offset, or -1. */
  private range(sector: number, bytes: number): number {
    if (bytes % SECTOR_BYTES !== 0 || bytes > MAX_REQUEST_BYTES || !Number.isSafeInteger(sector * SECTOR_BYTES)) return -1;
    const at = sector * SECTOR_BYTES;
    return at + bytes <= this.disk.sizeBytes ? at : -1;
  }

  /** A read (file -> the writable data bytes) or a write (the readable data bytes -> file). */
  private transfer(chain: Chain, sector: number, bytes: number, toFile: boolean): number {
    let at = this.range(sector, bytes);
    if (at < 0) return BLK_S.ioerr;
    // Walk the data bytes: for a write the readable buffers after the header, for a read the
    // writable buffers before the status byte.
    let skip = toFile ? HEADER_BYTES : 0;
    let left = bytes;
    for (let i = 0; i < chain.count && left > 0; i++) {
      if ((chain.writable[i] === 1) === toFile) continue;
      let len = chain.length[i]!;
      let off = chain.offset[i]!;
      if (skip >= len) { skip -= len; continue; }
      off += skip;
      len -= skip;
      skip = 0;
      const n = Math.min(len, left);
      if (!this.io_(toFile, off, n, at)) return BLK_S.ioerr;
      at += n;
      left -= n;
    }
    if (toFile) {
      this.stats[BLK_STAT.writes]!++;
      this.stats[BLK_STAT.bytesWritten]! += bytes;
    } else {
      this.stats[BLK_STAT.reads]!++;
      this.stats[BLK_STAT.bytesRead]! += bytes;
    }
    return BLK_S.ok;
  }

  /** n bytes between RAM offset `off` and disk offset `at`: the image, or a snapshot's overlay over it. */
  private io_(toFile: boolean, off: number, n: number, at: number): boolean {
    const ov = this.overlay;
    if (!ov || n === 0) return this.file(this.disk.fd, toFile, off, n, at);
    if (toFile) {
      if (!ov.prepareWrite(at, n) || !this.file(ov.fd, true, off, n, at)) return false;
      ov.markWritten(at, n);
      return true;
    }
    // A read: each run of granules from wherever it is held.
    while (n > 0) {
      const k = ov.runLength(at, n);
      if (!this.file(ov.holds(at) ? ov.fd : this.disk.fd, false, off, k, at)) return false;
      off += k;
      at += k;
      n -= k;
    }
    return true;
  }

  /** pread/pwrite of n bytes at RAM offset `off`, file offset `at` of `fd`, retried until done. */
  private file(fd: number, toFile: boolean, off: number, n: number, at: number): boolean {
    while (n > 0) {
      const r = toFile
        ? this.io.pwriteAddress(fd, this.ramBase + off, n, at)
        : this.io.preadAddress(fd, this.ramBase + off, n, at);
      if (r <= 0) return false; // an error, or the file shrank under us (EOF)
      off += r;
      at += r;
      n -= r;
    }
    return true;
  }

  private discard(chain: Chain, ram: GuestRam, bytes: number): number {
    if (bytes === 0 || bytes % DISCARD_SEGMENT_BYTES !== 0 || bytes > this.segment.length) return BLK_S.ioerr;
    gather(chain, ram, false, HEADER_BYTES, this.segment, bytes);
    const v = this.segmentView;
    // Check every segment before punching any: a bad one fails the whole request untouched.
    for (let s = 0; s < bytes; s += DISCARD_SEGMENT_BYTES) {
      const flags = v.getUint32(s + 12, true);
      if ((flags & ~DISCARD_F_UNMAP) !== 0) return BLK_S.unsupp;
      const count = v.getUint32(s + 8, true);
      if (count > MAX_DISCARD_SECTORS || this.range(Number(v.getBigUint64(s, true)), count * SECTOR_BYTES) < 0) return BLK_S.ioerr;
    }
    for (let s = 0; s < bytes; s += DISCARD_SEGMENT_BYTES) {
      const count = v.getUint32(s + 8, true);
      if (count === 0) continue;
      if (this.io.punchHole(this.disk.fd, Number(v.getBigUint64(s, true)) * SECTOR_BYTES, count * SECTOR_BYTES) !== 0) return BLK_S.ioerr;
    }
    this.stats[BLK_STAT.discards]!++;
    return BLK_S.ok;
  }
}

/** Copies `n` bytes of the chain's readable (or writable) stream, from `start`, into `dst`. */
function gather(chain: Chain, ram: GuestRam, writable: boolean, start: number, dst: Uint8Array, n: number): void {
  let skip = start;
  let got = 0;
  for (let i = 0; i < chain.count && got < n; i++) {
    if ((chain.writable[i] === 1) !== writable) continue;
    const len = chain.length[i]!;
    if (skip >= len) { skip -= len; continue; }
    const k = Math.min(len - skip, n - got);
    const off = chain.offset[i]! + skip;
    dst.set(ram.bytes.subarray(off, off + k), got);
    got += k;
    skip = 0;
  }
}

/** Copies `n` bytes of `src` into the chain's writable stream from `start`. */
function scatter(chain: Chain, ram: GuestRam, start: number, src: Uint8Array, n: number): void {
  let skip = start;
  let put = 0;
  for (let i = 0; i < chain.count && put < n; i++) {
    if (!chain.writable[i]) continue;
    const len = chain.length[i]!;
    if (skip >= len) { skip -= len; continue; }
    const k = Math.min(len - skip, n - put);
    ram.bytes.set(src.subarray(put, put + k), chain.offset[i]! + skip);
    put += k;
    skip = 0;
  }
}

// snapshot=on (QEMU's name and meaning): the guest writes as to any disk, but its writes land in a
// throwaway overlay and the image is never written (disk-image.ts opens it O_RDONLY, so nothing
// in this process can). Two halves, one module:
//
// - createOverlay (main thread, at build time, with the disk's open): an unnamed file in the
//   overlay folder (O_TMPFILE: it never has a name, so it vanishes when its fd closes, however the
//   process dies; where the file system lacks O_TMPFILE, a named file unlinked at once), as large
//   as the image and sparse, so it costs only what the guest writes. Not memory: a guest may write
//   gigabytes, and a file system holds them where a heap would not. The folder is QEMU's for its
//   own snapshot overlays: $TMPDIR, else /var/tmp (not /tmp, often a tmpfs in RAM). One granule is
//   allocated and given back at once, so a full file system fails the start in one line rather than
//   the guest's first write.
// - OverlayMap (the I/O thread, in BlkServer): a bitmap of the granules the overlay holds, in a
//   SharedArrayBuffer made with the overlay so that it lives as long as the file it describes
//   (not as long as a thread). A read takes each granule from the overlay or the image; a write
//   that covers a granule only in part first copies the image's granule up (copyUp), so a held
//   granule is always whole in the overlay. Granules are 64 KiB (qcow2's default cluster, what
//   QEMU's snapshot overlay uses): the bitmap of a 1 TiB image is 2 MiB, where per-sector bits
//   would be 256 MiB, at the price of a copy of up to 64 KiB on a granule's first partial write.
import { closeSync, ftruncateSync, openSync, readSync, unlinkSync, writeSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { FALLOC_FL_KEEP_SIZE, FALLOC_FL_PUNCH_HOLE, errno, libc } from '../../../../native/kvm/libc.ts';

export const OVERLAY_GRANULE = 64 * 1024;

/** O_TMPFILE on Linux (__O_TMPFILE | O_DIRECTORY); node's fs.constants does not name it. */
const O_TMPFILE = 0o20200000;
const O_RDWR = 2;
/** With O_TMPFILE: the file may never be linked into the file system (linkat refused). */
const O_EXCL = 0o200;
const EOPNOTSUPP = 95;

/** The overlay as a disk's back end carries it: plain data, so it crosses to the I/O thread. */
export interface DiskOverlay {
  fd: number;
  /** Bytes per bit of `held`: OVERLAY_GRANULE (a test may take smaller ones, to cross many with a small image). */
  granule: number;
  /** One bit per granule of the image: set once the overlay holds that granule whole. */
  held: SharedArrayBuffer;
}

/** Where overlays go: QEMU's choice for its snapshot=on overlays ($TMPDIR, else /var/tmp). */
export function overlayFolder(): string {
  return process.env.TMPDIR || '/var/tmp';
}

/**
 * A new, empty overlay for an image of `sizeBytes`; throws an Error whose message is the reason
 * (the caller prefixes the disk). Nothing is left behind on any failure: the file has no name.
 */
export function createOverlay(sizeBytes: number, granule = OVERLAY_GRANULE): DiskOverlay {
  const dir = overlayFolder();
  const fd = openUnnamed(dir);
  try {
    ftruncateSync(fd, sizeBytes);
    // A full file system: the guest's first write would fail with IOERR; refuse the start instead.
    const probe = Math.min(granule, sizeBytes);
    // (A file system without fallocate is not judged: EOPNOTSUPP.)
    if (libc.fallocate(fd, 0, 0, probe) === 0) libc.fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, probe);
    else if (errno() !== EOPNOTSUPP) throw new Error(`has no room in ${dir} (${errnoName(errno())}); set TMPDIR to a folder with room`);
  } catch (e) {
    closeSync(fd);
    const code = (e as NodeJS.ErrnoException).code;
    throw code ? new Error(`cannot be sized in ${dir} (${code}); set TMPDIR to a folder with room`) : e;
  }
  return { fd, granule, held: new SharedArrayBuffer(Math.ceil(Math.ceil(sizeBytes / granule) / 8)) };
}

function openUnnamed(dir: string): number {
  try {
    return openSync(dir, O_RDWR | O_TMPFILE | O_EXCL, 0o600);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    // EOPNOTSUPP: a file system without O_TMPFILE (EISDIR: a kernel that does not know the flag).
    if (code !== 'EOPNOTSUPP' && code !== 'EISDIR') throw new Error(`cannot be made in ${dir} (${code ?? (e as Error).message}); set TMPDIR to a writable folder with room`);
  }
  const name = join(dir, `unhalt-overlay-${process.pid}-${randomBytes(6).toString('hex')}`);
  let fd: number;
  try {
    fd = openSync(name, 'wx+', 0o600);
  } catch (e) {
    throw new Error(`cannot be made in ${dir} (${(e as NodeJS.ErrnoException).code ?? (e as Error).message}); set TMPDIR to a writable folder with room`);
  }
  unlinkSync(name); // at once: from here on it is as unnamed as an O_TMPFILE one
  return fd;
}

function errnoName(err: number): string {
  return err === 28 ? 'ENOSPC' : err === 122 ? 'EDQUOT' : err === 95 ? 'EOPNOTSUPP' : `errno ${err}`;
}

/** The I/O thread's view of one overlay: which granules it holds, and making a granule whole. */
export class OverlayMap {
  readonly fd: number;
  private readonly baseFd: number;
  private readonly sizeBytes: number;
  private readonly bits: Uint8Array;
  private readonly granule: number;
  /** One granule of the image on its way up (copyUp): allocated once, not per request. */
  private readonly bounce: Buffer;

  constructor(overlay: DiskOverlay, baseFd: number, sizeBytes: number) {
    this.fd = overlay.fd;
    this.baseFd = baseFd;
    this.sizeBytes = sizeBytes;
    this.granule = overlay.granule;
    this.bits = new Uint8Array(overlay.held);
    this.bounce = Buffer.alloc(overlay.granule);
  }

  /** Whether the overlay holds the byte at disk offset `at` (its granule, whole). */
  holds(at: number): boolean {
    const g = Math.floor(at / this.granule);
    return (this.bits[g >>> 3]! & (1 << (g & 7))) !== 0;
  }

  private mark(g: number): void {
    this.bits[g >>> 3]! |= 1 << (g & 7);
  }

  /** Bytes from `at` (at most n) that one file serves: up to the next granule held differently. */
  runLength(at: number, n: number): number {
    const held = this.holds(at);
    let end = (Math.floor(at / this.granule) + 1) * this.granule;
    while (end < at + n && this.holds(end) === held) end += this.granule;
    return Math.min(end, at + n) - at;
  }

  /**
   * Before the guest's bytes [at, at+n) go to the overlay: the granules at either end that the
   * write covers only in part are copied up from the image, so what the write leaves of them
   * stays the image's. False if a host call failed (the request's IOERR).
   */
  prepareWrite(at: number, n: number): boolean {
    const first = Math.floor(at / this.granule);
    const last = Math.floor((at + n - 1) / this.granule);
    return this.copyUpPartial(first, at, n) && (last === first || this.copyUpPartial(last, at, n));
  }

  /** After the write landed: every granule it touched is the overlay's (the partial ones were copied up). */
  markWritten(at: number, n: number): void {
    const last = Math.floor((at + n - 1) / this.granule);
    for (let g = Math.floor(at / this.granule); g <= last; g++) this.mark(g);
  }

  private copyUpPartial(g: number, at: number, n: number): boolean {
    const start = g * this.granule;
    const end = Math.min(start + this.granule, this.sizeBytes); // the image's last granule may be short
    if (this.holds(start) || (at <= start && at + n >= end)) return true;
    try {
      const len = end - start;
      for (let got = 0; got < len;) {
        const r = readSync(this.baseFd, this.bounce, got, len - got, start + got);
        if (r <= 0) return false; // the image shrank under us
        got += r;
      }
      for (let put = 0; put < len;) put += writeSync(this.fd, this.bounce, put, len - put, start + put);
    } catch {
      return false; // ENOSPC in the overlay's folder, EIO: the guest gets IOERR, as from a full disk
    }
    this.mark(g);
    return true;
  }
}

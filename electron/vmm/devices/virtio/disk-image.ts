// Disk images: the one place that decides whether a file may back a virtio-blk disk, and that
// holds it while a VM uses it. Raw images only. Everything a user can get wrong is refused with
// one line (ConfigError) before anything starts: a missing or unreadable file, a directory or
// device node, a qcow2 (with the `qemu-img convert` command that makes it raw), a size that is no
// whole number of sectors, a read-write disk on a file that may not be written, and a file another
// VM holds.
//
// The hold is an flock(2) on the open image, as QEMU's image locking does: exclusive for a
// read-write disk, shared for readonly=on and snapshot=on (several readers, no writer: a
// snapshot's image is only read, and must not change under its overlay). The kernel drops it when
// the fd closes or the process dies however it dies (SIGKILL included), so a crashed VMM never
// leaves a disk locked. A snapshot=on disk's image is opened O_RDONLY; its writes go to an overlay
// (disk-overlay.ts) made here with the open. A refusal names the holder: a VM of this process by its name, another
// process by its pid and command line (from /proc/locks, which lists flock holders by pid).
import { closeSync, fstatSync, ftruncateSync, openSync, readFileSync, readSync, statSync, unlinkSync, type Stats } from 'node:fs';
import { basename } from 'node:path';
import { EAGAIN, FALLOC_FL_KEEP_SIZE, FALLOC_FL_PUNCH_HOLE, LOCK_EX, LOCK_NB, LOCK_SH, errno, libc } from '../../../../native/kvm/libc.ts';
import { ConfigError, checkDisk, integer } from '../../config/vm-config.ts';
import { shownPath } from '../../config/shown-path.ts';
import { createOverlay, type DiskOverlay } from './disk-overlay.ts';

export const SECTOR_BYTES = 512;
/** qcow2's magic, "QFI\xfb", at offset 0. */
const QCOW2_MAGIC = 0x514649fb;
/** VIRTIO_BLK_ID_BYTES: the serial GET_ID returns. */
export const DISK_ID_BYTES = 20;

/** A disk as a machine spec lists it (config/resolve.ts fills it from VmConfig.disks). */
export interface DiskSpec {
  path: string;
  /** The guest may not write (readonly=on, with or without snapshot=on: diskMode). */
  readonly: boolean;
  /** snapshot=on (and not readonly): the guest's writes go to a throwaway overlay. */
  snapshot?: boolean;
}

/** The image itself is only read: a read-only disk, or a snapshot's base. */
const imageReadOnly = (d: DiskSpec) => d.readonly || d.snapshot === true;
/** What the lock table and the refusals call a disk's use of its image. */
const useOf = (d: DiskSpec) => (d.readonly ? 'read-only' : d.snapshot ? 'snapshot' : 'read-write');

/** What the I/O thread's back end needs: plain data (the fd is process-wide). */
export interface DiskBackend {
  fd: number;
  sizeBytes: number;
  readonly: boolean;
  /** The file system punches holes (fallocate PUNCH_HOLE): VIRTIO_BLK_F_DISCARD is offered. */
  discard: boolean;
  /** GET_ID's answer (at most DISK_ID_BYTES bytes). */
  serial: string;
  /** snapshot=on: where the guest's writes go (fd is then the image, opened O_RDONLY). */
  overlay?: DiskOverlay;
}

function fail(path: string, why: string): never {
  throw new ConfigError(`disk ${shownPath(path)}: ${why}`);
}

const shellQuote = (s: string) => (/^[A-Za-z0-9_./=:+-]+$/.test(s) ? s : `'${s.replace(/'/g, `'\\''`)}'`);

/** Where a qcow2 image's raw copy goes: beside it, `.qcow2` replaced by `.raw`. */
export function qcow2RawPath(path: string): string {
  return `${path.replace(/\.qcow2?$/i, '')}.raw`;
}

/** The command that turns a qcow2 image into the raw image a disk needs (the app runs the same: disk-conversion.ts). */
export function qcow2ConvertCommand(path: string): string {
  return `qemu-img convert -f qcow2 -O raw ${shellQuote(path)} ${shellQuote(qcow2RawPath(path))}`;
}

/** Whether the file at `path` starts with qcow2's magic (the caller has checked it is a readable file). */
export function isQcow2(path: string): boolean {
  const fd = openSync(path, 'r');
  try {
    const head = Buffer.alloc(4);
    return readSync(fd, head, 0, 4, 0) === 4 && head.readUInt32BE(0) === QCOW2_MAGIC;
  } finally {
    closeSync(fd);
  }
}

function statImage(path: string): Stats {
  let st: Stats;
  try {
    st = statSync(path);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') fail(path, 'no such file');
    if (code === 'EACCES') fail(path, 'cannot be read (permission denied on the path)');
    if (code === 'ENOTDIR') fail(path, 'no such file (a part of the path is not a directory)');
    fail(path, `cannot be read (${code ?? (e as Error).message})`);
  }
  if (st.isDirectory()) fail(path, 'is a directory, not an image file');
  if (st.isBlockDevice() || st.isCharacterDevice()) fail(path, 'is a device node; give a raw image file');
  if (!st.isFile()) fail(path, 'is not a regular file; give a raw image file');
  return st;
}

function mayRead(path: string): boolean {
  try {
    closeSync(openSync(path, 'r'));
    return true;
  } catch {
    return false;
  }
}

function openImage(path: string, readonly: boolean): number {
  try {
    return openSync(path, readonly ? 'r' : 'r+');
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    // readonly=on is the way out only for a file that may be read: say so only then.
    if (!readonly && (code === 'EACCES' || code === 'EPERM' || code === 'EROFS') && mayRead(path)) {
      fail(path, `may not be written (${code}); add readonly=on to use it read-only, or snapshot=on to throw the guest's writes away`);
    }
    if (code === 'EACCES' || code === 'EPERM') fail(path, `cannot be read (${code})`);
    fail(path, `cannot be opened (${code ?? (e as Error).message})`);
  }
}

/** The checks of the image's content: not qcow2, a whole number of sectors. */
function checkContent(path: string, fd: number, size: number): void {
  const head = Buffer.alloc(4);
  const n = readSync(fd, head, 0, 4, 0);
  if (n === 4 && head.readUInt32BE(0) === QCOW2_MAGIC) {
    fail(path, `is a qcow2 image; disks are raw images: convert it with ${qcow2ConvertCommand(path)}`);
  }
  if (size === 0) fail(path, 'is empty (0 bytes); a disk needs at least one 512-byte sector');
  if (size % SECTOR_BYTES !== 0) fail(path, `is ${size} bytes, not a whole number of ${SECTOR_BYTES}-byte sectors`);
}

/**
 * Everything that can be checked without holding the image (resolve.ts: `--dry-run` and every
 * start see the same refusals). The lock is taken by OpenDisk.open, at build time.
 */
export function checkDiskImage(disk: DiskSpec, confine?: (path: string) => void): { sizeBytes: number } {
  // Where it may come from (the service's allowed folders) before anything is known of it: a
  // path outside them is refused alike whether a file is there or not (no probing of the host).
  confine?.(disk.path);
  statImage(disk.path);
  const fd = openImage(disk.path, imageReadOnly(disk));
  try {
    const size = fstatSync(fd).size;
    checkContent(disk.path, fd, size);
    return { sizeBytes: size };
  } finally {
    closeSync(fd);
  }
}

/** The largest image createRawImage makes (1 TiB; sparse, so it costs nothing until written). */
export const MAX_NEW_IMAGE_MIB = 1024 * 1024;

/**
 * A new, empty raw image of `sizeMiB` MiB at `path` (sparse: ftruncate), refused if anything is
 * there already — never over a file. The path obeys the disk rule (checkDisk).
 */
export function createRawImage(path: string, sizeMiB: unknown): void {
  const p = checkDisk({ path }).path;
  const mib = integer(sizeMiB, 'disk size (MiB)', 1, MAX_NEW_IMAGE_MIB);
  let fd: number;
  try {
    fd = openSync(p, 'wx', 0o644);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === 'EEXIST') fail(p, 'already exists; pick it as the disk, or choose a new name to create one');
    if (code === 'ENOENT') fail(p, 'cannot be created: its folder does not exist');
    fail(p, `cannot be created (${code ?? (e as Error).message})`);
  }
  try {
    ftruncateSync(fd, mib * 1024 * 1024);
  } catch (e) {
    closeSync(fd);
    unlinkSync(p); // ours: just created
    fail(p, `cannot be made ${mib} MiB (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`);
  }
  closeSync(fd);
}

// This process's held images, by device and inode: who to name when a second VM asks.
const held = new Map<string, HeldBy[]>();
/** shared: the flock is LOCK_SH (read-only or snapshot); use: how the refusal names it. */
interface HeldBy { vm: string; shared: boolean; use: string }
const keyOf = (st: Stats) => `${st.dev}:${st.ino}`;

/** An image opened and locked for one VM; close() unlocks it (so does the process's death). */
export class OpenDisk {
  readonly path: string;
  readonly backend: DiskBackend;
  private readonly key: string;
  private readonly entry: HeldBy;
  private closed = false;

  private constructor(path: string, backend: DiskBackend, key: string, entry: HeldBy) {
    this.path = path;
    this.backend = backend;
    this.key = key;
    this.entry = entry;
  }

  /** Opens and locks the image for VM `vm`; throws ConfigError (one line) for every refusal. */
  static open(disk: DiskSpec, vm: string): OpenDisk {
    statImage(disk.path);
    const shared = imageReadOnly(disk);
    const fd = openImage(disk.path, shared);
    let overlay: DiskOverlay | undefined;
    try {
      const st = fstatSync(fd);
      checkContent(disk.path, fd, st.size);
      if (libc.flock(fd, (shared ? LOCK_SH : LOCK_EX) | LOCK_NB) !== 0) {
        const err = errno();
        if (err !== EAGAIN) fail(disk.path, `cannot be locked (errno ${err})`);
        fail(disk.path, `is in use by ${describeHolder(st, shared)}; stop that VM first${shared ? '' : ', or add readonly=on (or snapshot=on) if every user only reads it'}`);
      }
      if (disk.snapshot && !disk.readonly) {
        try {
          overlay = createOverlay(st.size);
        } catch (e) {
          fail(disk.path, `snapshot=on: the overlay for the guest's writes ${(e as Error).message}`);
        }
      }
      // No DISCARD on a snapshot: holes may not be punched in the image, and the overlay's granules
      // are whole by rule (disk-overlay.ts); a guest without the feature simply does not discard.
      const backend: DiskBackend = {
        fd, sizeBytes: st.size, readonly: disk.readonly, discard: !shared && punchesHoles(fd, st.size),
        serial: basename(disk.path).slice(0, DISK_ID_BYTES), ...(overlay ? { overlay } : {}),
      };
      const key = keyOf(st);
      const entry: HeldBy = { vm, shared, use: useOf(disk) };
      held.set(key, [...(held.get(key) ?? []), entry]);
      return new OpenDisk(disk.path, backend, key, entry);
    } catch (e) {
      if (overlay) closeSync(overlay.fd);
      closeSync(fd);
      throw e;
    }
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    const rest = (held.get(this.key) ?? []).filter((e) => e !== this.entry);
    if (rest.length) held.set(this.key, rest);
    else held.delete(this.key);
    // The overlay has no name: closing it gives its blocks back, and the guest's writes are gone.
    if (this.backend.overlay) closeSync(this.backend.overlay.fd);
    closeSync(this.backend.fd); // drops the flock
  }
}

/**
 * Whether the file system punches holes: a hole punched past the end of the file (KEEP_SIZE, so
 * nothing changes) succeeds where fallocate PUNCH_HOLE is implemented and fails with EOPNOTSUPP
 * where it is not.
 */
function punchesHoles(fd: number, size: number): boolean {
  return libc.fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, size, SECTOR_BYTES) === 0;
}

/** Who holds the image: a VM of this process by name, else the pid (and command line) /proc/locks gives. */
function describeHolder(st: Stats, wantReadonly: boolean): string {
  const mine = (held.get(keyOf(st)) ?? []).filter((e) => !wantReadonly || !e.shared);
  if (mine.length) return `VM "${mine[0]!.vm}" (${mine[0]!.use}, this process, pid ${process.pid})`;
  const pid = flockHolder(st.ino, wantReadonly);
  if (pid === undefined) return 'another process';
  // `unhalt run --name NAME` says its VM's name on its command line; of any other process only
  // its short name is shown (a service passes this message to its clients).
  let args: string[] = [];
  let comm = '';
  try {
    args = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
    comm = readFileSync(`/proc/${pid}/comm`, 'utf8').trim();
  } catch { /* gone meanwhile, or not ours to read */ }
  const at = args.indexOf('--name');
  const what = at >= 0 && args[at + 1] ? `VM "${args[at + 1]}"` : comm;
  return `process ${pid}${what ? ` (${what})` : ''}`;
}

/** The pid of a process holding an flock on inode `ino` that conflicts with the lock we want. */
function flockHolder(ino: number, wantReadonly: boolean): number | undefined {
  let text: string;
  try {
    text = readFileSync('/proc/locks', 'utf8');
  } catch {
    return undefined;
  }
  // "1: FLOCK  ADVISORY  WRITE 1234 fd:01:5678 0 EOF"; waiters' lines carry "->" and are skipped.
  for (const line of text.split('\n')) {
    const m = /^\d+:\s+FLOCK\s+\S+\s+(READ|WRITE)\s+(\d+)\s+[0-9a-f]+:[0-9a-f]+:(\d+)\s/.exec(line);
    if (!m || Number(m[3]) !== ino) continue;
    if (wantReadonly && m[1] !== 'WRITE') continue;
    return Number(m[2]);
  }
  return undefined;
}

// A hostile driver against virtio-blk's request parser, without KVM but with real file I/O: chains
// (already accepted by the split queue, so every buffer lies in RAM) with random and structured
// layouts — the header split across descriptors or short, no status byte, data that is no whole
// sector, sectors past the capacity and up to 2^64, 1024 buffers over the same RAM (a gigabyte
// request), readable and writable buffers interleaved, zero-length buffers, unknown types,
// discard segments with bad ranges and flags — served by BlkServer with pread/pwrite/fdatasync/
// fallocate on a real image file (on tmpfs: fdatasync costs nothing there), read-write,
// read-only, with and without discard, and snapshot=on (an overlay over an image opened read-only,
// with 1.5 KiB granules so that requests cross many: what the guest reads is the reference's model,
// the image never changes). An independent reference (the spec's rules, written here
// over byte streams with BigInt sectors) says what each request must do. Named invariants, after
// every request: no exception; SERVE_NEEDS_RESET exactly when no status can be written; the status
// byte and used length the reference gives; guest RAM outside what the request may write
// unchanged (up to 64 bytes past the furthest buffer), and what it wrote right; the image file equal to the reference's model (checked on
// the touched range every request, whole every 256 and at each run's end); counters right.
//
// FUZZ_SEED=<n> replays; FUZZ_SCALE=<x> scales the operation count (default 1: 1,000,000 in all).
import { closeSync, existsSync, fstatSync, mkdtempSync, openSync, readSync, rmSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { FALLOC_FL_KEEP_SIZE, FALLOC_FL_PUNCH_HOLE, addressOf, libc } from '../../native/kvm/libc.ts';
import { GuestRam } from '../../electron/vmm/devices/virtio/guest-ram.ts';
import { Chain, MAX_QUEUE_SIZE } from '../../electron/vmm/devices/virtio/virtqueue.ts';
import { SERVE_NEEDS_RESET } from '../../electron/vmm/devices/virtio/virtio-device-type.ts';
import {
  BLK_STAT, BLK_STAT_SLOTS, BlkServer, MAX_DISCARD_SECTORS, MAX_REQUEST_BYTES, blkConfigBytes, blkFeatures, type BlkFileIo,
} from '../../electron/vmm/devices/virtio/virtio-blk.ts';
import type { DiskBackend } from '../../electron/vmm/devices/virtio/disk-image.ts';
import { OverlayMap, createOverlay } from '../../electron/vmm/devices/virtio/disk-overlay.ts';

const SCALE = Number(process.env.FUZZ_SCALE ?? 1) || 1;
const SEED = Number(process.env.FUZZ_SEED ?? Date.now() % 2 ** 31);
const TOTAL_OPS = Math.round(1_000_000 * SCALE);

const RAM_SIZE = 40 * 1024; // 1023 buffers of all of it: 40 MiB, more than MAX_REQUEST_BYTES
const DISK_SECTORS = 64;
const DISK_BYTES = DISK_SECTORS * 512;
const BACKGROUND = Uint8Array.from({ length: RAM_SIZE }, (_, i) => (i * 131 + 7) & 0xff);
const SERIAL = 'fuzz-disk-serial-xyz'; // 20 bytes: no terminating NUL, as the spec allows

const dir = mkdtempSync(join(existsSync('/dev/shm') ? '/dev/shm' : tmpdir(), 'unhalt-blk-fuzz-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const checks: Record<string, number> = {};
const outcomes: Record<string, number> = {};
function inv(name: string, ok: boolean, detail?: () => string): void {
  checks[name] = (checks[name] ?? 0) + 1;
  if (!ok) throw new Error(`invariant "${name}" violated (seed ${SEED})${detail ? `: ${detail()}` : ''}`);
}

// xorshift32: replayable from FUZZ_SEED.
function prng(seed: number) {
  let x = seed >>> 0 || 1;
  const next = () => { x ^= x << 13; x >>>= 0; x ^= x >>> 17; x ^= x << 5; x >>>= 0; return x; };
  return { next, int: (n: number) => next() % n, chance: (p: number) => next() / 2 ** 32 < p };
}

const realIo: BlkFileIo = {
  preadAddress: (fd, a, n, o) => Number(libc.preadAddress(fd, a, n, o)),
  pwriteAddress: (fd, a, n, o) => Number(libc.pwriteAddress(fd, a, n, o)),
  fdatasync: (fd) => libc.fdatasync(fd),
  punchHole: (fd, o, n) => libc.fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, o, n),
  ramAddress: (r) => addressOf(r.bytes),
};

interface Buf { offset: number; length: number; writable: boolean }
interface Expect { needsReset: boolean; status?: number; used?: number; ram?: Uint8Array; bytesRead: number; bytesWritten: number; touched?: [number, number] }

/** The reference: what the spec says a request does, from the chain as two byte streams. */
function reference(bufs: Buf[], ram: Uint8Array, file: Uint8Array, disk: DiskBackend): Expect {
  let readableBytes = 0;
  let writableBytes = 0;
  for (const b of bufs) if (b.writable) writableBytes += b.length; else readableBytes += b.length;
  if (readableBytes < 16 || writableBytes < 1) return { needsReset: true, bytesRead: 0, bytesWritten: 0 };
  // The readable stream's head (the header and at most 32 discard segments is all a request reads).
  const readable: number[] = [];
  for (const b of bufs) if (!b.writable) for (let i = 0; i < b.length && readable.length < 16 + 32 * 16; i++) readable.push(ram[b.offset + i]!);
  /** Puts src into the device-writable stream from its start, buffer by buffer. */
  const writeStream = (out: Uint8Array, src: Uint8Array) => {
    let k = 0;
    for (const b of bufs) {
      if (!b.writable || k >= src.length) continue;
      const n = Math.min(b.length, src.length - k);
      out.set(src.subarray(k, k + n), b.offset);
      k += n;
    }
  };
  /** The device-readable stream from byte 16 on (a write's data). */
  const readData = (n: number) => {
    const data = new Uint8Array(n);
    let skip = 16;
    let k = 0;
    for (const b of bufs) {
      if (b.writable) continue;
      const from = Math.min(skip, b.length);
      skip -= from;
      const m = Math.min(b.length - from, n - k);
      data.set(ram.subarray(b.offset + from, b.offset + from + m), k);
      k += m;
    }
    return data;
  };
  let statusAt = -1;
  for (const b of bufs) if (b.writable && b.length > 0) statusAt = b.offset + b.length - 1;
  const le = (at: number, n: number) => { let v = 0n; for (let i = n - 1; i >= 0; i--) v = (v << 8n) | BigInt(readable[at + i]!); return v; };
  const type = Number(le(0, 4));
  const sector = le(8, 8);
  const out = refOut.subarray(0, ram.length);
  out.set(ram);
  const dataIn = writableBytes - 1;
  const dataOut = readableBytes - 16;
  const rangeOk = (s: bigint, n: number) => n % 512 === 0 && n <= MAX_REQUEST_BYTES && s * 512n + BigInt(n) <= BigInt(disk.sizeBytes);
  let status = 0;
  let used = 1;
  let bytesRead = 0;
  let bytesWritten = 0;
  let touched: [number, number] | undefined;
  if (type === 0) {
    if (!rangeOk(sector, dataIn)) status = 1;
    else {
      const at = Number(sector) * 512;
      writeStream(out, file.subarray(at, at + dataIn));
      used = dataIn + 1;
      bytesRead = dataIn;
    }
  } else if (type === 1) {
    if (disk.readonly || !rangeOk(sector, dataOut)) status = 1;
    else {
      file.set(readData(dataOut), Number(sector) * 512);
      bytesWritten = dataOut;
      touched = [Number(sector) * 512, dataOut];
    }
  } else if (type === 4) {
    // flush: OK (nothing else to check)
  } else if (type === 8) {
    const n = Math.min(dataIn, 20);
    const id = new TextEncoder().encode(SERIAL);
    const padded = new Uint8Array(20);
    padded.set(id.subarray(0, 20));
    writeStream(out, padded.subarray(0, n));
    used = n + 1;
  } else if (type === 11) {
    if (!disk.discard) status = 2;
    else if (disk.readonly) status = 1;
    else if (dataOut === 0 || dataOut % 16 !== 0 || dataOut > 32 * 16) status = 1;
    else {
      const segs: [bigint, number][] = [];
      for (let s = 16; s < 16 + dataOut && status === 0; s += 16) {
        const flags = Number(le(s + 12, 4));
        const count = Number(le(s + 8, 4));
        if ((flags & ~1) !== 0) status = 2;
        else if (count > MAX_DISCARD_SECTORS || !rangeOk(le(s, 8), count * 512)) status = 1;
        else segs.push([le(s, 8), count]);
      }
      if (status === 0) for (const [s, c] of segs) file.fill(0, Number(s) * 512, Number(s) * 512 + c * 512);
      if (status === 0) touched = [0, DISK_BYTES];
    }
  } else status = 2;
  // The status: the last byte of the last non-empty device-writable buffer.
  out[statusAt] = status;
  return { needsReset: false, status, used, ram: out, bytesRead, bytesWritten, ...(touched ? { touched } : {}) };
}

interface Disk { fd: number; path: string; backend: DiskBackend; model: Uint8Array; server: BlkServer; stats: Float64Array; close(): void }
type Kind = 'rw' | 'rw-nodiscard' | 'ro' | 'snap';
const KINDS: readonly Kind[] = ['rw', 'rw-nodiscard', 'ro', 'snap'];
/** Granules of the fuzzed overlays: 3 sectors, so a request of up to 8 crosses several and the image ends in a short one. */
const SNAP_GRANULE = 1536;

function openDisk(kind: Kind, r: ReturnType<typeof prng>): Disk {
  ramBytes.set(BACKGROUND); // a known background per run; each request is then checked against the RAM before it
  const path = join(dir, `${kind}.img`);
  const model = Uint8Array.from({ length: DISK_BYTES }, () => r.int(256));
  const fd0 = openSync(path, 'w');
  writeSync(fd0, model);
  closeSync(fd0);
  const fd = openSync(path, kind === 'ro' || kind === 'snap' ? 'r' : 'r+');
  const backend: DiskBackend = { fd, sizeBytes: DISK_BYTES, readonly: kind === 'ro', discard: kind === 'rw', serial: SERIAL };
  // The overlay where disk-image.ts would put it, but on this tmpfs (TMPDIR is its folder).
  const tmp = process.env.TMPDIR;
  process.env.TMPDIR = dir;
  if (kind === 'snap') backend.overlay = createOverlay(DISK_BYTES, SNAP_GRANULE);
  if (tmp === undefined) delete process.env.TMPDIR; else process.env.TMPDIR = tmp;
  const stats = new Float64Array(BLK_STAT_SLOTS);
  return {
    fd, path, backend, model, server: new BlkServer(backend, stats, realIo), stats,
    close: () => { if (backend.overlay) closeSync(backend.overlay.fd); closeSync(fd); },
  };
}

/** What the guest sees of the disk: the image, or for a snapshot each granule from where it is held. */
function diskBytes(d: Disk, at = 0, n = DISK_BYTES): Uint8Array {
  const ov = d.backend.overlay;
  if (!ov) return fileBytes(d.fd, at, n);
  const map = new OverlayMap(ov, d.fd, DISK_BYTES);
  const out = new Uint8Array(n);
  for (let i = 0; i < n; i++) {
    // Byte by byte is slow; granule by granule is what the map answers.
    const g = Math.floor((at + i) / SNAP_GRANULE) * SNAP_GRANULE;
    const end = Math.min(g + SNAP_GRANULE, at + n);
    out.set(fileBytes(map.holds(at + i) ? ov.fd : d.fd, at + i, end - (at + i)), i);
    i = end - at - 1;
  }
  return out;
}

function fileBytes(fd: number, at = 0, n = DISK_BYTES): Uint8Array {
  const b = new Uint8Array(n);
  let got = 0;
  while (got < n) { const k = readSync(fd, b, got, n - got, at + got); if (k <= 0) break; got += k; }
  return b;
}

const sab = new SharedArrayBuffer(RAM_SIZE);
const ramBytes = new Uint8Array(sab);
const ram = new GuestRam(ramBytes, [{ guestPhysAddr: 0, size: RAM_SIZE, offset: 0 }]);
const chain = new Chain(MAX_QUEUE_SIZE);
const ramSnapshot = new Uint8Array(RAM_SIZE);
const refOut = new Uint8Array(RAM_SIZE);

/** Serves one request and checks every invariant. */
function serveAndCheck(d: Disk, bufs: Buf[], header: Uint8Array | undefined, extra: Uint8Array | undefined, opIndex: number): void {
  // The header (and discard segments) laid into the readable stream's first bytes.
  const stream = [...(header ?? []), ...(extra ?? [])];
  let k = 0;
  for (const b of bufs) if (!b.writable) for (let i = 0; i < b.length && k < stream.length; i++) ramBytes[b.offset + i] = stream[k++]!;
  chain.count = bufs.length;
  chain.head = 0;
  bufs.forEach((b, i) => { chain.offset[i] = b.offset; chain.length[i] = b.length; chain.writable[i] = b.writable ? 1 : 0; });
  // Only RAM up to the furthest buffer (plus a guard) can be touched: copy and compare that much.
  // A plain copy: reading a SharedArrayBuffer view element by element is slow.
  let span = 0;
  for (const b of bufs) span = Math.max(span, b.offset + b.length);
  span = Math.min(RAM_SIZE, span + 64);
  const ramNow = ramBytes.subarray(0, span);
  const ramBefore = ramSnapshot.subarray(0, span);
  ramBefore.set(ramNow);
  const before = { r: d.stats[BLK_STAT.bytesRead]!, w: d.stats[BLK_STAT.bytesWritten]! };
  const ref = reference(bufs, ramBefore, d.model, d.backend);
  let used: number;
  try {
    used = d.server.serve(chain, ram);
  } catch (e) {
    inv('no exception', false, () => String(e));
    return;
  }
  inv('no exception', true);
  inv('needs a reset exactly when no status can be written', (used === SERVE_NEEDS_RESET) === ref.needsReset, () => `used ${used}, reference ${JSON.stringify(ref)}`);
  if (ref.needsReset) {
    inv('a request that needs a reset writes nothing to RAM', Buffer.compare(ramNow, ramBefore) === 0);
    outcomes['needs reset'] = (outcomes['needs reset'] ?? 0) + 1;
  } else {
    inv('the used length is the reference\'s', used === ref.used, () => `got ${used}, want ${ref.used}`);
    inv('guest RAM is exactly what the reference wrote', Buffer.compare(ramNow, ref.ram!) === 0, () => {
      const i = ramNow.findIndex((v, j) => v !== ref.ram![j]);
      return `first difference at ${i}: ${ramNow[i]} vs ${ref.ram![i]} (status want ${ref.status})`;
    });
    const name = ['ok', 'ioerr', 'unsupp'][ref.status!]!;
    outcomes[name] = (outcomes[name] ?? 0) + 1;
  }
  inv('bytes read / written counted as the reference moved them',
    d.stats[BLK_STAT.bytesRead]! - before.r === ref.bytesRead && d.stats[BLK_STAT.bytesWritten]! - before.w === ref.bytesWritten);
  if (ref.touched) {
    const [at, n] = ref.touched;
    inv('the range a request changed equals the reference model', Buffer.compare(diskBytes(d, at, n), d.model.subarray(at, at + n)) === 0);
  }
  if (opIndex % 256 === 0) inv('the image file equals the reference model', Buffer.compare(diskBytes(d), d.model) === 0);
}

// --- request generators -------------------------------------------------------------------------

const TYPES = [0, 0, 0, 1, 1, 1, 4, 8, 11, 11, 13, 14, 10, 2, 0xffffffff];

function headerFor(r: ReturnType<typeof prng>, type: number, sector: bigint): Uint8Array {
  const h = new Uint8Array(16);
  const v = new DataView(h.buffer);
  v.setUint32(0, type, true);
  v.setUint32(4, r.chance(0.1) ? r.next() : 0, true);
  v.setBigUint64(8, sector, true);
  return h;
}

function randomSector(r: ReturnType<typeof prng>): bigint {
  const p = r.int(10);
  if (p < 6) return BigInt(r.int(DISK_SECTORS));
  if (p === 6) return BigInt(DISK_SECTORS - r.int(3));
  if (p === 7) return BigInt(DISK_SECTORS + r.int(4));
  if (p === 8) return (1n << 64n) - 1n - BigInt(r.int(4));
  return BigInt(r.next()) * BigInt(r.next());
}

function discardSegments(r: ReturnType<typeof prng>): Uint8Array {
  const n = r.chance(0.1) ? r.int(40) : 1 + r.int(4);
  const b = new Uint8Array(16 * n + (r.chance(0.1) ? r.int(16) : 0));
  const v = new DataView(b.buffer);
  for (let i = 0; i < n; i++) {
    v.setBigUint64(16 * i, r.chance(0.8) ? BigInt(r.int(DISK_SECTORS)) : randomSector(r), true);
    v.setUint32(16 * i + 8, r.chance(0.8) ? r.int(8) : r.next(), true);
    v.setUint32(16 * i + 12, r.chance(0.85) ? r.int(2) : r.next(), true);
  }
  return b;
}

/** A random layout: readable bytes split anywhere, then (mostly) writable ones; sometimes interleaved. */
function randomRequest(r: ReturnType<typeof prng>): { bufs: Buf[]; header: Uint8Array; extra?: Uint8Array } {
  const type = TYPES[r.int(TYPES.length)]!;
  const header = headerFor(r, type, randomSector(r));
  const sectorsOf = () => (r.chance(0.85) ? 512 * (1 + r.int(8)) : r.int(5000));
  const extra = type === 11 ? discardSegments(r) : undefined;
  const readableLen = r.chance(0.05) ? r.int(16) : 16 + (type === 1 ? sectorsOf() : type === 11 ? extra!.length : r.chance(0.1) ? r.int(600) : 0);
  const writableLen = r.chance(0.05) ? 0 : 1 + (type === 0 ? sectorsOf() : type === 8 ? (r.chance(0.5) ? 20 : r.int(40)) : r.chance(0.1) ? r.int(600) : 0);
  const bufs: Buf[] = [];
  const split = (total: number, writable: boolean) => {
    let left = total;
    while (left > 0 || (r.chance(0.05) && bufs.length < 8)) {
      const n = left === 0 ? 0 : r.chance(0.3) ? left : 1 + r.int(left);
      // Within the first 8 KiB mostly (what is compared per request scales with it), anywhere sometimes.
      const window = r.chance(0.05) ? RAM_SIZE : Math.max(n, 8192);
      bufs.push({ offset: r.int(window - n + 1), length: n, writable });
      left -= n;
      if (bufs.length > 200) break;
    }
  };
  split(readableLen, false);
  split(writableLen, true);
  if (r.chance(0.05)) bufs.reverse(); // writable before readable: the parser takes streams by direction
  return { bufs, header, ...(extra ? { extra } : {}) };
}

describe('virtio-blk requests against a hostile driver (real file I/O)', () => {
  afterAll(() => {
    console.log(`virtio-blk fuzz (seed ${SEED}): ${JSON.stringify(outcomes)}; invariant checks:\n${Object.entries(checks).map(([k, v]) => `  ${k}: ${v}`).join('\n')}`);
  });

  it('the configuration and features say what the disk is', () => {
    const c = new DataView(blkConfigBytes({ sizeBytes: 3 * 2 ** 32 * 512 + 1024, discard: true }).buffer);
    expect([c.getUint32(0, true), c.getUint32(4, true)]).toEqual([2, 3]); // capacity, 64-bit, in sectors
    expect(c.getUint32(20, true)).toBe(512);
    expect(c.getUint32(40, true)).toBe(32);
    expect(blkFeatures({ readonly: true, discard: false })).toBe((1n << 2n) | (1n << 5n) | (1n << 6n) | (1n << 9n));
    expect(blkFeatures({ readonly: false, discard: true }) & (1n << 13n)).toBe(1n << 13n);
  });

  const structured: [string, (r: ReturnType<typeof prng>) => { bufs: Buf[]; header?: Uint8Array; extra?: Uint8Array }][] = [
    ['no descriptors at all', () => ({ bufs: [] })],
    ['a 15-byte header', (r) => ({ bufs: [{ offset: 0, length: 15, writable: false }, { offset: 100, length: 1, writable: true }], header: headerFor(r, 0, 0n) })],
    ['no status byte (header only)', (r) => ({ bufs: [{ offset: 0, length: 16, writable: false }, { offset: 100, length: 512, writable: false }], header: headerFor(r, 1, 0n) })],
    ['only zero-length writable buffers', (r) => ({ bufs: [{ offset: 0, length: 16, writable: false }, { offset: 100, length: 0, writable: true }], header: headerFor(r, 4, 0n) })],
    ['the header split in 16 one-byte descriptors', (r) => ({ bufs: [...Array.from({ length: 16 }, (_, i) => ({ offset: 1000 + 7 * i, length: 1, writable: false })), { offset: 4096, length: 513, writable: true }], header: headerFor(r, 0, 3n) })],
    ['a read of the last sector, status in its own buffer after a zero-length one', (r) => ({ bufs: [{ offset: 0, length: 16, writable: false }, { offset: 512, length: 512, writable: true }, { offset: 2000, length: 1, writable: true }, { offset: 3000, length: 0, writable: true }], header: headerFor(r, 0, BigInt(DISK_SECTORS - 1)) })],
    ['a read one sector past the end', (r) => ({ bufs: [{ offset: 0, length: 16, writable: false }, { offset: 512, length: 513, writable: true }], header: headerFor(r, 0, BigInt(DISK_SECTORS)) })],
    ['a read at sector 2^64-1 (the byte offset wraps in 64 bits)', (r) => ({ bufs: [{ offset: 0, length: 16, writable: false }, { offset: 512, length: 513, writable: true }], header: headerFor(r, 0, (1n << 64n) - 1n) })],
    ['a write of 100 bytes (no whole sector)', (r) => ({ bufs: [{ offset: 0, length: 116, writable: false }, { offset: 512, length: 1, writable: true }], header: headerFor(r, 1, 0n) })],
    ['a 40 MiB read: 1023 buffers over the same 40 KiB', (r) => ({ bufs: [{ offset: 0, length: 16, writable: false }, ...Array.from({ length: 1023 }, () => ({ offset: 0, length: RAM_SIZE, writable: true }))], header: headerFor(r, 0, 0n) })],
    ['a 40 MiB write: 1023 readable buffers over the same 40 KiB', (r) => ({ bufs: [...Array.from({ length: 1023 }, () => ({ offset: 0, length: RAM_SIZE, writable: false })), { offset: 9, length: 1, writable: true }], header: headerFor(r, 1, 0n) })],
    ['a read whose data overlaps its own header and status', (r) => ({ bufs: [{ offset: 0, length: 16, writable: false }, { offset: 0, length: 1024, writable: true }, { offset: 1023, length: 1, writable: true }], header: headerFor(r, 0, 1n) })],
    ['a discard with an unknown flag', (r) => { const s = new Uint8Array(16); new DataView(s.buffer).setUint32(12, 2, true); return { bufs: [{ offset: 0, length: 32, writable: false }, { offset: 512, length: 1, writable: true }], header: headerFor(r, 11, 0n), extra: s }; }],
    ['a discard of 33 segments (more than max_discard_seg)', (r) => ({ bufs: [{ offset: 0, length: 16 + 33 * 16, writable: false }, { offset: 4096, length: 1, writable: true }], header: headerFor(r, 11, 0n), extra: new Uint8Array(33 * 16) })],
    ['a discard running past the end', (r) => { const s = new Uint8Array(16); const v = new DataView(s.buffer); v.setBigUint64(0, BigInt(DISK_SECTORS - 1), true); v.setUint32(8, 2, true); return { bufs: [{ offset: 0, length: 32, writable: false }, { offset: 512, length: 1, writable: true }], header: headerFor(r, 11, 0n), extra: s }; }],
    ['a good discard of 4 sectors (a hole that reads zeros)', (r) => { const s = new Uint8Array(16); const v = new DataView(s.buffer); v.setBigUint64(0, 8n, true); v.setUint32(8, 4, true); v.setUint32(12, 1, true); return { bufs: [{ offset: 0, length: 32, writable: false }, { offset: 512, length: 1, writable: true }], header: headerFor(r, 11, 0n), extra: s }; }],
    ['GET_ID into 5 bytes', (r) => ({ bufs: [{ offset: 0, length: 16, writable: false }, { offset: 512, length: 6, writable: true }], header: headerFor(r, 8, 0n) })],
    ['an unknown request type', (r) => ({ bufs: [{ offset: 0, length: 16, writable: false }, { offset: 512, length: 1, writable: true }], header: headerFor(r, 0x7fff, 0n) })],
  ];

  it('structured hostile requests on a read-write, a no-discard, a read-only and a snapshot disk', () => {
    const r = prng(SEED);
    for (const kind of KINDS) {
      const d = openDisk(kind, r);
      try {
        const roBefore = new Uint8Array(d.model);
        for (const [, make] of structured) {
          const q = make(r);
          serveAndCheck(d, q.bufs, q.header, q.extra, 0);
        }
        if (kind === 'ro' || kind === 'snap') inv('a read-only or snapshot image never changes', Buffer.compare(fileBytes(d.fd), roBefore) === 0);
        if (kind === 'rw') {
          // The good discard really punched: the file's blocks are zeros there, as the model says.
          inv('a discarded range reads zeros', fileBytes(d.fd, 8 * 512, 4 * 512).every((b) => b === 0));
        }
      } finally {
        d.close();
      }
    }
  });

  it(`random requests: ${TOTAL_OPS.toLocaleString('en')} operations in all (random and structured), every invariant after each`, () => {
    const r = prng(SEED ^ 0x5bd1e995);
    const t0 = performance.now();
    let ops = 0;
    const runs = 32;
    for (let run = 0; run < runs; run++) {
      const kind = KINDS[run % KINDS.length]!;
      const d = openDisk(kind, r);
      const roBefore = new Uint8Array(d.model);
      try {
        const perRun = Math.ceil((TOTAL_OPS - structured.length * KINDS.length) / runs);
        for (let i = 0; i < perRun; i++, ops++) {
          if (r.chance(0.02)) {
            const q = structured[r.int(structured.length)]![1](r);
            serveAndCheck(d, q.bufs, q.header, q.extra, i);
          } else {
            const q = randomRequest(r);
            serveAndCheck(d, q.bufs, q.header, q.extra, i);
          }
        }
        inv('the image file equals the reference model at the end of a run', Buffer.compare(diskBytes(d), d.model) === 0);
        if (kind === 'ro' || kind === 'snap') inv('a read-only or snapshot image never changes', Buffer.compare(fileBytes(d.fd), roBefore) === 0);
        inv('the file keeps its size (discard keeps it, nothing extends it)', fstatSync(d.fd).size === DISK_BYTES);
        if (d.backend.overlay) inv('the overlay keeps the image\'s size', fstatSync(d.backend.overlay.fd).size === DISK_BYTES);
      } finally {
        d.close();
      }
    }
    const ms = performance.now() - t0;
    console.log(`virtio-blk fuzz: ${ops.toLocaleString('en')} random operations in ${(ms / 1000).toFixed(1)} s (${(ms * 1000 / ops).toFixed(1)} µs each)`);
    expect(outcomes.ok).toBeGreaterThan(ops / 10);
    expect(outcomes.ioerr).toBeGreaterThan(ops / 20);
    expect(outcomes.unsupp).toBeGreaterThan(ops / 50);
    expect(outcomes['needs reset']).toBeGreaterThan(ops / 50);
  }, 600_000);
});

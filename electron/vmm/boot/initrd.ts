// Refuses an initrd that is visibly broken before any guest sees it: an empty file, or a
// cpio / gzip-compressed cpio archive that stops short (a truncated copy or download). The
// kernel would otherwise boot and fail late ("Initramfs unpacking failed", or no /init) with
// nothing pointing at the file. Formats this cannot verify cheaply (xz, zstd, lz4, bzip2,
// legacy ramdisk images) pass unchecked; the kernel judges those.
import { promisify } from 'node:util';

// Inflated on libuv's thread pool: the thread that starts VMs also answers the service's clients.
// node:zlib is loaded on first use (a start without a gzip initrd never needs it).
const gunzipAsync = (b: Uint8Array): Promise<Buffer> => promisify(process.getBuiltinModule('node:zlib').gunzip)(b);

const CPIO_HEADER = 110;
const TRAILER = 'TRAILER!!!';

// Inflating a gzip initrd costs tens of ms; repeated boots of the same file (benchmarks) pay once.
const verified = new Set<string>();

export async function checkInitrd(bytes: Uint8Array, path: string): Promise<void> {
  if (bytes.length === 0) throw new Error(`initrd is empty: ${path}`);
  const key = `${path}\0${bytes.length}\0${Buffer.from(bytes.subarray(0, 32)).toString('hex')}${Buffer.from(bytes.subarray(-32)).toString('hex')}`;
  if (verified.has(key)) return;
  await check(bytes, path);
  if (verified.size >= 16) verified.clear();
  verified.add(key);
}

async function check(bytes: Uint8Array, path: string): Promise<void> {
  let pos = 0;
  // Linux unpacks a sequence of archives (e.g. microcode cpio + compressed main cpio), with
  // zero padding between them.
  while (pos < bytes.length) {
    while (pos < bytes.length && bytes[pos] === 0) pos++;
    if (pos >= bytes.length) return;
    if (isCpio(bytes, pos)) {
      const end = walkCpio(bytes, pos);
      if (end < 0) throw new Error(`initrd ${path} is truncated: its cpio archive stops at byte ${bytes.length} before the ${TRAILER} entry`);
      pos = end;
    } else if (bytes[pos] === 0x1f && bytes[pos + 1] === 0x8b) {
      await checkGzip(bytes.subarray(pos), path);
      return; // a gzip member runs to its own end; what follows is the kernel's to judge
    } else {
      return;
    }
  }
}

function isCpio(b: Uint8Array, at: number): boolean {
  // "070701" (newc) or "070702" (crc)
  return b.length - at >= 6 && b[at] === 0x30 && b[at + 1] === 0x37 && b[at + 2] === 0x30 && b[at + 3] === 0x37
    && b[at + 4] === 0x30 && (b[at + 5] === 0x31 || b[at + 5] === 0x32);
}

function hex8(b: Uint8Array, at: number): number {
  let v = 0;
  for (let i = 0; i < 8; i++) {
    const c = b[at + i]!;
    const d = c >= 0x30 && c <= 0x39 ? c - 0x30 : c >= 0x41 && c <= 0x46 ? c - 0x37 : c >= 0x61 && c <= 0x66 ? c - 0x57 : -1;
    if (d < 0) return -1;
    v = v * 16 + d;
  }
  return v;
}

const align4 = (n: number) => (n + 3) & ~3;
const TRAILER_BYTES = new TextEncoder().encode(`${TRAILER}\0`);

function isTrailer(b: Uint8Array, at: number, nameSize: number): boolean {
  if (nameSize !== TRAILER_BYTES.length) return false;
  for (let i = 0; i < nameSize; i++) if (b[at + i] !== TRAILER_BYTES[i]) return false;
  return true;
}

/** Walks a newc cpio archive at `at`; returns the offset after its trailer, or -1 if it stops short. */
function walkCpio(b: Uint8Array, at: number): number {
  let pos = at;
  for (;;) {
    if (pos + CPIO_HEADER > b.length || !isCpio(b, pos)) return -1;
    const fileSize = hex8(b, pos + 54);
    const nameSize = hex8(b, pos + 94);
    if (fileSize < 0 || nameSize < 1) return -1;
    const nameEnd = pos + CPIO_HEADER + nameSize;
    if (nameEnd > b.length) return -1;
    const dataStart = at + align4(nameEnd - at);
    const next = at + align4(dataStart + fileSize - at);
    if (isTrailer(b, pos + CPIO_HEADER, nameSize)) return Math.min(next, b.length);
    if (dataStart + fileSize > b.length) return -1;
    pos = next;
  }
}

async function checkGzip(b: Uint8Array, path: string): Promise<void> {
  let out: Buffer;
  try {
    out = await gunzipAsync(b);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === 'Z_BUF_ERROR') throw new Error(`initrd ${path} is truncated: its gzip stream ends early`);
    // Bytes after the last gzip member (padding, a signature) are no reason to refuse it.
    if (/incorrect header check/.test((e as Error).message)) return;
    throw new Error(`initrd ${path} is corrupt: ${(e as Error).message}`);
  }
  if (isCpio(out, 0) && walkCpio(out, 0) < 0) {
    throw new Error(`initrd ${path} is truncated: the cpio archive inside its gzip stream stops before the ${TRAILER} entry`);
  }
}

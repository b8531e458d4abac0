// A raw disk image's partitions, from its first bytes only (no I/O here): GPT (the header at LBA 1
// behind a protective MBR, checksums verified) or MBR (the four primary slots). Numbers are the
// kernel's (vda1, vda2, ...: a GPT entry's slot, an MBR slot 1-4), so a caller can say root=/dev/vdaN.
// A file system written to the whole image (mke2fs on a file) is the layout "none", one
// "partition" with index 0 at offset 0. Sectors are 512 bytes, as in every cloud image.
import { crc32 } from 'node:zlib';
import { detectFs } from './fs-detect.ts';
import { ImageError } from './image-error.ts';

/** How many bytes from the image's start parsePartitionTable wants (GPT entries sit in the first 1 MiB). */
export const TABLE_PROBE_BYTES = 1024 * 1024;
export const SECTOR = 512;
/** The most used partitions a table may have (GPT's usual 128 slots). */
export const MAX_PARTITIONS = 128;

export interface Partition {
  /** 1-based as Linux numbers them (vda1 ...); 0 for a whole-disk file system. */
  index: number;
  startBytes: number;
  sizeBytes: number;
  /** GPT: the partition type GUID, upper case. */
  typeGuid?: string;
  /** MBR: the type byte (0x83 Linux, 0x8e LVM, 0xef EFI ...). */
  mbrType?: number;
  /** GPT: the partition's name (printable ASCII only). */
  name?: string;
}

export interface PartitionLayout {
  scheme: 'gpt' | 'mbr' | 'none';
  partitions: Partition[];
  /** MBR: an extended partition was seen; its logical partitions (vda5 ...) are not read. */
  skippedLogical?: boolean;
}

export const GPT_TYPE = {
  esp: 'C12A7328-F81F-11D2-BA4B-00A0C93EC93B',
  biosBoot: '21686148-6449-6E6F-744E-656564454649',
  linux: '0FC63DAF-8483-4772-8E79-3D69D8477DE4',
} as const;

const MiB = 1024 * 1024;
const EXTENDED = new Set([0x05, 0x0f, 0x85]);

/** The partitions of an image `fileBytes` long whose first bytes are `head`. Throws ImageError. */
export function parsePartitionTable(head: Buffer, fileBytes: number): PartitionLayout {
  if (fileBytes < 2 * SECTOR || head.length < 2 * SECTOR) throw new ImageError(`not a disk image: it is ${fileBytes} bytes, too small to hold a partition table or a file system`);
  let layout: PartitionLayout;
  if (head.toString('latin1', SECTOR, SECTOR + 8) === 'EFI PART') layout = parseGpt(head);
  else if (head.readUInt16LE(510) === 0xaa55 && mbrEntries(head) !== undefined) layout = parseMbr(head);
  else if (head.length >= 4096 + 8 && head.toString('latin1', 4096, 4104) === 'EFI PART') {
    throw new ImageError('its GPT is written for 4096-byte sectors; only 512-byte-sector images are read (cloud images use 512)');
  } else if (detectFs(head).kind !== 'unknown') {
    layout = { scheme: 'none', partitions: [{ index: 0, startBytes: 0, sizeBytes: fileBytes }] };
  } else {
    throw new ImageError('not a disk image: it has no partition table (GPT or MBR) and no file system at its start');
  }
  // A table made to cost: every partition is read with debugfs, and none of a real disk's overlap.
  if (layout.partitions.length > MAX_PARTITIONS) throw new ImageError(`damaged partition table: ${layout.partitions.length} partitions, more than the ${MAX_PARTITIONS} read; download or copy the image again`);
  const byStart = [...layout.partitions].sort((a, b) => a.startBytes - b.startBytes);
  for (let i = 1; i < byStart.length; i++) {
    const [a, b] = [byStart[i - 1]!, byStart[i]!];
    if (b.startBytes < a.startBytes + a.sizeBytes) throw new ImageError(`damaged partition table: partitions ${Math.min(a.index, b.index)} and ${Math.max(a.index, b.index)} overlap; download or copy the image again`);
  }
  for (const p of layout.partitions) {
    if (p.startBytes + p.sizeBytes > fileBytes) {
      throw new ImageError(`truncated: partition ${p.index} ends at ${mib(p.startBytes + p.sizeBytes)} but the file holds ${mib(fileBytes)}; download or copy the image again`);
    }
  }
  return layout;
}

function parseGpt(head: Buffer): PartitionLayout {
  const h = head.subarray(SECTOR, 2 * SECTOR);
  const headerSize = h.readUInt32LE(12);
  if (headerSize < 92 || headerSize > SECTOR) throw new ImageError(`damaged GPT: its header size is ${headerSize} bytes; download or copy the image again`);
  const copy = Buffer.from(h.subarray(0, headerSize));
  copy.writeUInt32LE(0, 16);
  if (crc32(copy) !== h.readUInt32LE(16)) throw new ImageError('damaged GPT: its header checksum does not match; download or copy the image again');
  const entriesLba = Number(h.readBigUInt64LE(72));
  const count = h.readUInt32LE(80);
  const entrySize = h.readUInt32LE(84);
  if (entrySize < 128 || entrySize % 8 !== 0 || count > 1024) throw new ImageError(`damaged GPT: ${count} entries of ${entrySize} bytes; download or copy the image again`);
  const start = entriesLba * SECTOR;
  const end = start + count * entrySize;
  if (end > head.length) throw new ImageError(`its GPT entries lie past the first ${mib(head.length)} of the image (at sector ${entriesLba}); such a layout is not read`);
  const entries = head.subarray(start, end);
  if (crc32(entries) !== h.readUInt32LE(88)) throw new ImageError('damaged GPT: its partition entries checksum does not match; download or copy the image again');
  const partitions: Partition[] = [];
  for (let i = 0; i < count; i++) {
    const e = entries.subarray(i * entrySize, (i + 1) * entrySize);
    const typeGuid = guid(e, 0);
    if (typeGuid === '00000000-0000-0000-0000-000000000000') continue;
    const first = Number(e.readBigUInt64LE(32));
    const last = Number(e.readBigUInt64LE(40));
    if (last < first) throw new ImageError(`damaged GPT: partition ${i + 1} ends before it starts; download or copy the image again`);
    const name = e.toString('utf16le', 56, 128).replace(/\0[\s\S]*$/, '').replace(/[^\x20-\x7e]/g, '');
    partitions.push({ index: i + 1, startBytes: first * SECTOR, sizeBytes: (last - first + 1) * SECTOR, typeGuid, ...(name ? { name } : {}) });
  }
  return { scheme: 'gpt', partitions };
}

/** The four MBR slots, or undefined when sector 0 is no MBR (a FAT boot sector, boot code). */
function mbrEntries(head: Buffer): { status: number; type: number; lba: number; sectors: number }[] | undefined {
  const out = [];
  for (let i = 0; i < 4; i++) {
    const o = 446 + i * 16;
    const status = head[o];
    if (status !== 0 && status !== 0x80) return undefined;
    out.push({ status, type: head[o + 4], lba: head.readUInt32LE(o + 8), sectors: head.readUInt32LE(o + 12) });
  }
  return out.some((e) => e.type !== 0 && e.sectors > 0) ? out : undefined;
}

function parseMbr(head: Buffer): PartitionLayout {
  const partitions: Partition[] = [];
  let skippedLogical = false;
  for (const [i, e] of mbrEntries(head)!.entries()) {
    if (e.type === 0 || e.sectors === 0) continue;
    if (e.type === 0xee) throw new ImageError('damaged GPT: a protective MBR but no GPT header at sector 1; download or copy the image again');
    if (EXTENDED.has(e.type)) {
      skippedLogical = true;
      continue;
    }
    partitions.push({ index: i + 1, startBytes: e.lba * SECTOR, sizeBytes: e.sectors * SECTOR, mbrType: e.type });
  }
  return { scheme: 'mbr', partitions, ...(skippedLogical ? { skippedLogical } : {}) };
}

/** A GUID as written: the first three fields are little-endian on disk. */
function guid(b: Buffer, o: number): string {
  const hex = (from: number, to: number) => b.toString('hex', o + from, o + to);
  const le = (from: number, to: number) => Buffer.from(b.subarray(o + from, o + to)).reverse().toString('hex');
  return `${le(0, 4)}-${le(4, 6)}-${le(6, 8)}-${hex(8, 10)}-${hex(10, 16)}`.toUpperCase();
}

const mib = (n: number) => (n % MiB === 0 ? `${n / MiB} MiB` : `${n} bytes`);

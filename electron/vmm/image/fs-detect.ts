// What a partition holds, from its first bytes only (the magic numbers blkid reads), so the
// importer can pick the root and refuse what it cannot read without root privileges. Pure.
// ext2, ext3 and ext4 are all accepted: debugfs reads every one and a distribution kernel's ext4
// driver mounts all three; the version is reported (from the feature flags), not required.

/** How many bytes from a partition's start detectFs wants (btrfs's superblock is at 64 KiB). */
export const FS_PROBE_BYTES = 128 * 1024;

export type FsKind = 'ext' | 'xfs' | 'btrfs' | 'luks' | 'lvm' | 'swap' | 'vfat' | 'unknown';

export interface FsInfo {
  kind: FsKind;
  /** ext2/ext3/ext4 by feature flags (extents, 64bit or flex_bg: ext4; a journal: ext3). */
  extVersion?: 'ext2' | 'ext3' | 'ext4';
  /** The UUID as root=UUID= and /dev/disk/by-uuid spell it (FAT: its volume id, XXXX-XXXX). */
  uuid?: string;
  label?: string;
  /** ext: the file system's size by its superblock (a partition smaller than that is cut short). */
  sizeBytes?: number;
}

const EXT_SUPER = 1024;
const EXT_MAGIC = 0xef53;
const BTRFS_SUPER = 0x10000;

export function detectFs(head: Buffer): FsInfo {
  const at = (off: number, magic: string) => head.length >= off + magic.length && head.toString('latin1', off, off + magic.length) === magic;
  if (at(0, 'LUKS\xba\xbe')) return { kind: 'luks', uuid: cString(head, 168, 40) || undefined };
  if (at(0, 'XFSB')) return { kind: 'xfs', uuid: uuidAt(head, 32), label: cString(head, 108, 12) || undefined };
  // LVM2's label may sit in any of the first four sectors.
  for (let s = 0; s < 4; s++) if (at(s * 512, 'LABELONE')) return { kind: 'lvm' };
  if (head.length >= EXT_SUPER + 136 && head.readUInt16LE(EXT_SUPER + 56) === EXT_MAGIC) {
    const compat = head.readUInt32LE(EXT_SUPER + 0x5c);
    const incompat = head.readUInt32LE(EXT_SUPER + 0x60);
    const extVersion = incompat & (0x40 | 0x80 | 0x200) ? 'ext4' : compat & 0x4 ? 'ext3' : 'ext2';
    const blocks = head.readUInt32LE(EXT_SUPER + 4) + (incompat & 0x80 && head.length >= EXT_SUPER + 0x154 ? head.readUInt32LE(EXT_SUPER + 0x150) * 2 ** 32 : 0);
    const sizeBytes = blocks * 1024 * 2 ** Math.min(head.readUInt32LE(EXT_SUPER + 24), 6);
    return { kind: 'ext', extVersion, uuid: uuidAt(head, EXT_SUPER + 0x68), label: cString(head, EXT_SUPER + 0x78, 16) || undefined, sizeBytes };
  }
  if (at(BTRFS_SUPER + 0x40, '_BHRfS_M')) return { kind: 'btrfs', uuid: uuidAt(head, BTRFS_SUPER + 0x20), label: cString(head, BTRFS_SUPER + 0x12b, 256) || undefined };
  if (at(4086, 'SWAPSPACE2') || at(4086, 'SWAP-SPACE')) return { kind: 'swap' };
  if (head.length >= 512 && head.readUInt16LE(510) === 0xaa55) {
    // FAT12/16 name their type at 54, FAT32 at 82; the volume id and label sit just before.
    const t16 = head.toString('latin1', 54, 62);
    if (t16 === 'FAT12   ' || t16 === 'FAT16   ' || t16 === 'FAT     ') return fat(head, 39);
    if (head.toString('latin1', 82, 87) === 'FAT32') return fat(head, 67);
  }
  return { kind: 'unknown' };
}

function fat(head: Buffer, idAt: number): FsInfo {
  const id = head.readUInt32LE(idAt).toString(16).toUpperCase().padStart(8, '0');
  const label = head.toString('latin1', idAt + 4, idAt + 15).trim();
  return { kind: 'vfat', uuid: `${id.slice(0, 4)}-${id.slice(4)}`, label: label && label !== 'NO NAME' ? label : undefined };
}

/** 16 bytes at `off` as 8-4-4-4-12 hex, in byte order (ext, xfs and btrfs store them so). */
function uuidAt(head: Buffer, off: number): string | undefined {
  if (head.length < off + 16) return undefined;
  const h = head.toString('hex', off, off + 16);
  if (/^0+$/.test(h)) return undefined;
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

/** A NUL-padded string field; only printable ASCII survives (a label is shown and used in root=LABEL=). */
function cString(head: Buffer, off: number, len: number): string {
  if (head.length < off + len) return '';
  const raw = head.toString('latin1', off, off + len);
  const end = raw.indexOf('\0');
  return (end < 0 ? raw : raw.slice(0, end)).replace(/[^\x20-\x7e]/g, '').trim();
}

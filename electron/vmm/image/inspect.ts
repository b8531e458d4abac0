// What a raw cloud image boots, read without root and without booting it: its partition table,
// each partition's file system by magic, the root (the largest ext file system that looks like
// one) and the file system holding the kernels (the root's /boot or a /boot partition of its own),
// then that file system's boot configuration (boot-config.ts), every path checked in the image.
// extractBootFiles copies the chosen kernel and initrd out: nothing is written but into destDir,
// through a private staging folder there that a failure removes.
import { mkdtemp, open, rename, rm, stat, writeFile, readFile } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import { basename, join } from 'node:path';
import { qcow2ConvertCommand } from '../devices/virtio/disk-image.ts';
import { shownPath } from '../config/shown-path.ts';
import { type BootEntry, fallbackEntry, parseBlsEntries, parseGrubCfg, parseGrubenv } from './boot-config.ts';
import { ExtReader } from './ext-reader.ts';
import { FS_PROBE_BYTES, type FsInfo, detectFs } from './fs-detect.ts';
import { ImageError, quoteFromImage } from './image-error.ts';
import { type Partition, TABLE_PROBE_BYTES, parsePartitionTable } from './partition-table.ts';

export { ImageError } from './image-error.ts';

export interface ImagePartition extends Partition {
  fs: FsInfo;
}

export interface BootSource {
  /** The partition whose file system holds the kernel and initrd (the root's, or /boot's own). */
  bootPartition: ImagePartition;
  rootPartition: ImagePartition;
  /** The kernel's path inside the boot file system, symlinks followed. */
  kernel: string;
  /** The initramfs's path inside the boot file system, symlinks followed. */
  initrd?: string;
  /** Images the configuration loads before the initrd (CPU microcode); extractBootFiles joins them in front of it. */
  earlyInitrds?: string[];
  /** As the image's configuration gives it (BOOT_IMAGE= dropped); the caller may append. */
  cmdline: string;
  /** Where the command line came from. */
  config: BootEntry['source'];
  rootUuid?: string;
  /** PRETTY_NAME from the root's /etc/os-release. */
  osName?: string;
}

const mib = (n: number) => (n % (1024 * 1024) === 0 ? `${n / (1024 * 1024)} MiB` : `${n} bytes`);
const ROOT_MARKS = ['/etc/os-release', '/sbin/init', '/usr/lib/systemd'];
const QCOW2 = 'QFI\xfb';

/** Reads what the raw image at `rawPath` boots. Throws ImageError (one line, naming the image) for what the user can fix. */
export async function inspectImage(rawPath: string): Promise<BootSource> {
  const shown = shownPath(rawPath);
  try {
    return await inspect(rawPath);
  } catch (e) {
    if (e instanceof ImageError) throw new ImageError(`${shown}: ${e.message}`);
    throw e;
  }
}

async function inspect(rawPath: string): Promise<BootSource> {
  const { size, head, partitions } = await readLayout(rawPath);
  if (head.toString('latin1', 0, 4) === QCOW2) throw new ImageError(`a qcow2 image, not raw: convert it first (${qcow2ConvertCommand(rawPath)})`);
  const layout = parsePartitionTable(head, size);
  const parts: ImagePartition[] = [];
  const what = (p: Partition) => (p.index === 0 ? 'the whole-disk file system' : `partition ${p.index}`);
  for (const p of layout.partitions) {
    const fs = detectFs(await partitions(p));
    if (fs.sizeBytes !== undefined && fs.sizeBytes > p.sizeBytes) {
      throw new ImageError(`truncated: ${what(p)} holds a ${mib(fs.sizeBytes)} file system in ${mib(p.sizeBytes)}; download or copy the image again`);
    }
    parts.push({ ...p, fs });
  }
  const readers = new Map(parts.filter((p) => p.fs.kind === 'ext').map((p) => [p, new ExtReader(rawPath, p.startBytes, what(p))]));

  // The root: the largest ext file system with a root's tree.
  const bySize = (a: ImagePartition, b: ImagePartition) => b.sizeBytes - a.sizeBytes;
  let root: ImagePartition | undefined;
  for (const p of [...readers.keys()].sort(bySize)) {
    if (await anyExists(readers.get(p)!, ROOT_MARKS)) {
      root = p;
      break;
    }
  }
  // No ext root: the likely root is the largest LUKS, LVM, xfs or btrfs partition. Only xfs and
  // btrfs go on, and only with an ext /boot of their own: the kernel mounts them, we never read them.
  const other = parts.filter((p) => ['luks', 'lvm', 'xfs', 'btrfs'].includes(p.fs.kind)).sort(bySize)[0];
  if (root === undefined && other !== undefined && (other.fs.kind === 'luks' || other.fs.kind === 'lvm')) throw refusal(other, what(other));
  const rootPart = root ?? other;

  // The boot file system: the root's /boot when it holds kernels or a configuration, else an ext partition of its own.
  let boot: { part: ImagePartition; dir: string } | undefined;
  if (root && (await holdsBoot(readers.get(root)!, '/boot'))) boot = { part: root, dir: '/boot' };
  for (const p of [...readers.keys()].sort(bySize)) {
    if (boot || p === root) continue;
    if (await holdsBoot(readers.get(p)!, '')) boot = { part: p, dir: '' };
  }
  if (rootPart === undefined) {
    const found = parts.slice(0, 8).map((p) => `${what(p)}: ${p.fs.kind}`).join(', ') + (parts.length > 8 ? `, and ${parts.length - 8} more` : '');
    const logical = layout.skippedLogical ? '; logical partitions (inside an extended one) are not read' : '';
    throw new ImageError(`no root file system: no partition is an ext file system with /etc/os-release, /sbin/init or /usr/lib/systemd (${found || 'no partitions'})${logical}`);
  }
  if (root === undefined && boot === undefined) throw refusal(rootPart, what(rootPart));
  if (boot === undefined) throw new ImageError(`no /boot: the root file system (${what(rootPart)}) has no kernel or boot configuration in /boot and no other ext partition holds one`);

  const reader = readers.get(boot.part)!;
  const entry = await bootEntry(reader, boot.dir, rootPart.fs.uuid);
  if (entry === undefined) throw new ImageError(`no kernel: ${what(boot.part)} has no grub.cfg, no loader/entries and no vmlinuz-* in ${boot.dir || '/'}`);
  const where = entry.source === 'grub' ? "grub.cfg's default entry" : entry.source === 'bls' ? 'the boot entry' : 'the newest kernel';
  const locate = async (path: string, kind: string): Promise<string> => {
    // A grub.cfg written for a separate /boot names /vmlinuz-...; one written for the root names /boot/vmlinuz-...
    const tries = [path, boot.dir === '/boot' && !path.startsWith('/boot/') ? `/boot${path}` : undefined, boot.dir === '' && path.startsWith('/boot/') ? path.slice(5) : undefined];
    for (const t of tries) {
      if (t === undefined) continue;
      const real = await reader.resolve(t);
      if (real === undefined) continue;
      const st = await reader.lstat(real);
      if (st?.type === 'file' && st.size > 0) return real;
      throw new ImageError(`${kind} ${quoteFromImage(path)} named by ${where} is ${st?.type === 'file' ? 'empty' : 'not a regular file'} in ${what(boot.part)}; fix the image`);
    }
    throw new ImageError(`no ${kind}: ${where} names ${quoteFromImage(path)}, which ${what(boot.part)} does not hold; fix the image's boot configuration`);
  };
  const kernel = await locate(entry.kernel, 'kernel');
  const initrds: string[] = [];
  for (const i of entry.initrds) initrds.push(await locate(i, 'initrd'));

  const rootReader = root && readers.get(root)!;
  const osRelease = rootReader && ((await rootReader.readText('/etc/os-release', 64 * 1024)) ?? (await rootReader.readText('/usr/lib/os-release', 64 * 1024)));
  const osName = prettyName(osRelease || undefined);
  return {
    bootPartition: boot.part,
    rootPartition: rootPart,
    kernel,
    ...(initrds.length > 0 ? { initrd: initrds.at(-1) } : {}),
    ...(initrds.length > 1 ? { earlyInitrds: initrds.slice(0, -1) } : {}),
    cmdline: entry.cmdline,
    config: entry.source,
    ...(rootPart.fs.uuid ? { rootUuid: rootPart.fs.uuid } : {}),
    ...(osName ? { osName } : {}),
  };
}

/** The image's size, its first bytes and a reader of each partition's first bytes. */
async function readLayout(rawPath: string) {
  let st;
  try {
    st = await stat(rawPath);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    throw new ImageError(code === 'ENOENT' || code === 'ENOTDIR' ? 'no such file' : `cannot be read (${code})`);
  }
  if (!st.isFile()) throw new ImageError('not a regular file; give the raw image file');
  const head = await readAt(rawPath, 0, Math.min(TABLE_PROBE_BYTES, st.size));
  // Partitions past the end were refused by the table parser before any is read.
  return { size: st.size, head, partitions: (p: Partition) => readAt(rawPath, p.startBytes, Math.min(FS_PROBE_BYTES, p.sizeBytes)) };
}

async function readAt(rawPath: string, at: number, len: number): Promise<Buffer> {
  const h = await open(rawPath, 'r').catch((e: NodeJS.ErrnoException) => {
    throw new ImageError(`cannot be read (${e.code}); check its permissions`);
  });
  try {
    const buf = Buffer.alloc(len);
    const { bytesRead } = await h.read(buf, 0, len, at);
    return buf.subarray(0, bytesRead);
  } finally {
    await h.close();
  }
}

/** The refusal for a root the import cannot read, with what to do instead. */
function refusal(p: ImagePartition, what: string): ImageError {
  const byHand = 'copy its /boot out with libguestfs (virt-copy-out -a IMAGE /boot .) and boot with unhalt run --kernel/--initrd/--append';
  switch (p.fs.kind) {
    case 'luks':
      return new ImageError(`refused: the root (${what}) is encrypted (LUKS); an encrypted root is not read here: unlock it and ${byHand}`);
    case 'lvm':
      return new ImageError(`refused: the root (${what}) is an LVM physical volume; LVM is not read here: ${byHand}`);
    default:
      return new ImageError(`refused: the root (${what}) is ${p.fs.kind}, which is not read without root here; ${byHand}, or convert the root to ext4`);
  }
}

async function anyExists(r: ExtReader, paths: string[]): Promise<boolean> {
  for (const p of paths) if ((await r.lstat(p)) !== undefined) return true;
  return false;
}

/** Whether `dir` of the file system holds a GRUB or BLS configuration or a vmlinuz-*. */
async function holdsBoot(r: ExtReader, dir: string): Promise<boolean> {
  const names = (await r.list(dir || '/'))?.map((e) => e.name) ?? [];
  if (names.some((n) => n.startsWith('vmlinuz-'))) return true;
  return (await anyExists(r, [`${dir}/grub/grub.cfg`, `${dir}/grub2/grub.cfg`, `${dir}/loader/entries`]));
}

/** The entry the image boots: grub.cfg's default (BLS when grub.cfg uses blscfg), BLS, else the newest kernel. */
async function bootEntry(r: ExtReader, dir: string, rootUuid: string | undefined): Promise<BootEntry | undefined> {
  let grubCfg: string | undefined;
  let env: Record<string, string> = {};
  for (const g of ['grub', 'grub2']) {
    grubCfg = await r.readText(`${dir}/${g}/grub.cfg`);
    if (grubCfg !== undefined) {
      env = parseGrubenv((await r.readText(`${dir}/${g}/grubenv`, 64 * 1024)) ?? '');
      break;
    }
  }
  if (grubCfg !== undefined && !/^\s*blscfg\b/m.test(grubCfg)) return parseGrubCfg(grubCfg, env);
  const confs = ((await r.list(`${dir}/loader/entries`)) ?? []).filter((e) => e.name.endsWith('.conf') && e.type !== 'dir');
  if (confs.length > 0) {
    const files = [];
    for (const c of confs) {
      const text = await r.readText(`${dir}/loader/entries/${c.name}`, 64 * 1024);
      if (text !== undefined) files.push({ name: c.name, text });
    }
    return parseBlsEntries(files, env);
  }
  if (grubCfg !== undefined) throw new ImageError(`grub.cfg loads boot entries (blscfg) but ${dir}/loader/entries holds none; fix the image's boot entries`);
  const names = ((await r.list(dir || '/')) ?? []).map((e) => e.name);
  return fallbackEntry(names, dir || '/', rootUuid);
}

/** PRETTY_NAME's value, printable and bounded. */
function prettyName(osRelease: string | undefined): string | undefined {
  const m = /^PRETTY_NAME=(.*)$/m.exec(osRelease ?? '');
  if (!m) return undefined;
  const v = m[1].trim().replace(/^(["'])(.*)\1$/, '$2').replace(/[^\x20-\x7e]/g, '').slice(0, 100);
  return v || undefined;
}

/** Names in the import's folder that are not the boot files' (image-import.ts writes them). */
export const RESERVED_NAMES = ['seed.iso', 'disk.raw'];

/** Copies `source`'s kernel and initrd (early images joined in front) into destDir. On failure destDir holds nothing new. */
export async function extractBootFiles(rawPath: string, source: BootSource, destDir: string): Promise<{ kernel: string; initrd?: string }> {
  const stage = await mkdtemp(join(destDir, '.unhalt-boot-')).catch((e: NodeJS.ErrnoException) => {
    throw new ImageError(`cannot write into ${shownPath(destDir)} (${e.code}); give a folder you can write`);
  });
  const reader = new ExtReader(rawPath, source.bootPartition.startBytes, source.bootPartition.index === 0 ? 'the whole-disk file system' : `partition ${source.bootPartition.index}`);
  // The image names them: never a name the importer uses in destDir (seed.iso, disk.raw), a hidden
  // one (the staging folder is .unhalt-boot-*), or a file already there.
  const own = (name: string) => (/^\./.test(name) || RESERVED_NAMES.includes(name) || existsSync(join(destDir, name)) ? `boot-${name.replace(/^\.+/, '')}` : name);
  const kernelName = own(basename(source.kernel));
  let initrdName = source.initrd !== undefined ? own(basename(source.initrd)) : undefined;
  if (initrdName === kernelName) initrdName = `initrd-${initrdName}`;
  const placed: string[] = [];
  try {
    await reader.dump(source.kernel, stage, 'kernel');
    if (source.initrd !== undefined) {
      const parts = [...(source.earlyInitrds ?? []), source.initrd];
      for (const [i, p] of parts.entries()) await reader.dump(p, stage, `initrd.${i}`);
      if (parts.length > 1) {
        // The kernel unpacks concatenated cpio archives in order, as GRUB loads several initrds.
        const joined = await Promise.all(parts.map((_, i) => readFile(join(stage, `initrd.${i}`))));
        await writeFile(join(stage, `initrd.${parts.length - 1}`), Buffer.concat(joined));
      }
    }
    const kernel = join(destDir, kernelName);
    await rename(join(stage, 'kernel'), kernel);
    placed.push(kernel);
    let initrd: string | undefined;
    if (initrdName !== undefined) {
      initrd = join(destDir, initrdName);
      await rename(join(stage, `initrd.${(source.earlyInitrds ?? []).length}`), initrd);
      placed.push(initrd);
    }
    return { kernel, ...(initrd ? { initrd } : {}) };
  } catch (e) {
    await Promise.all(placed.map((p) => rm(p, { force: true })));
    throw e instanceof ImageError ? new ImageError(`${shownPath(rawPath)}: ${e.message}`) : e;
  } finally {
    await rm(stage, { recursive: true, force: true });
  }
}

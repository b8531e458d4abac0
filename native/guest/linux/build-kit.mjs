#!/usr/bin/env node
// Builds the Linux guest kit into assets/guests/linux/ (an ignored folder):
//
//   bzImage               Debian's linux-image-*-cloud-amd64 /boot/vmlinuz-*
//   vmlinux               the ELF inside it (boots through PVH: CONFIG_PVH=y)
//   initramfs.cpio.gz     busybox (busybox-static), /init, /etc/inittab, our static agent
//                         (/sbin/unhalt-agent) and workloads (/bin/unhalt-workload), the kernel's
//                         virtio modules (/lib/modules/unhalt, loaded by /init)
//   kit.json              what went in (package versions, hashes): the cache stamp
//   host/                 the same workloads and agent built for this host (the bare-metal
//                         reference; build-workloads.mjs, also run on its own)
//
//   node native/guest/linux/build-kit.mjs [--force] [--quiet] [--kernel-package NAME]
//
// Plain Node, no dependencies. Packages come from `apt-get download` (no root needed) and are
// unpacked with `dpkg-deb -x`; the vmlinux extractor, the cpio writer and the LZ4 decoder are
// our own. Idempotent: a second run checks a stamp (the script, the agent's, workloads' and
// init's sources, and the apt package lists' state) and returns at once when nothing changed.
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, renameSync, rmSync, statSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { gunzipSync, gzipSync, constants as zc } from 'node:zlib';
import * as zlib from 'node:zlib';
import { buildLinuxBinaries, workloadInputs } from './build-workloads.mjs';
import { CpioWriter } from './cpio.mjs';
import { aptListsState, DebianPackages } from './debian-packages.mjs';
import { moduleLoadOrder } from './kernel-modules.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const root = resolve(here, '..', '..', '..');
const outDir = join(root, 'assets', 'guests', 'linux');
const INIT_DIR = join(here, 'rootfs');
const STAMP_VERSION = 1;
const KERNEL_META = 'linux-image-cloud-amd64';
const BUSYBOX = 'busybox-static';
// The virtio drivers the kit loads at boot (/init): Debian's cloud kernel builds them as modules,
// so a stock kernel finds our PCI devices exactly as it would under QEMU. Their dependencies come
// along (kernel-modules.mjs).
const KIT_MODULE_ROOTS = ['virtio_pci', 'virtio_rng', 'virtio_blk', 'virtio_net'];

// Compressed-kernel magics (what scripts/extract-vmlinux also looks for).
const MAGICS = [
  ['gzip', Buffer.from([0x1f, 0x8b, 0x08])],
  ['xz', Buffer.from([0xfd, 0x37, 0x7a, 0x58, 0x5a, 0x00])],
  ['zstd', Buffer.from([0x28, 0xb5, 0x2f, 0xfd])],
  ['lz4', Buffer.from([0x02, 0x21, 0x4c, 0x18])],
  ['lzma', Buffer.from([0x5d, 0x00, 0x00])],
  ['bzip2', Buffer.from('BZh')],
  ['lzo', Buffer.from([0x89, 0x4c, 0x5a, 0x4f, 0x00, 0x0d, 0x0a, 0x1a, 0x0a])],
];

const argv = process.argv.slice(2);
const flag = (f) => argv.includes(f);
const option = (name) => {
  const i = argv.indexOf(name);
  return i >= 0 ? argv[i + 1] : undefined;
};
const quiet = flag('--quiet');
const force = flag('--force');
const kernelPackageOverride = option('--kernel-package');
const t0 = performance.now();

function log(msg) {
  if (!quiet) process.stdout.write(`linux kit: ${msg}\n`);
}

function fail(msg) {
  process.stderr.write(`linux kit: ${msg}\n`);
  process.exit(1);
}

function run(cmd, args, opts = {}) {
  const r = spawnSync(cmd, args, { encoding: 'utf8', maxBuffer: 64 * 1024 * 1024, ...opts });
  if (r.error) return { ok: false, status: -1, stdout: '', stderr: String(r.error.message), missing: r.error.code === 'ENOENT' };
  return { ok: r.status === 0, status: r.status, stdout: r.stdout ?? '', stderr: r.stderr ?? '' };
}

function which(cmd) {
  for (const dir of (process.env.PATH ?? '/usr/bin:/bin').split(':')) {
    if (dir && existsSync(join(dir, cmd))) return join(dir, cmd);
  }
  return undefined;
}

const sha256 = (data) => createHash('sha256').update(data).digest('hex');

// --- the cache stamp -----------------------------------------------------------------------

function rootfsFiles() {
  return readdirSync(INIT_DIR, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile())
    .map((e) => relative(INIT_DIR, join(e.parentPath ?? e.path, e.name)))
    .sort();
}

function localInputsHash() {
  const h = createHash('sha256');
  for (const p of [fileURLToPath(import.meta.url), join(here, 'cpio.mjs'), join(here, 'kernel-modules.mjs'), join(here, 'debian-packages.mjs'), ...workloadInputs()]) h.update(readFileSync(p));
  for (const f of rootfsFiles()) h.update(f).update(readFileSync(join(INIT_DIR, f)));
  return h.digest('hex');
}

const OUTPUTS = ['bzImage', 'vmlinux', 'initramfs.cpio.gz'];
const stampPath = join(outDir, 'kit.json');

function readStamp() {
  try {
    return JSON.parse(readFileSync(stampPath, 'utf8'));
  } catch {
    return undefined;
  }
}

// The host build of the workloads first (cached by its own stamp): the bare-metal reference.
try {
  const host = buildLinuxBinaries({ log });
  if (host.built) log(`host workloads in ${relative(process.cwd(), dirname(host.workload)) || '.'}`);
} catch (e) {
  fail(e.message);
}

const localHash = localInputsHash();
const listsState = aptListsState();
const old = readStamp();
const sameInputs = (st) => !force && st && st.stampVersion === STAMP_VERSION && st.local === localHash
  && (st.kernelPackageOverride ?? null) === (kernelPackageOverride ?? null)
  && OUTPUTS.every((f) => existsSync(join(outDir, f)));
function upToDate(st) {
  log(`up to date in ${relative(process.cwd(), outDir) || outDir} (${st.kernel.package} ${st.kernel.version}, `
    + `busybox ${st.busybox.version}; --force rebuilds)`);
  process.exit(0);
}
if (sameInputs(old) && old.aptLists === listsState) upToDate(old);

// --- apt -----------------------------------------------------------------------------------

for (const tool of ['apt-get', 'apt-cache', 'dpkg-deb']) {
  if (!which(tool)) {
    fail(`${tool} not found: the Linux guest kit is built from Debian packages. `
      + 'Use --kernel/--initrd with your own files, or the probe guest.');
  }
}
const isRoot = process.getuid?.() === 0;
let updatedLists = false;

function aptUpdate(why) {
  if (!isRoot) {
    fail(`${why}: apt's package lists look stale or incomplete. Run "apt-get update" as root, then run this again.`);
  }
  log(`${why}: running apt-get update`);
  const r = run('apt-get', ['update', '-qq']);
  if (!r.ok) fail(`apt-get update failed:\n${r.stderr.trim()}`);
  updatedLists = true;
}

/** The candidate version apt would install, or undefined when apt does not know the package. */
function candidate(pkg) {
  const r = run('apt-cache', ['policy', pkg]);
  const m = /Candidate:\s*(\S+)/.exec(r.stdout);
  return m && m[1] !== '(none)' ? m[1] : undefined;
}

/** The newest cloud kernel image package: what the metapackage depends on, else the newest by name. */
function resolveKernelPackage() {
  if (kernelPackageOverride) return kernelPackageOverride;
  const dep = run('apt-cache', ['depends', KERNEL_META]);
  const m = /Depends:\s*(linux-image-\S+-cloud-amd64)\b/.exec(dep.stdout);
  if (m && candidate(m[1])) return m[1];
  const search = run('apt-cache', ['search', '--names-only', '^linux-image-[0-9].*-cloud-amd64(-unsigned)?$']);
  const names = search.stdout.split('\n').map((l) => l.split(' ')[0]).filter((n) => n && !n.endsWith('-dbg'));
  names.sort((a, b) => a.localeCompare(b, 'en', { numeric: true }));
  return names.at(-1);
}

let kernelPkg = resolveKernelPackage();
if (!kernelPkg || !candidate(BUSYBOX)) {
  aptUpdate(`apt knows no ${kernelPkg ? BUSYBOX : 'linux-image-*-cloud-amd64'} package`);
  kernelPkg = resolveKernelPackage();
  if (!kernelPkg) fail(`apt knows no linux-image-*-cloud-amd64 package even after apt-get update (is this Debian with main enabled?)`);
  if (!candidate(BUSYBOX)) fail(`apt knows no ${BUSYBOX} package even after apt-get update`);
}
const kernelVersion = candidate(kernelPkg);
if (!kernelVersion) fail(`apt knows no package named ${kernelPkg}`);
const busyboxVersion = candidate(BUSYBOX);
// The lists changed but name the same packages: nothing to rebuild.
if (sameInputs(old) && old.kernel.package === kernelPkg && old.kernel.version === kernelVersion
  && old.busybox.version === busyboxVersion) {
  writeFileSync(stampPath, `${JSON.stringify({ ...old, aptLists: aptListsState() }, null, 2)}\n`);
  upToDate(old);
}
log(`kernel ${kernelPkg} ${kernelVersion}, ${BUSYBOX} ${busyboxVersion}`);

const work = mkdtempSync(join(tmpdir(), 'unhalt-linux-kit-'));
process.on('exit', () => rmSync(work, { recursive: true, force: true }));

// Downloads (kept in .debs/ between builds) and unpacking: one rule with the workloads disk.
const apt = new DebianPackages({ cacheDir: join(outDir, '.debs'), workDir: work, log });
apt.updated = updatedLists;
function download(pkg, version) {
  try {
    return apt.download(pkg, version);
  } catch (e) {
    fail(e.message);
  }
}

function unpack(deb, name) {
  const dest = join(work, name);
  try {
    apt.unpack(deb, dest);
  } catch (e) {
    fail(e.message);
  }
  return dest;
}

const kernelTree = unpack(download(kernelPkg, kernelVersion), 'kernel');
const busyboxTree = unpack(download(BUSYBOX, busyboxVersion), 'busybox');

// --- bzImage and vmlinux -------------------------------------------------------------------

const bootDir = join(kernelTree, 'boot');
const vmlinuzName = existsSync(bootDir) ? readdirSync(bootDir).find((f) => f.startsWith('vmlinuz-')) : undefined;
if (!vmlinuzName) fail(`${kernelPkg} has no /boot/vmlinuz-*`);
const bzImage = readFileSync(join(bootDir, vmlinuzName));
log(`extracting vmlinux from ${vmlinuzName} (${(bzImage.length / 1048576).toFixed(1)} MiB)`);
const vmlinux = extractVmlinux(bzImage);

/** Finds the compressed kernel in a bzImage (by the header's payload fields, else by magic) and inflates it. */
function extractVmlinux(image) {
  const tried = [];
  const candidates = [];
  if (image.length > 0x250 && image.readUInt32LE(0x202) === 0x53726448 && image.readUInt16LE(0x206) >= 0x0208) {
    const setup = ((image[0x1f1] || 4) + 1) * 512;
    const off = setup + image.readUInt32LE(0x248);
    const len = image.readUInt32LE(0x24c);
    if (len > 0 && off + len <= image.length) candidates.push(image.subarray(off, off + len));
  }
  // The scripts/extract-vmlinux way, for images without payload fields: the first of each magic.
  for (const [, magic] of MAGICS) {
    const at = image.indexOf(magic);
    if (at >= 0) candidates.push(image.subarray(at));
  }
  for (const data of candidates) {
    const format = MAGICS.find(([, m]) => data.subarray(0, m.length).equals(m))?.[0];
    if (!format) continue;
    let out;
    try {
      out = decompress(format, data);
    } catch (e) {
      tried.push(`${format}: ${e.message}`);
      continue;
    }
    if (out && out.length > 64 && out.readUInt32BE(0) === 0x7f454c46) return trimElf(out);
    tried.push(`${format}: not an ELF`);
  }
  fail(`could not find the compressed vmlinux inside the bzImage (${tried.join('; ') || 'no known magic'})`);
}


function decompress(format, data) {
  switch (format) {
    case 'gzip': return gunzipSync(data, { finishFlush: zc.Z_SYNC_FLUSH });
    case 'zstd':
      if (typeof zlib.zstdDecompressSync === 'function') return zlib.zstdDecompressSync(data);
      return tool('zstd', ['-dc'], data);
    case 'lz4': return lz4LegacyDecode(data);
    case 'xz': return tool('xz', ['-dc', '--single-stream'], data);
    case 'lzma': return tool('xz', ['-dc', '--format=lzma'], data);
    case 'bzip2': return tool('bzip2', ['-dc'], data);
    case 'lzo': return tool('lzop', ['-dc'], data);
  }
  throw new Error(`unknown format ${format}`);
}

/** Runs a decompressor; a trailing-garbage complaint is fine as long as output came out. */
function tool(cmd, args, data) {
  const r = spawnSync(cmd, args, { input: data, maxBuffer: 1 << 30 });
  if (r.error) throw new Error(`${cmd} not available (${r.error.code ?? r.error.message})`);
  if (!r.stdout || r.stdout.length === 0) throw new Error(`${cmd} produced nothing: ${String(r.stderr).trim()}`);
  return r.stdout;
}

/**
 * LZ4 "legacy" frames (what the kernel's lz4 -l build uses): magic 0x184C2102, then blocks of
 * { u32 compressed size, LZ4 block }, each inflating to at most 8 MiB; a size equal to the magic
 * starts a new frame; the kernel appends the uncompressed size (u32) after the last block.
 */
function lz4LegacyDecode(data) {
  const MAGIC = 0x184c2102;
  const BLOCK_MAX = 8 << 20;
  const chunks = [];
  let p = 4;
  const expected = data.length >= 8 ? data.readUInt32LE(data.length - 4) : 0;
  let total = 0;
  while (p + 4 <= data.length) {
    const size = data.readUInt32LE(p);
    p += 4;
    if (size === MAGIC) continue;
    if (size === 0 || p + size > data.length) break; // the trailing size word, or the end
    const out = Buffer.allocUnsafe(BLOCK_MAX);
    const n = lz4Block(data, p, p + size, out);
    chunks.push(out.subarray(0, n));
    total += n;
    p += size;
    if (expected && total >= expected) break;
  }
  if (chunks.length === 0) throw new Error('no LZ4 blocks');
  return Buffer.concat(chunks, total);
}

function lz4Block(src, ip, end, dst) {
  let op = 0;
  while (ip < end) {
    const token = src[ip++];
    let lit = token >> 4;
    if (lit === 15) {
      let b;
      do { b = src[ip++]; lit += b; } while (b === 255);
    }
    if (op + lit > dst.length || ip + lit > end) throw new Error('corrupt LZ4 block (literals)');
    src.copy(dst, op, ip, ip + lit);
    ip += lit;
    op += lit;
    if (ip >= end) break; // the last sequence has literals only
    const offset = src[ip] | (src[ip + 1] << 8);
    ip += 2;
    let len = token & 15;
    if (len === 15) {
      let b;
      do { b = src[ip++]; len += b; } while (b === 255);
    }
    len += 4;
    if (offset === 0 || offset > op || op + len > dst.length) throw new Error('corrupt LZ4 block (match)');
    if (offset >= len) {
      dst.copy(dst, op, op - offset, op - offset + len);
      op += len;
    } else {
      for (let i = 0; i < len; i++, op++) dst[op] = dst[op - offset];
    }
  }
  return op;
}

/** Cuts what follows the ELF image (the relocation table the decompressor appends). */
function trimElf(b) {
  if (b[4] !== 2) return b;
  const phoff = Number(b.readBigUInt64LE(32));
  const shoff = Number(b.readBigUInt64LE(40));
  const phentsize = b.readUInt16LE(54);
  const phnum = b.readUInt16LE(56);
  const shentsize = b.readUInt16LE(58);
  const shnum = b.readUInt16LE(60);
  let end = Math.max(64, phoff + phnum * phentsize, shoff + shnum * shentsize);
  for (let i = 0; i < phnum; i++) {
    const o = phoff + i * phentsize;
    end = Math.max(end, Number(b.readBigUInt64LE(o + 8)) + Number(b.readBigUInt64LE(o + 32)));
  }
  for (let i = 0; i < shnum; i++) {
    const o = shoff + i * shentsize;
    const type = b.readUInt32LE(o + 4);
    if (type !== 8) end = Math.max(end, Number(b.readBigUInt64LE(o + 24)) + Number(b.readBigUInt64LE(o + 32))); // not NOBITS
  }
  return end < b.length ? b.subarray(0, end) : b;
}

// --- the agent -----------------------------------------------------------------------------

let guestBins;
try {
  guestBins = buildLinuxBinaries({ outDir: join(work, 'static'), static: true, force: true, log: (m) => log(`guest: ${m}`) });
} catch (e) {
  fail(e.message);
}

// --- the initramfs -------------------------------------------------------------------------

const busyboxPath = ['bin/busybox', 'usr/bin/busybox'].map((p) => join(busyboxTree, p)).find((p) => existsSync(p));
if (!busyboxPath) fail(`${BUSYBOX} has no bin/busybox`);
const applets = run(busyboxPath, ['--list-full']);
if (!applets.ok) fail(`cannot list busybox applets (${busyboxPath} --list-full): ${applets.stderr.trim()}`);

const cpio = new CpioWriter();
for (const d of ['bin', 'sbin', 'usr', 'usr/bin', 'usr/sbin', 'dev', 'proc', 'sys', 'tmp', 'run', 'root', 'etc', 'mnt', 'var']) {
  cpio.dir(d, d === 'tmp' ? 0o1777 : 0o755);
}
cpio.charDev('dev/console', 0o600, 5, 1);
cpio.charDev('dev/null', 0o666, 1, 3);
cpio.charDev('dev/ttyS0', 0o660, 4, 64);
cpio.charDev('dev/ttyS1', 0o660, 4, 65);
cpio.file('bin/busybox', readFileSync(busyboxPath), 0o755);
const seen = new Set(['bin/busybox']);
for (const line of applets.stdout.split('\n')) {
  const path = line.trim().replace(/^\/+/, '');
  if (!path || seen.has(path) || !/^(usr\/)?s?bin\/[A-Za-z0-9_.[-]+$/.test(path)) continue;
  seen.add(path);
  cpio.symlink(path, '/bin/busybox');
}
// /lib/modules/unhalt: the drivers and `order`, the sequence init loads them in.
const modulesRoot = join(kernelTree, 'lib', 'modules');
const release = readdirSync(modulesRoot)[0];
let moduleOrder;
try {
  moduleOrder = moduleLoadOrder(join(modulesRoot, release, 'kernel'), KIT_MODULE_ROOTS, kernelPkg);
} catch (e) {
  fail(e.message);
}
cpio.dir('lib', 0o755);
cpio.dir('lib/modules', 0o755);
cpio.dir('lib/modules/unhalt', 0o755);
for (const { name, file } of moduleOrder) cpio.file(`lib/modules/unhalt/${name}.ko`, readFileSync(file), 0o644);
cpio.file('lib/modules/unhalt/order', Buffer.from(`${moduleOrder.map((m) => m.name).join('\n')}\n`), 0o644);
cpio.file('sbin/unhalt-agent', readFileSync(guestBins.agent), 0o755);
cpio.file('bin/unhalt-workload', readFileSync(guestBins.workload), 0o755);
// The kernel's unpacker makes no parent folders: each of rootfs/'s comes first (etc/udhcpc...).
const made = new Set(['bin', 'sbin', 'usr', 'usr/bin', 'usr/sbin', 'dev', 'proc', 'sys', 'tmp', 'run', 'root', 'etc', 'mnt', 'var', 'lib', 'lib/modules', 'lib/modules/unhalt']);
for (const f of rootfsFiles()) {
  const parts = f.split('/').slice(0, -1);
  for (let i = 1; i <= parts.length; i++) {
    const d = parts.slice(0, i).join('/');
    if (!made.has(d)) {
      made.add(d);
      cpio.dir(d, 0o755);
    }
  }
}
for (const f of rootfsFiles()) {
  const mode = statSync(join(INIT_DIR, f)).mode & 0o111 ? 0o755 : 0o644;
  cpio.file(f, readFileSync(join(INIT_DIR, f)), mode);
}
const initramfs = gzipSync(cpio.finish(), { level: 9 });

// --- write out -----------------------------------------------------------------------------

mkdirSync(outDir, { recursive: true });
function writeAtomic(name, data) {
  const tmp = join(outDir, `.${name}.tmp-${process.pid}`);
  writeFileSync(tmp, data);
  renameSync(tmp, join(outDir, name));
}
writeAtomic('bzImage', bzImage);
writeAtomic('vmlinux', vmlinux);
writeAtomic('initramfs.cpio.gz', initramfs);
const stamp = {
  stampVersion: STAMP_VERSION,
  builtAt: new Date().toISOString(),
  local: localHash,
  aptLists: aptListsState(),
  kernelPackageOverride: kernelPackageOverride ?? null,
  kernel: { package: kernelPkg, version: kernelVersion, file: vmlinuzName, sha256: sha256(bzImage) },
  vmlinux: { sha256: sha256(vmlinux), bytes: vmlinux.length },
  busybox: { package: BUSYBOX, version: busyboxVersion },
  initramfs: { sha256: sha256(initramfs), bytes: initramfs.length, applets: seen.size - 1, modules: moduleOrder.map((m) => m.name) },
};
writeAtomic('kit.json', `${JSON.stringify(stamp, null, 2)}\n`);
const mib = (n) => (n / 1048576).toFixed(1);
log(`built ${relative(process.cwd(), outDir) || outDir}: bzImage ${mib(bzImage.length)} MiB, vmlinux ${mib(vmlinux.length)} MiB, `
  + `initramfs ${mib(initramfs.length)} MiB (${seen.size - 1} applets) in ${((performance.now() - t0) / 1000).toFixed(1)} s`);

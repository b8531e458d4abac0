#!/usr/bin/env node
// Builds what the nested lane boots as "L1" (a Linux under QEMU TCG whose /dev/kvm has hardware
// semantics, see docs/nested.md) into assets/nested/ (an ignored folder):
//
//   vmlinuz            the Linux kit's Debian cloud kernel (the same package the guest kit uses)
//   initramfs.cpio.gz  busybox-static + the kvm/kvm-amd/virtio modules of that package + /init,
//                      which loads them and switches to the root image
//   root.ext4          the root file system (mke2fs -d, no root needed): busybox, the Node that
//                      runs this script (Node 24 from the npm registry on CI), QEMU with the
//                      shared libraries it links, util-linux's setpriv/prlimit, and this checkout
//                      (tracked and untracked files, node_modules, built guests) at /project
//   stamp.json         what went in; each output is rebuilt only when its inputs' content changed
//
//   node test/nested/l1/build.mjs [--quiet]
//
// Needs the Linux kit built first (npm run build:linux): its kit.json names the kernel package and
// its .debs/ cache holds the packages. Prints one line per phase with its time.
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  chmodSync, copyFileSync, existsSync, lstatSync, mkdirSync, readFileSync, readdirSync, readlinkSync, realpathSync, renameSync,
  rmSync, statSync, symlinkSync, writeFileSync,
} from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { gzipSync } from 'node:zlib';
import { CpioWriter } from '../../../native/guest/linux/cpio.mjs';
import { moduleLoadOrder } from '../../../native/guest/linux/kernel-modules.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const root = resolve(here, '..', '..', '..');
const kitDir = join(root, 'assets', 'guests', 'linux');
export const NESTED_DIR = join(root, 'assets', 'nested');
const quiet = process.argv.includes('--quiet');
const t0 = performance.now();

// The modules L1 needs: KVM on AMD SVM (TCG's -cpu max is an AMD CPU), virtio-blk on PCI, TUN/TAP
// (the Linux network checks give L2 a tap in a network namespace of their own) and virtio-net (the
// e2e files' servers, reached from the outer host's browser through QEMU's user network). Their
// dependencies and load order come from each module's own depends= field (the package ships no
// modules.dep).
export const L1_MODULE_ROOTS = ['kvm_amd', 'virtio_pci', 'virtio_blk', 'tun', 'virtio_net'];
// Host programs the kvm and linux lanes run inside L1, copied with every library they link
// (e2fsprogs: the Linux disk checks make an ext4 image and read the guest's files back from it;
// iproute2's ip: busybox's has no netns or tuntap, which the network checks need; util-linux's
// unshare: the DNS checks give `unhalt run` a resolv.conf of their own in a mount namespace).
// qemu-img: the app's qcow2 conversion (an e2e file). chattr: virtio-blk's refusal of an image root may not write (chattr +i; L1's /tmp is a tmpfs, which takes it).
// xorriso and openssl: the import's cloud-init seed (a password's hash); ssh and ssh-keygen: a login with the seed's key through the forward.
const HOST_PROGRAMS = ['qemu-system-x86_64', 'qemu-img', 'setpriv', 'prlimit', 'mke2fs', 'debugfs', 'e2fsck', 'ip', 'unshare', 'chattr', 'xorriso', 'openssl', 'ssh', 'ssh-keygen'];
// /usr/lib/ipxe/qemu: Debian's QEMU looks there for a NIC's option ROM (efi-virtio.rom), and without
// it `-device virtio-net-pci` refuses to start (the virtio-net bench's QEMU side in L1 did).
const HOST_DATA_DIRS = ['/usr/share/qemu', '/usr/share/seabios', '/usr/lib/ipxe/qemu', '/etc/mke2fs.conf'];

function log(msg) {
  if (!quiet) process.stdout.write(`nested l1: ${msg} (${((performance.now() - t0) / 1000).toFixed(1)} s)\n`);
}
function fail(msg) {
  process.stderr.write(`nested l1: ${msg}\n`);
  process.exit(1);
}
function run(cmd, args, opts = {}) {
  const r = spawnSync(cmd, args, { encoding: 'utf8', maxBuffer: 256 * 1024 * 1024, ...opts });
  if (r.error) fail(`${cmd} could not run: ${r.error.message}`);
  if (r.status !== 0) fail(`${cmd} ${args.join(' ')} failed (status ${r.status}):\n${(r.stderr || r.stdout).trim()}`);
  return r.stdout;
}
function which(cmd) {
  for (const dir of (process.env.PATH ?? '/usr/bin:/bin').split(':')) if (dir && existsSync(join(dir, cmd))) return join(dir, cmd);
  fail(`${cmd} not found on PATH (the nested lane copies it into L1)`);
}
const sha = () => createHash('sha256');

// --- inputs -----------------------------------------------------------------------------------

let kit;
try { kit = JSON.parse(readFileSync(join(kitDir, 'kit.json'), 'utf8')); } catch { fail('the Linux kit is not built: run npm run build:linux first'); }
const debDir = join(kitDir, '.debs');
const debFor = (pkg, version) => {
  const f = join(debDir, `${pkg}_${version.replace(/:/g, '%3a')}_amd64.deb`);
  if (!existsSync(f)) fail(`${f} is missing: run npm run build:linux --force`);
  return f;
};
const kernelDeb = debFor(kit.kernel.package, kit.kernel.version);
const busyboxDeb = debFor(kit.busybox.package, kit.busybox.version);
mkdirSync(NESTED_DIR, { recursive: true });
const stampPath = join(NESTED_DIR, 'stamp.json');
let stamp = {};
try { stamp = JSON.parse(readFileSync(stampPath, 'utf8')); } catch { /* first build */ }

function writeAtomic(name, data) {
  const tmp = join(NESTED_DIR, `.${name}.tmp-${process.pid}`);
  writeFileSync(tmp, data);
  renameSync(tmp, join(NESTED_DIR, name));
}

// --- kernel and initramfs ---------------------------------------------------------------------

const bootKey = sha().update(readFileSync(kernelDeb)).update(readFileSync(busyboxDeb))
  .update(readFileSync(join(here, 'init'))).update(readFileSync(fileURLToPath(import.meta.url)))
  .update(readFileSync(join(root, 'native/guest/linux/kernel-modules.mjs'))).digest('hex');
const unpackDir = join(NESTED_DIR, 'unpacked');
function unpack(deb, name) {
  const dest = join(unpackDir, name);
  rmSync(dest, { recursive: true, force: true });
  mkdirSync(dest, { recursive: true });
  run('dpkg-deb', ['-x', deb, dest]);
  return dest;
}
if (stamp.boot !== bootKey || !existsSync(join(NESTED_DIR, 'vmlinuz')) || !existsSync(join(NESTED_DIR, 'initramfs.cpio.gz'))) {
  const kernelTree = unpack(kernelDeb, 'kernel');
  const busyboxTree = unpack(busyboxDeb, 'busybox');
  const modDir = join(kernelTree, 'lib', 'modules');
  const release = readdirSync(modDir)[0];
  const cpio = new CpioWriter();
  for (const d of ['bin', 'sbin', 'dev', 'proc', 'sys', 'newroot', 'modules']) cpio.dir(d, 0o755);
  cpio.charDev('dev/console', 0o600, 5, 1);
  cpio.charDev('dev/null', 0o666, 1, 3);
  cpio.file('bin/busybox', readFileSync(join(busyboxTree, 'bin', 'busybox')), 0o755);
  cpio.symlink('bin/sh', 'busybox');
  cpio.file('init', readFileSync(join(here, 'init')), 0o755);
  let order;
  try {
    order = moduleLoadOrder(join(modDir, release, 'kernel'), L1_MODULE_ROOTS, kit.kernel.package);
  } catch (e) {
    fail(e.message);
  }
  for (const { name, file } of order) cpio.file(`modules/${name}.ko`, readFileSync(file), 0o644);
  cpio.file('modules/order', Buffer.from(`${order.map((m) => m.name).join('\n')}\n`), 0o644);
  writeAtomic('initramfs.cpio.gz', gzipSync(cpio.finish(), { level: 6 }));
  copyFileSync(join(kitDir, 'bzImage'), join(NESTED_DIR, 'vmlinuz'));
  writeAtomic('busybox', readFileSync(join(busyboxTree, 'bin', 'busybox')));
  chmodSync(join(NESTED_DIR, 'busybox'), 0o755);
  rmSync(unpackDir, { recursive: true, force: true });
  stamp.boot = bootKey;
  writeAtomic('stamp.json', `${JSON.stringify(stamp, null, 2)}\n`);
  log(`kernel ${kit.kernel.package} ${kit.kernel.version} and initramfs with their modules`);
} else {
  log('kernel and initramfs up to date');
}

// --- the root image ---------------------------------------------------------------------------

/** path inside the image -> path on this host (files and symlinks; directories are implied). */
const entries = new Map();
const addHostFile = (hostPath, imagePath = hostPath) => {
  const st = lstatSync(hostPath);
  if (st.isSymbolicLink()) {
    entries.set(imagePath, { link: readlinkSync(hostPath) });
    const target = resolve(dirname(hostPath), readlinkSync(hostPath));
    if (!entries.has(target) && existsSync(target)) addHostFile(target, imagePath === hostPath ? target : resolve(dirname(imagePath), readlinkSync(hostPath)));
  } else if (st.isDirectory()) {
    for (const name of readdirSync(hostPath)) addHostFile(join(hostPath, name), join(imagePath, name));
  } else if (st.isFile()) {
    entries.set(imagePath, { file: hostPath, size: st.size, mode: st.mode & 0o777 });
  }
};
/** A program with every shared library it links (ldd's resolved paths and the loader). */
const addProgram = (path) => {
  addHostFile(path);
  addLibraries(path);
};
const addLibraries = (path) => {
  const ldd = spawnSync('ldd', [path], { encoding: 'utf8' });
  if (ldd.status !== 0) return; // not a dynamic object of this machine (an addon for another OS)
  for (const line of ldd.stdout.split('\n')) {
    const m = /=>\s*(\/\S+)/.exec(line) ?? /^\s*(\/\S+)\s*\(/.exec(line);
    if (m) { addHostFile(m[1]); const real = realpathSync(m[1]); if (real !== m[1]) addHostFile(real); }
  }
};
// Node as a file of the image's own, not at its host path: the checkout, and a Node fetched into
// it (.node/, by .ci/node-env.sh), may sit under /tmp, which L1 mounts a tmpfs over (a clone in
// /tmp once left L1 with no node at all).
const nodeBinary = realpathSync(process.execPath);
addLibraries(nodeBinary);
entries.set('/usr/local/bin/node', { file: nodeBinary, size: statSync(nodeBinary).size, mode: 0o755 });
for (const p of HOST_PROGRAMS) addProgram(realpathSync(which(p)));
for (const p of HOST_PROGRAMS) entries.set(`/usr/local/bin/${p}`, { link: realpathSync(which(p)) });
for (const d of HOST_DATA_DIRS) if (existsSync(d)) addHostFile(d);
entries.set('/bin/busybox', { file: join(NESTED_DIR, 'busybox'), size: statSync(join(NESTED_DIR, 'busybox')).size, mode: 0o755 });
entries.set('/sbin/l1-run-checks', { file: join(here, 'run-checks'), size: statSync(join(here, 'run-checks')).size, mode: 0o755 });
for (const [name, text] of Object.entries({
  '/etc/passwd': 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n',
  '/etc/group': 'root:x:0:\nnogroup:x:65534:\n',
  '/etc/hostname': 'unhalt-l1\n',
  // L1 has no network of its own; the DNS checks bind-mount a resolv.conf of theirs over this one.
  '/etc/resolv.conf': '',
})) entries.set(name, { text, mode: 0o644 });

// The checkout: what git knows (tracked and untracked, not ignored) plus what the lanes need built.
const gitFiles = run('git', ['-C', root, 'ls-files', '-z', '--cached', '--others', '--exclude-standard']).split('\0').filter(Boolean);
for (const f of gitFiles) if (existsSync(join(root, f))) addHostFile(join(root, f), join('/project', f));
// renderer/dist: the e2e files' servers serve the app the outer host built (vite under TCG takes minutes).
for (const d of ['node_modules', 'assets/guests', 'renderer/dist']) if (existsSync(join(root, d))) addHostFile(join(root, d), join('/project', d));
// Native addons (koffi, rolldown's binding) link libraries Node itself does not.
for (const e of [...entries.values()]) if (e.file?.endsWith('.node')) addLibraries(e.file);

const imageKey = sha();
for (const [path, e] of [...entries].sort(([a], [b]) => a.localeCompare(b))) {
  imageKey.update(`${path}\0${e.link ?? ''}\0${e.mode ?? ''}\0`);
  if (e.file) imageKey.update(readFileSync(e.file));
  if (e.text) imageKey.update(e.text);
}
const rootKey = imageKey.digest('hex');
const imagePath = join(NESTED_DIR, 'root.ext4');
if (stamp.root === rootKey && existsSync(imagePath)) {
  log(`root image up to date (${entries.size} files)`);
} else {
  const staging = join(NESTED_DIR, 'staging');
  rmSync(staging, { recursive: true, force: true });
  let bytes = 0;
  for (const [path, e] of entries) {
    const dest = join(staging, path);
    mkdirSync(dirname(dest), { recursive: true });
    if (e.link !== undefined) { rmSync(dest, { force: true }); symlinkSync(e.link, dest); continue; }
    if (e.text !== undefined) writeFileSync(dest, e.text);
    else copyFileSync(e.file, dest);
    chmodSync(dest, e.mode);
    bytes += e.size ?? 0;
  }
  for (const d of ['proc', 'sys', 'dev', 'tmp', 'run', 'root', 'results', 'mnt', 'usr/bin', 'usr/sbin', 'sbin']) mkdirSync(join(staging, d), { recursive: true });
  // busybox supplies sh and the usual tools; /bin/sh must exist before --install runs in L1.
  symlinkSync('busybox', join(staging, 'bin', 'sh'));
  const sizeMiB = Math.ceil((bytes * 1.25) / 1048576) + 512;
  rmSync(imagePath, { force: true });
  const tmp = join(NESTED_DIR, `.root.ext4.tmp-${process.pid}`);
  run('mke2fs', ['-q', '-F', '-t', 'ext4', '-E', 'root_owner=0:0', '-L', 'l1root', '-d', staging, tmp, `${sizeMiB}M`]);
  renameSync(tmp, imagePath);
  rmSync(staging, { recursive: true, force: true });
  stamp.root = rootKey;
  writeAtomic('stamp.json', `${JSON.stringify(stamp, null, 2)}\n`);
  log(`root image: ${entries.size} files, ${(bytes / 1048576).toFixed(0)} MiB in a ${sizeMiB} MiB ext4`);
}
log(`ready in ${relative(process.cwd(), NESTED_DIR) || NESTED_DIR}`);

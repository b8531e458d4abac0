#!/usr/bin/env node
// Builds a Debian root file system on a raw ext4 image, the way a user would make one for
// `unhalt run --kernel ... --initrd ... --disk root.img --append 'root=/dev/vda ...'`
// (docs/own-guest.md), into assets/guests/linux/debian-root.ext4 (an ignored folder):
//
//   mmdebstrap --variant=minbase --include=busybox,initramfs-tools,KERNEL=VERSION SUITE DIR
//   mke2fs -t ext4 -d DIR debian-root.ext4
//
// KERNEL is the Linux kit's own kernel package (assets/guests/linux/kit.json), so the root holds
// the distribution's kernel in /boot with the initrd Debian's own initramfs-tools made for it
// (its postinst ran update-initramfs: udev, kmod, MODULES=most): exactly what a user boots from
// a Debian install, and nothing of ours. The test takes /boot/vmlinuz-* and /boot/initrd.img-*
// out of the image (debugfs) and boots them with the image as /dev/vda.
//
//   node native/guest/linux/build-debian-root.mjs [--force] [--quiet] [--suite bookworm]
//
// Needs root (mmdebstrap --mode=root) and mmdebstrap (Debian: apt-get install mmdebstrap), and the
// Linux kit built first (npm run build:linux). Cached: a stamp of this script, the suite, the
// kernel and apt's package lists makes a second run instant. The nested lane builds it before
// L1's image (test/nested/l1/build.mjs), and L1 boots it (test/linux/linux-workloads.test.ts).
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { aptListsState } from './debian-packages.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const outDir = join(resolve(here, '..', '..', '..'), 'assets', 'guests', 'linux');
const argv = process.argv.slice(2);
const option = (n) => { const i = argv.indexOf(n); return i >= 0 ? argv[i + 1] : undefined; };
const suite = option('--suite') ?? (/^(\d+)/.exec(readFileSync('/etc/debian_version', 'utf8'))?.[1] === '12' ? 'bookworm' : 'stable');
const quiet = argv.includes('--quiet');
const log = (m) => { if (!quiet) process.stdout.write(`debian root: ${m}\n`); };
const fail = (m) => { process.stderr.write(`debian root: ${m}\n`); process.exit(1); };
const IMAGE = join(outDir, 'debian-root.ext4');
const STAMP = join(outDir, 'debian-root.json');
let kernel;
try {
  kernel = JSON.parse(readFileSync(join(outDir, 'kit.json'), 'utf8')).kernel;
} catch { /* said below */ }
if (!kernel?.package || !kernel?.version || !kernel?.file) fail(`no Linux kit in ${outDir} (npm run build:linux first): its kernel package is the root's`);
const key = createHash('sha256').update(readFileSync(fileURLToPath(import.meta.url))).update(suite).update(`${kernel.package}=${kernel.version}`)
  .update(aptListsState()).digest('hex');
try {
  if (!argv.includes('--force') && JSON.parse(readFileSync(STAMP, 'utf8')).key === key && existsSync(IMAGE)) {
    log(`up to date: ${IMAGE} (--force rebuilds)`);
    process.exit(0);
  }
} catch { /* no stamp yet */ }
if (process.getuid?.() !== 0) fail('mmdebstrap --mode=root needs root');
const staging = mkdtempSync(join(tmpdir(), 'unhalt-debian-root-'));
process.on('exit', () => rmSync(staging, { recursive: true, force: true }));
const include = `busybox,initramfs-tools,${kernel.package}=${kernel.version}`;
log(`mmdebstrap --variant=minbase --include=${include} ${suite}`);
const mm = spawnSync('mmdebstrap', ['--quiet', '--mode=root', '--variant=minbase', `--include=${include}`, suite, staging],
  { encoding: 'utf8', stdio: ['ignore', 'inherit', 'pipe'] });
if (mm.error) fail(mm.error.code === 'ENOENT' ? 'mmdebstrap not found (Debian: apt-get install mmdebstrap)' : mm.error.message);
if (mm.status !== 0) fail(`mmdebstrap failed: ${mm.stderr.trim().split('\n').slice(-5).join(' | ')}`);
// The release as the package installs it (/boot/vmlinuz-RELEASE): the kit recorded that file's name.
const release = kernel.file.replace(/^vmlinuz-/, '');
for (const f of [`vmlinuz-${release}`, `initrd.img-${release}`]) {
  if (!existsSync(join(staging, 'boot', f))) fail(`the root has no /boot/${f}: ${kernel.package}'s postinst made no initrd`);
}
const du = spawnSync('du', ['-sm', staging], { encoding: 'utf8' });
const sizeMiB = Math.ceil(Number(du.stdout.split('\t')[0]) * 1.3) + 128;
const tmp = join(outDir, `.debian-root.ext4.tmp-${process.pid}`);
const mk = spawnSync('mke2fs', ['-q', '-F', '-t', 'ext4', '-L', 'debian-root', '-d', staging, tmp, `${sizeMiB}M`], { encoding: 'utf8' });
if (mk.status !== 0) { rmSync(tmp, { force: true }); fail(`mke2fs failed: ${mk.stderr}`); }
renameSync(tmp, IMAGE);
writeFileSync(STAMP, `${JSON.stringify({ key, suite, kernel: `${kernel.package}=${kernel.version}`, vmlinuz: `/boot/vmlinuz-${release}`,
  initrd: `/boot/initrd.img-${release}`, builtAt: new Date().toISOString(), sizeMiB }, null, 2)}\n`);
log(`built ${IMAGE}: Debian ${suite} minbase with ${kernel.package} and its initrd in a ${sizeMiB} MiB ext4`);

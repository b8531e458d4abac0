#!/usr/bin/env node
// Builds a distribution cloud image the way Debian's own genericcloud images are laid out, from
// Debian packages only, into assets/guests/linux/cloud-image.raw (an ignored folder): the test
// data for `unhalt import` (docs/own-guest.md) — a user's image, not ours:
//
//   mmdebstrap --variant=minbase --include=systemd-sysv,udev,cloud-init,openssh-server,sudo,
//     initramfs-tools,ifupdown,isc-dhcp-client,locales,KERNEL=VERSION SUITE DIR        (KERNEL: the Linux kit's kernel package)
//   GPT: p1 root ext4 (label "root", /boot inside it), p14 BIOS boot, p15 EFI system (vfat)
//   /boot/grub/grub.cfg as grub-mkconfig writes it: a default entry with
//     linux /boot/vmlinuz-RELEASE root=PARTUUID=... ro console=tty0 console=ttyS0,115200 ...
//
// No boot loader is installed (Unhalt boots the kernel directly, and so does the import); the rest
// is what cloud-init needs to apply a NoCloud seed: systemd, ifupdown with a DHCP client (as
// Debian 12's cloud images: cloud-init writes /etc/network/interfaces.d), sshd, and locales
// (cloud-init sets en_US.UTF-8 and reports an error without them).
//
//   node native/guest/linux/build-cloud-image.mjs [--force] [--quiet] [--suite bookworm]
//
// Needs root (mmdebstrap --mode=root) and the Linux kit built first (npm run build:linux).
// Cached: a stamp of this script, the suite, the kernel and apt's lists makes a second run instant.
import { spawnSync } from 'node:child_process';
import { createHash, randomUUID } from 'node:crypto';
import { closeSync, existsSync, mkdirSync, mkdtempSync, openSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
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
const log = (m) => { if (!quiet) process.stdout.write(`cloud image: ${m}\n`); };
const fail = (m) => { process.stderr.write(`cloud image: ${m}\n`); process.exit(1); };
export const CLOUD_IMAGE = join(outDir, 'cloud-image.raw');
const STAMP = join(outDir, 'cloud-image.json');
const MiB = 1024 * 1024;

let kernel;
try {
  kernel = JSON.parse(readFileSync(join(outDir, 'kit.json'), 'utf8')).kernel;
} catch { /* said below */ }
if (!kernel?.package || !kernel?.version || !kernel?.file) fail(`no Linux kit in ${outDir} (npm run build:linux first): its kernel package is the image's`);
const key = createHash('sha256').update(readFileSync(fileURLToPath(import.meta.url))).update(suite).update(`${kernel.package}=${kernel.version}`)
  .update(aptListsState()).digest('hex');
try {
  if (!argv.includes('--force') && JSON.parse(readFileSync(STAMP, 'utf8')).key === key && existsSync(CLOUD_IMAGE)) {
    log(`up to date: ${CLOUD_IMAGE} (--force rebuilds)`);
    process.exit(0);
  }
} catch { /* no stamp yet */ }
if (process.getuid?.() !== 0) fail('mmdebstrap --mode=root needs root');

const run = (cmd, args, what, opts = {}) => {
  const r = spawnSync(cmd, args, { encoding: 'utf8', stdio: ['pipe', 'pipe', 'pipe'], ...opts });
  if (r.error) fail(r.error.code === 'ENOENT' ? `${cmd} not found (${what})` : `${cmd}: ${r.error.message}`);
  if (r.status !== 0) fail(`${cmd} failed (${what}): ${(r.stderr || r.stdout).trim().split('\n').slice(-5).join(' | ')}`);
  return r.stdout;
};

const started = Date.now();
const staging = mkdtempSync(join(tmpdir(), 'unhalt-cloud-image-'));
process.on('exit', () => rmSync(staging, { recursive: true, force: true }));
const root = join(staging, 'root');
const include = ['systemd-sysv', 'udev', 'kmod', 'cloud-init', 'openssh-server', 'sudo', 'initramfs-tools', 'iproute2', 'ifupdown', 'isc-dhcp-client', 'locales', `${kernel.package}=${kernel.version}`].join(',');
log(`mmdebstrap --variant=minbase --include=${include} ${suite}`);
// cloud-init sets LANG=en_US.UTF-8 unless told otherwise: generate it, as an installed system has it.
const locale = 'echo "en_US.UTF-8 UTF-8" > "$1/etc/locale.gen" && chroot "$1" locale-gen';
run('mmdebstrap', ['--quiet', '--mode=root', '--variant=minbase', `--include=${include}`, `--customize-hook=${locale}`, suite, root],
  'Debian: apt-get install mmdebstrap', { stdio: ['ignore', 'inherit', 'pipe'] });
const release = kernel.file.replace(/^vmlinuz-/, '');
for (const f of [`vmlinuz-${release}`, `initrd.img-${release}`]) {
  if (!existsSync(join(root, 'boot', f))) fail(`the root has no /boot/${f}: ${kernel.package}'s postinst made no initrd`);
}

// The partitions' identities, fixed here so the grub.cfg and fstab name them as an installer would.
const rootPartUuid = randomUUID();
const rootFsUuid = randomUUID();
const efiSerial = createHash('sha256').update(rootFsUuid).digest('hex').slice(0, 8).toUpperCase();
writeFileSync(join(root, 'etc', 'fstab'), `PARTUUID=${rootPartUuid} / ext4 rw,discard,errors=remount-ro,x-systemd.growfs 0 1\n`);
writeFileSync(join(root, 'etc', 'hostname'), 'localhost\n');
// cloud-init: only the NoCloud seed (no network metadata services to wait for).
writeFileSync(join(root, 'etc', 'cloud', 'cloud.cfg.d', '90-datasource.cfg'), 'datasource_list: [ NoCloud, None ]\n');
mkdirSync(join(root, 'boot', 'grub'), { recursive: true });
const cmdline = `root=PARTUUID=${rootPartUuid} ro console=tty0 console=ttyS0,115200 earlyprintk=ttyS0,115200 consoleblank=0`;
writeFileSync(join(root, 'boot', 'grub', 'grub.cfg'), [
  '#',
  '# DO NOT EDIT THIS FILE',
  '#',
  '# It is automatically generated by grub-mkconfig using templates',
  '#',
  'set default="0"',
  'set timeout=0',
  'insmod part_gpt',
  'insmod ext2',
  `search --no-floppy --fs-uuid --set=root ${rootFsUuid}`,
  `menuentry 'Debian GNU/Linux' --class debian --class gnu-linux --class gnu --class os $menuentry_id_option 'gnulinux-simple-${rootFsUuid}' {`,
  '\tload_video',
  '\tinsmod gzio',
  `\tsearch --no-floppy --fs-uuid --set=root ${rootFsUuid}`,
  `\techo\t'Loading Linux ${release} ...'`,
  `\tlinux\t/boot/vmlinuz-${release} ${cmdline}`,
  "\techo\t'Loading initial ramdisk ...'",
  `\tinitrd\t/boot/initrd.img-${release}`,
  '}',
  `submenu 'Advanced options for Debian GNU/Linux' $menuentry_id_option 'gnulinux-advanced-${rootFsUuid}' {`,
  `\tmenuentry 'Debian GNU/Linux, with Linux ${release} (recovery mode)' --class debian {`,
  `\t\tlinux\t/boot/vmlinuz-${release} root=PARTUUID=${rootPartUuid} ro single`,
  `\t\tinitrd\t/boot/initrd.img-${release}`,
  '\t}',
  '}',
  '',
].join('\n'));

// The root file system: its content plus room, in a partition image; then the disk around it.
const du = spawnSync('du', ['-sm', root], { encoding: 'utf8' });
const rootMiB = Math.ceil(Number(du.stdout.split('\t')[0]) * 1.25) + 256;
const rootImg = join(staging, 'root.ext4');
run('mke2fs', ['-q', '-F', '-t', 'ext4', '-L', 'root', '-U', rootFsUuid, '-d', root, rootImg, `${rootMiB}M`], 'e2fsprogs');
const efiImg = join(staging, 'efi.vfat');
closeSync(openSync(efiImg, 'w'));
run('truncate', ['-s', '8M', efiImg], 'coreutils');
run('mkfs.vfat', ['-n', 'UEFI', '-i', efiSerial, efiImg], 'Debian: apt-get install dosfstools');

// Debian's layout: p14 BIOS boot (3 MiB) and p15 EFI at the front, p1 the root after them.
const biosStart = 2048;
const efiStart = biosStart + 3 * 2048;
const rootStart = efiStart + 8 * 2048;
const totalSectors = rootStart + rootMiB * 2048 + 2048;
// Its name ends in a letter: sfdisk takes a partition's number from the digits after the disk's name.
const tmp = join(outDir, `.cloud-image-${process.pid}.tmp`);
closeSync(openSync(tmp, 'w'));
process.on('exit', () => rmSync(tmp, { force: true })); // a failed build leaves no half image (renamed away when it works)
run('truncate', ['-s', String(totalSectors * 512), tmp], 'coreutils');
const table = [
  'label: gpt',
  `${tmp}1 : start=${rootStart}, size=${rootMiB * 2048}, type=0FC63DAF-8483-4772-8E79-3D69D8477DE4, uuid=${rootPartUuid}`,
  `${tmp}14 : start=${biosStart}, size=${3 * 2048}, type=21686148-6449-6E6F-744E-656564454649`,
  `${tmp}15 : start=${efiStart}, size=${8 * 2048}, type=C12A7328-F81F-11D2-BA4B-00A0C93EC93B`,
  '',
].join('\n');
run('sfdisk', ['--quiet', '--no-reread', '--no-tell-kernel', tmp], 'Debian: apt-get install fdisk', { input: table });
for (const [img, start] of [[rootImg, rootStart], [efiImg, efiStart]]) {
  run('dd', [`if=${img}`, `of=${tmp}`, 'bs=1M', `seek=${start * 512}`, 'oflag=seek_bytes', 'conv=notrunc,sparse', 'status=none'], 'coreutils');
}
renameSync(tmp, CLOUD_IMAGE);
writeFileSync(STAMP, `${JSON.stringify({
  key, suite, kernel: `${kernel.package}=${kernel.version}`, release, vmlinuz: `/boot/vmlinuz-${release}`, initrd: `/boot/initrd.img-${release}`,
  cmdline, rootPartUuid, rootFsUuid, rootPartition: 1, sizeMiB: Math.ceil(totalSectors / 2048), builtAt: new Date().toISOString(),
}, null, 2)}\n`);
log(`built ${CLOUD_IMAGE}: Debian ${suite} with systemd, cloud-init, sshd and ${kernel.package}, GPT (root p1 ${rootMiB} MiB) in ${((Date.now() - started) / 1000).toFixed(1)} s`);

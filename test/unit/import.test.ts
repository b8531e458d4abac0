// `unhalt import` and the API's importImage on a real distribution cloud image, built from Debian
// packages (native/guest/linux/build-cloud-image.mjs: systemd, cloud-init, sshd, Debian's kernel
// and initramfs-tools, GPT, /boot/grub/grub.cfg): imported as raw and as qcow2 by an UNPRIVILEGED
// user (setpriv: CI runs as root, and root would hide a step that needs it). The image's bytes and
// mtime are the same afterwards; the kernel and initrd taken out are the image's own; the seed is
// a cidata ISO with the login; a stopped import or a refusal leaves nothing behind.
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { chmodSync, chownSync, existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createService, type UnhaltService } from '../../electron/service/service.ts';
import { rejection } from '../support/api-errors.ts';
import { runCli } from '../support/cli.ts';
import { CLOUD_IMAGE, ensureCloudImage, type CloudImageStamp } from '../support/cloud-image.ts';
import { scaled } from '../support/time-scale.ts';

const ROOT = new URL('../../', import.meta.url).pathname;
const NOBODY = 65534;
const AS_NOBODY = ['setpriv', `--reuid=${NOBODY}`, `--regid=${NOBODY}`, '--clear-groups', '--inh-caps=-all'];
const KEY = 'ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIH0dGVzdGtleXRlc3RrZXl0ZXN0a2V5dGVzdGtleXRlc3Q import-test@unhalt';

const sha256 = (file: string) => createHash('sha256').update(readFileSync(file)).digest('hex');
/** A file inside an ext4 partition of the image, as debugfs (run here, as root) reads it. */
function fromImage(image: string, offset: number, path: string): Buffer {
  const out = join(work, `dump-${path.replace(/\W/g, '_')}`);
  const r = spawnSync('debugfs', ['-R', `dump -p ${path} ${out}`, `${image}?offset=${offset}`], { encoding: 'utf8' });
  if (r.status !== 0 || !existsSync(out)) throw new Error(`debugfs could not read ${path}: ${r.stderr}`);
  return readFileSync(out);
}

let work = '';
let stamp: CloudImageStamp;
let imageSha = '';
let imageMtime = 0;

beforeAll(() => {
  stamp = ensureCloudImage();
  imageSha = sha256(CLOUD_IMAGE);
  imageMtime = statSync(CLOUD_IMAGE).mtimeMs;
  work = mkdtempSync(join(tmpdir(), 'unhalt-import-'));
  chmodSync(work, 0o755);
}, scaled(1_000_000));

afterAll(() => {
  if (work) rmSync(work, { recursive: true, force: true });
  // Whatever a check did, the user's image is as it was.
  expect(statSync(CLOUD_IMAGE).mtimeMs).toBe(imageMtime);
});

/** A home of its own for the unprivileged user: UNHALT_HOME and ~/.ssh with a public key. */
function nobodyHome(tag: string): { home: string; unhalt: string } {
  const home = join(work, tag);
  mkdirSync(join(home, '.ssh'), { recursive: true });
  writeFileSync(join(home, '.ssh', 'id_ed25519.pub'), `${KEY}\n`);
  for (const p of [home, join(home, '.ssh'), join(home, '.ssh', 'id_ed25519.pub')]) chownSync(p, NOBODY, NOBODY);
  return { home, unhalt: join(home, 'unhalt') };
}

function library(unhalt: string): { vms: { config: Record<string, unknown> & { disks: { path: string; readonly?: boolean }[] }; imported?: Record<string, unknown> }[] } {
  return JSON.parse(readFileSync(join(unhalt, 'vms.json'), 'utf8')) as never;
}

describe('unhalt import, as an unprivileged user', () => {
  it('a raw image: its own kernel, initrd and command line, a seed with the login, SSH forwarded; the image untouched', async () => {
    const { home, unhalt } = nobodyHome('raw');
    const r = await runCli(['import', CLOUD_IMAGE, '--name', 'debian-cloud'], { prefix: AS_NOBODY, env: { HOME: home, UNHALT_HOME: unhalt, USER: 'nobody' }, killAfterMs: scaled(300_000) });
    expect(r.stderr).toContain('imported');
    expect(r.code).toBe(0);
    const [vm] = library(unhalt).vms;
    expect(vm!.config).toMatchObject({ name: 'debian-cloud', guest: 'custom', cpus: 2, memoryMiB: 1024 });
    expect(vm!.config.append).toBe(`${stamp.cmdline}`);
    expect(vm!.config.append).toContain(`root=PARTUUID=${stamp.rootPartUuid}`);
    expect(vm!.config.net).toEqual({ mode: 'user', hostfwd: [{ protocol: 'tcp', hostAddress: '127.0.0.1', hostPort: vm!.imported!.sshPort, guestAddress: '10.0.2.15', guestPort: 22 }] });
    const dir = vm!.imported!.dir as string;
    expect(dir.startsWith(join(unhalt, 'imports'))).toBe(true);
    expect(vm!.config.disks[0]).toEqual({ path: CLOUD_IMAGE });
    expect(vm!.config.disks[1]).toEqual({ path: join(dir, 'seed.iso'), readonly: true });
    // The kernel and initrd are the image's own, byte for byte.
    const offset = 24576 * 512;
    expect(sha256(vm!.config.kernel as string)).toBe(createHash('sha256').update(fromImage(CLOUD_IMAGE, offset, stamp.vmlinuz)).digest('hex'));
    expect(sha256(vm!.config.initrd as string)).toBe(createHash('sha256').update(fromImage(CLOUD_IMAGE, offset, stamp.initrd)).digest('hex'));
    // Everything the import made belongs to the user who ran it.
    for (const f of readdirSync(dir)) expect(statSync(join(dir, f)).uid).toBe(NOBODY);
    // The seed, as cloud-init finds it: an ISO labelled cidata with the key.
    const seedDir = join(work, 'seed-raw');
    const x = spawnSync('xorriso', ['-osirrox', 'on', '-indev', join(dir, 'seed.iso'), '-extract', '/', seedDir], { encoding: 'utf8' });
    expect(x.status, x.stderr).toBe(0);
    expect(readFileSync(join(seedDir, 'user-data'), 'utf8')).toContain(KEY.split(' ')[1]);
    expect(readFileSync(join(seedDir, 'meta-data'), 'utf8')).toContain('debian-cloud');
    expect(r.stdout).toContain(`ssh -p ${vm!.imported!.sshPort}`);
    expect(sha256(CLOUD_IMAGE)).toBe(imageSha);
  }, scaled(360_000));

  it('a qcow2 image: converted to a raw copy under UNHALT_HOME with progress; the same boot files', async () => {
    const { home, unhalt } = nobodyHome('qcow2');
    const qcow2 = join(home, 'debian-12-genericcloud-amd64.qcow2');
    const c = spawnSync('qemu-img', ['convert', '-f', 'raw', '-O', 'qcow2', CLOUD_IMAGE, qcow2], { encoding: 'utf8' });
    expect(c.status, c.stderr).toBe(0);
    chownSync(qcow2, NOBODY, NOBODY);
    const qcowSha = sha256(qcow2);
    const r = await runCli(['import', qcow2], { prefix: AS_NOBODY, env: { HOME: home, UNHALT_HOME: unhalt, USER: 'nobody' }, killAfterMs: scaled(300_000) });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toMatch(/converting qcow2 to raw: 100%/);
    const [vm] = library(unhalt).vms;
    expect(vm!.config.name).toBe('debian-12-genericcloud-amd64');
    const raw = vm!.config.disks[0]!.path;
    expect(raw).toBe(join(vm!.imported!.dir as string, 'disk.raw'));
    expect(sha256(raw)).toBe(imageSha);
    expect(sha256(qcow2)).toBe(qcowSha);
  }, scaled(360_000));

  it('refusals are one line each and leave nothing behind', async () => {
    const { home, unhalt } = nobodyHome('refusals');
    const env = { HOME: home, UNHALT_HOME: unhalt, USER: 'nobody' };
    const text = join(home, 'notes.img');
    writeFileSync(text, 'not a disk image\n'.repeat(100));
    chownSync(text, NOBODY, NOBODY);
    const emptyPw = join(home, 'pw');
    writeFileSync(emptyPw, '\n');
    chownSync(emptyPw, NOBODY, NOBODY);
    // A FIFO with no writer, an endless device, a folder: refused unread (a FIFO once hung the import past SIGTERM).
    const fifo = join(home, 'key.fifo');
    expect(spawnSync('mkfifo', [fifo]).status).toBe(0);
    chownSync(fifo, NOBODY, NOBODY);
    const cases: [string[], RegExp][] = [
      [['import', CLOUD_IMAGE, '--ssh-key', fifo], /^unhalt: cannot read the SSH key .*key\.fifo: not a regular file$/],
      [['import', CLOUD_IMAGE, '--ssh-key', '/dev/zero'], /^unhalt: cannot read the SSH key \/dev\/zero: not a regular file$/],
      [['import', CLOUD_IMAGE, '--ssh-key', home], /^unhalt: cannot read the SSH key .*: not a regular file$/],
      [['import', CLOUD_IMAGE, '--password-file', fifo], /^unhalt: --password-file .*key\.fifo: cannot be read \(not a regular file\)$/],
      [['import', CLOUD_IMAGE, '--password-file', '/dev/zero'], /^unhalt: --password-file \/dev\/zero: cannot be read \(not a regular file\)$/],
      // A bad name is refused before the image is read (no step line before it).
      [['import', CLOUD_IMAGE, '--name', 'a/b\u001b[2J'], /^unhalt: name "a\/b\?\[2J" may use letters, digits/],
      [['import', join(home, 'missing.qcow2')], /missing\.qcow2: no such file; give the path of a cloud image/],
      // A path's line break or escape sequence is shown as '?', never sent to the terminal.
      [['import', join(home, 'missing\n\u001b[2J.qcow2')], /missing\?\?\[2J\.qcow2: no such file; give the path of a cloud image/],
      [['import', text], /notes\.img: not a disk image: it has no partition table \(GPT or MBR\) and no file system at its start$/],
      [['import', CLOUD_IMAGE, '--password-file', emptyPw], /its first line is empty/],
      [['import', CLOUD_IMAGE, '--ssh-key', join(home, 'nokey.pub')], /nokey\.pub/],
      [['import', CLOUD_IMAGE, '--user', 'Bad User'], /^unhalt: user "Bad User" is not a valid login/],
      [['import', CLOUD_IMAGE, '--cpus', 'two'], /--cpus must be a whole number/],
      [['import'], /name the image to import first/],
    ];
    for (const [args, message] of cases) {
      const r = await runCli(args, { prefix: AS_NOBODY, env, killAfterMs: scaled(120_000) });
      expect(r.code, `${args.join(' ')}: ${r.stderr}`).toBe(1);
      // The refusal is the last line, alone (steps the import had begun come before it).
      const lines = r.stderr.trim().split('\n');
      expect(lines.at(-1)).toMatch(message);
      if (args.includes('--name') || args.includes('--ssh-key') || /^\/dev\/|fifo$/.test(args.at(-1)!)) expect(lines, r.stderr).toHaveLength(1);
      expect(lines.slice(0, -1).every((l) => /^unhalt: (reading|found|writing|converting)/.test(l)), r.stderr).toBe(true);
    }
    expect(existsSync(join(unhalt, 'imports')) ? readdirSync(join(unhalt, 'imports')) : []).toEqual([]);
    expect(existsSync(join(unhalt, 'vms.json')) ? library(unhalt).vms : []).toEqual([]);
    expect(sha256(CLOUD_IMAGE)).toBe(imageSha);
  }, scaled(300_000));

  it('an UNHALT_HOME the user cannot write is one line, not a stack trace', async () => {
    const { home } = nobodyHome('readonly-home');
    const rootOwned = join(work, 'root-owned');
    mkdirSync(rootOwned, { mode: 0o755 });
    const r = await runCli(['import', CLOUD_IMAGE], { prefix: AS_NOBODY, env: { HOME: home, UNHALT_HOME: join(rootOwned, 'unhalt'), USER: 'nobody' }, killAfterMs: scaled(120_000) });
    expect(r.code, r.stderr).toBe(1);
    expect(r.stderr).toBe(`unhalt: cannot create the folder ${join(rootOwned, 'unhalt')}: permission denied (EACCES)\n`);
  }, scaled(180_000));

  it('SIGINT while a qcow2 converts: exit 130, no VM, nothing left under UNHALT_HOME/imports', async () => {
    const { home, unhalt } = nobodyHome('sigint');
    const qcow2 = join(home, 'img.qcow2');
    expect(spawnSync('qemu-img', ['convert', '-f', 'raw', '-O', 'qcow2', CLOUD_IMAGE, qcow2]).status).toBe(0);
    chownSync(qcow2, NOBODY, NOBODY);
    const { spawn } = await import('node:child_process');
    const child = spawn(AS_NOBODY[0]!, [...AS_NOBODY.slice(1), process.execPath, join(ROOT, 'bin/unhalt.mjs'), 'import', qcow2],
      { env: { ...process.env, HOME: home, UNHALT_HOME: unhalt, USER: 'nobody' }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stderr = '';
    const code = await new Promise<number | null>((done) => {
      child.stderr.on('data', (d: Buffer) => {
        stderr += d;
        if (/converting qcow2 to raw/.test(stderr) && !child.killed) child.kill('SIGINT');
      });
      child.on('close', done);
    });
    expect(code, stderr).toBe(130);
    expect(readdirSync(join(unhalt, 'imports'))).toEqual([]);
    expect(existsSync(join(unhalt, 'vms.json')) ? library(unhalt).vms : []).toEqual([]);
  }, scaled(300_000));
});

describe('importImage and deleteVm in the API', () => {
  let svc: UnhaltService;
  let home = '';
  beforeAll(async () => {
    home = join(work, 'api');
    mkdirSync(join(home, 'ssh'), { recursive: true });
    writeFileSync(join(home, 'ssh', 'key.pub'), `${KEY}\n`);
    svc = await createService({ home, lockTimeoutMs: 500 });
  });
  afterAll(() => svc?.shutdown());

  it('imports an image from an allowed folder, refuses one outside them, and deleting removes what it made, never the image', async () => {
    await svc.addAllowedFolder(join(ROOT, 'assets/guests/linux'));
    const outside = (await rejection(svc.importImage({ image: '/etc/hostname' }))).message;
    expect(outside).toMatch(/^image \/etc\/hostname is outside the folders Unhalt may give to a guest/);
    // Nothing outside can be probed: a missing image and a missing folder get the same answers.
    expect((await rejection(svc.importImage({ image: '/etc/nope' }))).message).toBe(outside.replace('/etc/hostname', '/etc/nope'));
    const listed = (await rejection(svc.listFolder('/etc/ssh'))).message;
    expect((await rejection(svc.listFolder('/etc/nope'))).message).toBe(listed.replace('/etc/ssh', '/etc/nope'));
    // Inside them, a missing folder is said to be missing.
    expect((await rejection(svc.listFolder(join(home, 'nope')))).message).toBe(`${join(home, 'nope')} cannot be listed (ENOENT)`);
    const listing = await svc.listFolder(join(ROOT, 'assets/guests/linux'));
    expect(listing.entries.find((e) => e.name === 'cloud-image.raw')).toMatchObject({ kind: 'file', image: 'raw' });
    const rec = await svc.importImage({ image: CLOUD_IMAGE, name: 'api-import', sshKeyFile: join(home, 'ssh', 'key.pub') });
    expect(rec.imported).toMatchObject({ image: CLOUD_IMAGE, os: expect.stringMatching(/Debian/) as unknown });
    const dir = rec.imported!.dir;
    expect(existsSync(join(dir, 'seed.iso'))).toBe(true);
    await svc.deleteVm(rec.id, true);
    expect(existsSync(dir)).toBe(false);
    expect(existsSync(CLOUD_IMAGE)).toBe(true);
    expect(sha256(CLOUD_IMAGE)).toBe(imageSha);
  }, scaled(300_000));

  /** A small whole-disk ext4 with a root and a kernel (mke2fs -d): quick to import many times. */
  function tinyImage(): string {
    const tree = join(home, 'tree');
    const image = join(home, 'tiny.img');
    if (existsSync(image)) return image;
    mkdirSync(join(tree, 'etc'), { recursive: true });
    mkdirSync(join(tree, 'sbin'), { recursive: true });
    mkdirSync(join(tree, 'boot'), { recursive: true });
    writeFileSync(join(tree, 'etc', 'os-release'), 'PRETTY_NAME="Tiny"\n');
    writeFileSync(join(tree, 'sbin', 'init'), '#!/bin/sh\n');
    // A kernel as far as the boot checks look (the boot protocol's "HdrS" at 0x202); never booted here.
    const kernel = Buffer.alloc(4096);
    kernel.write('HdrS', 0x202, 'latin1');
    writeFileSync(join(tree, 'boot', 'vmlinuz-1'), kernel);
    expect(spawnSync('mke2fs', ['-q', '-F', '-t', 'ext4', '-d', tree, image, '8M']).status).toBe(0);
    return image;
  }

  it('imports at the same time get different names and SSH ports; a name taken meanwhile is refused and leaves nothing', async () => {
    const image = tinyImage();
    const tree = join(home, 'tree');
    const key = join(home, 'ssh', 'key.pub');
    // A "kernel" that is not one is refused by the import, as a start would refuse it.
    writeFileSync(join(tree, 'boot', 'vmlinuz-2'), 'MZ not a kernel');
    const notKernel = join(home, 'not-kernel.img');
    expect(spawnSync('mke2fs', ['-q', '-F', '-t', 'ext4', '-d', tree, notKernel, '8M']).status).toBe(0);
    rmSync(join(tree, 'boot', 'vmlinuz-2'));
    expect((await rejection(svc.importImage({ image: notKernel, sshKeyFile: key }))).message).toBe(`${notKernel}: kernel /boot/vmlinuz-2 (in the image) is neither a PVH ELF, a Linux bzImage nor a multiboot kernel`);
    const before = existsSync(join(home, 'imports')) ? readdirSync(join(home, 'imports')).length : 0;
    const recs = await Promise.all([1, 2, 3].map(() => svc.importImage({ image, sshKeyFile: key })));
    expect(new Set(recs.map((r) => r.config.name)).size).toBe(3);
    expect(new Set(recs.map((r) => r.imported!.sshPort)).size).toBe(3);
    for (const r of recs) expect(r.config.net).toMatchObject({ hostfwd: [{ hostPort: r.imported!.sshPort }] });
    const both = await Promise.allSettled([svc.importImage({ image, sshKeyFile: key, name: 'same' }), svc.importImage({ image, sshKeyFile: key, name: 'Same' })]);
    expect(both.filter((b) => b.status === 'fulfilled')).toHaveLength(1);
    const lost = both.find((b) => b.status === 'rejected') as PromiseRejectedResult;
    expect((lost.reason as Error).message).toMatch(/^a VM named "[Ss]ame" already exists; choose another name with --name$/);
    expect(readdirSync(join(home, 'imports'))).toHaveLength(before + 4);
  }, scaled(120_000));

  it('deleting an imported VM keeps its folder while another VM uses it: a clone, or a hand-edited record', async () => {
    const image = tinyImage();
    const key = join(home, 'ssh', 'key.pub');
    // A clone boots the original's kernel, initrd, seed: deleting the original with its files must not take them.
    const orig = await svc.importImage({ image, sshKeyFile: key, name: 'orig' });
    const clone = await svc.cloneVm(orig.id, 'orig-clone');
    await svc.deleteVm(orig.id, true);
    expect(existsSync(clone.config.kernel!)).toBe(true);
    await svc.deleteVm(clone.id);
    // A record whose imported.dir was edited to name another VM's folder.
    const a = await svc.importImage({ image, sshKeyFile: key, name: 'edit-a' });
    const b = await svc.importImage({ image, sshKeyFile: key, name: 'edit-b' });
    await svc.shutdown();
    const file = join(home, 'vms.json');
    const lib = JSON.parse(readFileSync(file, 'utf8')) as { vms: { id: string; imported: { dir: string } }[] };
    lib.vms.find((v) => v.id === a.id)!.imported.dir = b.imported!.dir;
    writeFileSync(file, JSON.stringify(lib));
    svc = await createService({ home, lockTimeoutMs: 500 });
    await svc.deleteVm(a.id, true);
    expect(readdirSync(b.imported!.dir)).toContain('seed.iso');
    await svc.deleteVm(b.id, true);
    expect(existsSync(b.imported!.dir)).toBe(false);
  }, scaled(120_000));
});

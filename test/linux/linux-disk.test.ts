// virtio-blk with a stock Linux on hardware-semantics KVM (the nested lane's L1): Debian's own
// virtio_blk driver (a module the kit's /init loads) finds our disk as /dev/vda; the guest mounts
// an ext4 image the test made with `mke2fs -d`, reads the host's file, and what it writes and
// syncs is in the image afterwards, read on the host with debugfs — after a clean power-off, and
// after a SIGKILL of the `unhalt run` process right after the guest's `sync` returned (its
// journal replayed by e2fsck first, as the next boot would); a read-only disk is read-only to
// the kernel, refuses writes, and its file stays byte-identical.
import { spawn, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { resolveMachine } from '../../electron/vmm/config/resolve.ts';
import { validateConfig, type DiskConfig } from '../../electron/vmm/config/vm-config.ts';
import { linuxKitBuilt } from '../../electron/vmm/guests-linux.ts';
import { probeHost } from '../../electron/vmm/machine/host-caps.ts';
import { VirtualMachine } from '../../electron/vmm/vm.ts';
import { UNHALT_BIN } from '../support/cli.ts';
import { hardwareKvm, NEEDS_HARDWARE } from '../support/kvm-semantics.ts';
import { kvmAvailable, watch, type Watched } from '../support/probe.ts';
import { scaled } from '../support/time-scale.ts';
import { processConsole, shell as typeAndWait, vmConsole, waitForOutput } from '../support/guest-shell.ts';

const hw = kvmAvailable && linuxKitBuilt() && hardwareKvm();
if (!hw) console.log(`linux-disk: skipped: ${linuxKitBuilt() ? NEEDS_HARDWARE : 'the Linux kit is not built (npm run build:linux)'}`);

/** One step of a Linux guest on hardware semantics: ~20 s to the shell in L1, under a second on hardware. */
const STEP_MS = scaled(60_000);
const PROMPT = 'unhalt:~# ';
const dir = mkdtempSync(join(tmpdir(), 'unhalt-linux-disk-'));
const home = mkdtempSync(join(tmpdir(), 'unhalt-linux-disk-home-'));
const sha = (p: string) => createHash('sha256').update(readFileSync(p)).digest('hex');

let running: VirtualMachine | undefined;
const children: ReturnType<typeof spawn>[] = [];
afterEach(async () => {
  if (running && running.state !== 'stopped') await running.stop();
  running = undefined;
});
afterAll(() => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  rmSync(dir, { recursive: true, force: true });
  rmSync(home, { recursive: true, force: true });
});

/** Types `cmd` into the VM's shell and waits for `pattern` in what follows (guest-shell.ts). */
const shell = (g: Watched, cmd: string, pattern: RegExp) => typeAndWait(vmConsole(g), cmd, pattern, STEP_MS);

/** An ext4 image of 32 MiB holding /hello.txt, made the way a user would (mke2fs -d). */
function ext4Image(name: string): string {
  const content = join(dir, `${name}.d`);
  mkdirSync(content, { recursive: true });
  writeFileSync(join(content, 'hello.txt'), 'hello from the host\n');
  const img = join(dir, `${name}.img`);
  const r = spawnSync('mke2fs', ['-q', '-F', '-t', 'ext4', '-d', content, img, '32M'], { encoding: 'utf8' });
  expect(r.status, r.stderr).toBe(0);
  return img;
}

/** A file inside an ext4 image, read on the host (debugfs prints nothing for a missing one). */
function debugfsCat(img: string, path: string): string {
  const r = spawnSync('debugfs', ['-R', `cat ${path}`, img], { encoding: 'utf8' });
  expect(r.status, r.stderr).toBe(0);
  return r.stdout;
}

async function startLinux(disks: DiskConfig[]): Promise<Watched> {
  const { spec } = resolveMachine(validateConfig({ guest: 'linux', cpus: 2, memoryMiB: 512, name: 'linux-disk', disks }), probeHost());
  running = await VirtualMachine.start(spec);
  return watch(running);
}

describe.skipIf(!hw)('a virtio-blk disk under a stock Linux on hardware-semantics KVM', () => {
  it('Linux finds /dev/vda, mounts the host-made ext4, reads its file; what it writes and syncs is in the image after power-off', async () => {
    const img = ext4Image('rw');
    const g = await startLinux([{ path: img }]);
    await g.waitForConsole(PROMPT, STEP_MS);
    expect(g.console()).toMatch(/virtio_blk virtio\d+: \[vda\] 65536 512-byte logical blocks/);
    expect(await shell(g, 'cat /sys/block/vda/ro', /\n0\r?\n/)).toBeTruthy();
    await shell(g, 'mkdir -p /mnt && mount -t ext4 /dev/vda /mnt && echo mounted=$?', /mounted=0/);
    await shell(g, 'cat /mnt/hello.txt', /hello from the host/);
    await shell(g, 'echo "written by the guest" > /mnt/guest.txt && sync && umount /mnt && echo synced=$?', /synced=0/);
    g.vm.sendConsole('poweroff\r');
    expect((await g.vm.ended).kind).toBe('poweroff');
    expect(debugfsCat(img, '/guest.txt')).toBe('written by the guest\n');
    expect(debugfsCat(img, '/hello.txt')).toBe('hello from the host\n');
    // The guest's writes went through the device: its counters saw them, and its flushes.
    const c = g.vm.virtioCounters().blk0!;
    expect(c.interrupts).toBeGreaterThan(0);
    expect(c.mmioNotifies).toBe(0);
    expect(c.needsResets).toBe(0);
    expect(c.device!.writes).toBeGreaterThan(0);
    expect(c.device!.flushes).toBeGreaterThan(0);
    expect(c.device!.ioErrors).toBe(0);
  }, 4 * STEP_MS);

  it('readonly=on: the kernel sees a read-only disk, writes fail in the guest, the image stays byte-identical', async () => {
    const img = ext4Image('ro');
    const before = sha(img);
    const g = await startLinux([{ path: img, readonly: true }]);
    await g.waitForConsole(PROMPT, STEP_MS);
    await shell(g, 'cat /sys/block/vda/ro', /\n1\r?\n/);
    await shell(g, 'mkdir -p /mnt && mount -t ext4 -o ro,noload /dev/vda /mnt && echo mounted=$?', /mounted=0/);
    await shell(g, 'cat /mnt/hello.txt', /hello from the host/);
    const touch = await shell(g, 'echo x > /mnt/new.txt; echo touch=$?', /touch=\d/);
    expect(touch).toMatch(/Read-only file system/);
    expect(touch).not.toMatch(/touch=0/);
    const dd = await shell(g, 'umount /mnt; dd if=/dev/zero of=/dev/vda bs=512 count=1 conv=fsync 2>&1; echo dd=$?', /dd=\d/);
    expect(dd).toMatch(/dd=1/);
    g.vm.sendConsole('poweroff\r');
    expect((await g.vm.ended).kind).toBe('poweroff');
    expect(sha(img)).toBe(before);
  }, 4 * STEP_MS);

  it('a SIGKILL of `unhalt run` right after the guest\'s sync returned loses nothing the guest synced', async () => {
    const img = ext4Image('killed');
    const child = spawn(process.execPath, [UNHALT_BIN, 'run', '--guest', 'linux', '--cpus', '2', '--memory', '512', '--name', 'killed', '--disk', img],
      { stdio: ['pipe', 'pipe', 'pipe'], env: { ...process.env, UNHALT_HOME: home } });
    children.push(child);
    let out = '';
    child.stdout!.on('data', (d) => { out += d; });
    child.stderr!.on('data', (d) => { out += d; });
    const exited = new Promise<NodeJS.Signals | null>((resolve) => child.on('close', (_code, signal) => resolve(signal)));
    const guest = processConsole(child, () => out);
    const waitFor = (re: RegExp, from: number) => waitForOutput(guest, re, from, STEP_MS, `${re} from unhalt run`);
    await waitFor(/unhalt:~# /, 0);
    let from = out.length;
    child.stdin!.write('mkdir -p /mnt && mount -t ext4 /dev/vda /mnt && echo "kept after a kill" > /mnt/kept.txt && sync && echo synced=$?\r');
    await waitFor(/synced=0/, from);
    child.kill('SIGKILL');
    expect(await exited).toBe('SIGKILL');
    // The file system was not unmounted: replay its journal first, as the next boot would.
    const fsck = spawnSync('e2fsck', ['-fy', img], { encoding: 'utf8' });
    expect(fsck.status, fsck.stdout + fsck.stderr).toBeLessThanOrEqual(1); // 0 clean, 1 errors corrected
    expect(debugfsCat(img, '/kept.txt')).toBe('kept after a kill\n');

  }, 4 * STEP_MS);
});

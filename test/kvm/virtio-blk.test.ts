// virtio-blk on real KVM, driven by the probe guest's own driver (native/guest/probe/virtio_blk.c,
// scenario virtio-blk) against real image files: what the guest wrote is in the file after the VM
// stops, and after a SIGKILL of a real `unhalt run` process right after the guest's flush
// returned; a read-only disk refuses writes and its file stays byte-identical; an image is
// locked while a VM uses it (a second VM, in this process or another, is refused with the holder
// named; readers share); garbage from the guest gets IOERR or DEVICE_NEEDS_RESET and the VMM goes
// on; every bad image given to `unhalt run` is one line, exit code 1, and nothing started.
// snapshot=on: the guest reads back what it wrote, the image stays byte-identical (mtime too) and
// is opened O_RDONLY, the overlay has no name, a later run sees the original data, a SIGKILL
// leaves nothing behind, and an overlay that cannot be made fails the start in one line.
import { spawn, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { AgentEvent } from '../../electron/vmm/agent/line-protocol.ts';
import { resolveMachine } from '../../electron/vmm/config/resolve.ts';
import { validateConfig, type DiskConfig } from '../../electron/vmm/config/vm-config.ts';
import { probeHost } from '../../electron/vmm/machine/host-caps.ts';
import { VirtualMachine } from '../../electron/vmm/vm.ts';
import { DISK_SLOT_BASE } from '../../electron/vmm/devices/board.ts';
import { STATUS } from '../../electron/vmm/devices/virtio/virtio-pci-regs.ts';
import { QUEUE_ERROR } from '../../electron/vmm/devices/virtio/virtqueue.ts';
import { UNHALT_BIN, runCli } from '../support/cli.ts';
import { createService } from '../../electron/service/service.ts';
import { kvmAvailable, watch, type Watched } from '../support/probe.ts';
import { scaled } from '../support/time-scale.ts';

const dir = mkdtempSync(join(tmpdir(), 'unhalt-virtio-blk-'));
const home = mkdtempSync(join(tmpdir(), 'unhalt-virtio-blk-home-'));
const children: ReturnType<typeof spawn>[] = [];
afterAll(() => {
  for (const c of children) if (c.exitCode === null) c.kill('SIGKILL');
  rmSync(dir, { recursive: true, force: true });
  rmSync(home, { recursive: true, force: true });
});

/** A raw image of `bytes`, filled with a byte pattern of its own so reads are checkable. */
function image(name: string, bytes = 1024 * 1024, fill = (i: number) => (i * 13 + 5) & 0xff): string {
  const p = join(dir, name);
  writeFileSync(p, Uint8Array.from({ length: bytes }, (_, i) => fill(i)));
  return p;
}

/** The bytes the probe's write puts at byte i of its data (virtio_blk.c pattern()). */
const pattern = (seed: number, n: number) => Uint8Array.from({ length: n }, (_, i) => (seed * 37 + i * 7 + (i >> 9)) & 0xff);
const sha = (p: string) => createHash('sha256').update(readFileSync(p)).digest('hex');
const fnv1a = (b: Uint8Array) => { let h = 2166136261; for (const x of b) h = Math.imul(h ^ x, 16777619) >>> 0; return h; };

async function startBlk(append: string, disks: DiskConfig[], name = 'blk'): Promise<Watched> {
  const { spec } = resolveMachine(validateConfig({
    guest: 'probe', cpus: 1, memoryMiB: 64, append: `scenario=virtio-blk ${append}`, name, disks,
  }), probeHost());
  return watch(await VirtualMachine.start(spec));
}

async function runBlk(append: string, disks: DiskConfig[]) {
  const g = await startBlk(append, disks);
  const exit = await g.vm.ended;
  expect(g.events.find((e) => e.event === 'fault')).toBeUndefined();
  expect(exit.kind).toBe('poweroff');
  return g;
}

function event(events: AgentEvent[], name: string): AgentEvent['fields'] {
  const e = events.find((x) => x.event === name);
  if (!e) throw new Error(`no "@u1 ${name}"; events: ${events.map((x) => `${x.event} ${JSON.stringify(x.fields)}`).join('; ')}`);
  return e.fields;
}

/** `unhalt run` as a real process, its ttyS1 in a file; resolves once `line` shows up there. */
function spawnRun(args: string[], agentLog: string) {
  const child = spawn(process.execPath, [UNHALT_BIN, 'run', '--agent-log', agentLog, ...args], { stdio: ['ignore', 'ignore', 'pipe'], env: { ...process.env, UNHALT_HOME: home } });
  children.push(child);
  let stderr = '';
  child.stderr!.on('data', (d) => { stderr += d; });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.on('close', (code, signal) => resolve({ code, signal })));
  const waitLine = async (re: RegExp) => {
    const end = Date.now() + scaled(30_000);
    for (;;) {
      const text = existsSync(agentLog) ? readFileSync(agentLog, 'utf8') : '';
      const m = re.exec(text);
      if (m) return m;
      if (child.exitCode !== null || Date.now() > end) throw new Error(`no ${re} in the agent log (exit ${child.exitCode}); stderr: ${stderr}; log: ${text}`);
      await new Promise((r) => setTimeout(r, 20));
    }
  };
  return { child, exited, waitLine, stderr: () => stderr };
}

describe.skipIf(!kvmAvailable)('virtio-blk on real KVM (probe guest driver, real image files)', () => {
  it('reads what is in the file, writes what the guest wrote, flushes; the data is in the image after the VM stops', async () => {
    const first = image('first.img');
    const second = image('second.img', 2 * 1024 * 1024, (i) => (i * 3) & 0xff);
    const firstBefore = sha(first);
    const sector = 24;
    const sectors = 16;
    const g = await runBlk(`disk=1 sector=${sector} sectors=${sectors} seed=5`, [{ path: first }, { path: second }]);
    const bytes = sectors * 512;
    // The guest found the second disk in the second disk slot, with its capacity and features.
    expect(event(g.events, 'virtio_blk_dev')).toEqual({ slot: DISK_SLOT_BASE + 1, class: 0x010000, capacity: 4096, blk_size: 512, seg_max: 254, ro: 0, flush: 1, discard: expect.any(Number) });
    // What it read is what the file held there.
    const before = Uint8Array.from({ length: bytes }, (_, i) => ((sector * 512 + i) * 3) & 0xff);
    expect(event(g.events, 'virtio_blk_read')).toEqual({ sector, bytes, status: 0, used: bytes + 1, sum: fnv1a(before) });
    expect(event(g.events, 'virtio_blk_id')).toEqual({ status: 0, used: 21 });
    expect(g.console()).toContain('virtio-blk id second.img');
    expect(event(g.events, 'virtio_blk_write')).toMatchObject({ status: 0, used: 1, sum: fnv1a(pattern(5, bytes)) });
    expect(event(g.events, 'virtio_blk_flush')).toEqual({ status: 0, used: 1 });
    expect(event(g.events, 'virtio_blk_verify')).toMatchObject({ status: 0, match: 1 });
    expect(event(g.events, 'virtio_blk')).toMatchObject({ ok: 1, irqs: 5 });

    // On the host, after the VM is gone: the pattern at the sector, everything else as it was.
    const after = readFileSync(second);
    expect(after.subarray(sector * 512, sector * 512 + bytes)).toEqual(Buffer.from(pattern(5, bytes)));
    const untouched = Buffer.from(Uint8Array.from({ length: after.length }, (_, i) => (i * 3) & 0xff));
    untouched.set(pattern(5, bytes), sector * 512);
    expect(after.equals(untouched)).toBe(true);
    expect(sha(first)).toBe(firstBefore);

    const c = g.vm.virtioCounters().blk1!;
    expect(c.requests).toEqual([5]);
    expect(c.interrupts).toBe(5);
    expect(c.kicks).toBe(5);
    expect(c.device).toMatchObject({ reads: 2, writes: 1, bytesRead: 2 * bytes, bytesWritten: bytes, flushes: 1, getIds: 1, ioErrors: 0, unsupported: 0 });
    expect(g.vm.virtioCounters().blk0!.requests).toEqual([0]);
  });

  it('data written and flushed is in the image after a SIGKILL of the unhalt run process right after the flush returned', async () => {
    const img = image('killed.img');
    const log = join(dir, 'killed.ttyS1.log');
    const run = spawnRun(['--guest', 'probe', '--memory', '64', '--name', 'killme', '--append', 'scenario=virtio-blk sector=40 sectors=32 seed=11 hold=1', '--disk', img], log);
    await run.waitLine(/@u1 virtio_blk_flush status=0 /);
    // While it holds the image, a VM of this process is refused, naming that process and its VM.
    await expect(startBlk('', [{ path: img }])).rejects.toThrow(new RegExp(`^disk ${img}: is in use by process ${run.child.pid} \\(VM "killme"\\); stop that VM first`));
    run.child.kill('SIGKILL');
    expect(await run.exited).toEqual({ code: null, signal: 'SIGKILL' });
    const data = readFileSync(img);
    expect(data.subarray(40 * 512, 72 * 512)).toEqual(Buffer.from(pattern(11, 32 * 512)));
    // The kernel dropped the dead holder's lock: the image is usable at once.
    const g = await runBlk('sector=40 sectors=32 write=0', [{ path: img }]);
    expect(event(g.events, 'virtio_blk_read')).toMatchObject({ status: 0, sum: fnv1a(pattern(11, 32 * 512)) });
  });

  it('readonly=on: VIRTIO_BLK_F_RO, a write gets IOERR and never reaches the file (byte-identical), reads and flush work', async () => {
    const img = image('ro.img');
    const before = sha(img);
    const mtime = statSync(img).mtimeMs;
    const g = await runBlk('sector=8 sectors=8 seed=3', [{ path: img, readonly: true }]);
    expect(event(g.events, 'virtio_blk_dev')).toMatchObject({ ro: 1, flush: 1, discard: 0 });
    expect(event(g.events, 'virtio_blk_write')).toMatchObject({ status: 1 }); // VIRTIO_BLK_S_IOERR
    expect(event(g.events, 'virtio_blk_flush')).toMatchObject({ status: 0 });
    expect(event(g.events, 'virtio_blk_verify')).toMatchObject({ status: 0, match: 0 });
    expect(sha(img)).toBe(before);
    expect(statSync(img).mtimeMs).toBe(mtime);
    expect(g.vm.virtioCounters().blk0!.device).toMatchObject({ writes: 0, bytesWritten: 0, ioErrors: 1 });
  });

  it('snapshot=on: the guest reads back what it wrote; the image is byte-identical after (mtime too) and a second run reads the original', async () => {
    const img = image('snap.img');
    const before = sha(img);
    const mtime = statSync(img).mtimeMs;
    // 8 KiB across the first 64 KiB granule's end: two partial granules copied up, then written.
    const sector = 120;
    const sectors = 16;
    const bytes = sectors * 512;
    const original = Uint8Array.from({ length: bytes }, (_, i) => ((sector * 512 + i) * 13 + 5) & 0xff);
    const g = await runBlk(`sector=${sector} sectors=${sectors} seed=9`, [{ path: img, snapshot: true }]);
    // A writable disk to the guest (no RO), FLUSH offered; no DISCARD (holes are not punched in an image only read).
    expect(event(g.events, 'virtio_blk_dev')).toMatchObject({ ro: 0, flush: 1, discard: 0 });
    expect(event(g.events, 'virtio_blk_read')).toMatchObject({ status: 0, sum: fnv1a(original) });
    expect(event(g.events, 'virtio_blk_write')).toMatchObject({ status: 0, sum: fnv1a(pattern(9, bytes)) });
    expect(event(g.events, 'virtio_blk_flush')).toEqual({ status: 0, used: 1 });
    expect(event(g.events, 'virtio_blk_verify')).toMatchObject({ status: 0, match: 1 });
    expect(event(g.events, 'virtio_blk')).toMatchObject({ ok: 1 });
    expect(g.vm.virtioCounters().blk0!.device).toMatchObject({ writes: 1, bytesWritten: bytes, flushes: 1, ioErrors: 0 });
    expect(sha(img)).toBe(before);
    expect(statSync(img).mtimeMs).toBe(mtime);
    // The guest's writes went with the VM: the next run reads what the image always held.
    const again = await runBlk(`sector=${sector} sectors=${sectors} write=0`, [{ path: img, snapshot: true }]);
    expect(event(again.events, 'virtio_blk_read')).toMatchObject({ status: 0, sum: fnv1a(original) });
    expect(sha(img)).toBe(before);
  });

  it('snapshot=on: the image is open O_RDONLY and shared-locked, the overlay has no name; readonly=on with it is read-only', async () => {
    const img = image('snap-held.img');
    const before = sha(img);
    const overlays = mkdtempSync(join(dir, 'overlays-')); // removed with dir, whatever happens
    const tmp = process.env.TMPDIR;
    process.env.TMPDIR = overlays;
    let holder: Watched;
    try {
      holder = await startBlk('sector=8 sectors=8 seed=4 hold=1', [{ path: img, snapshot: true }], 'snap-holder');
    } finally {
      if (tmp === undefined) delete process.env.TMPDIR; else process.env.TMPDIR = tmp;
    }
    try {
      await holder.waitForEvent('virtio_blk_flush');
      expect(event(holder.events, 'virtio_blk_write')).toMatchObject({ status: 0 });
      // This process's fds: the image's is read-only (O_ACCMODE 0), the overlay's lives in the
      // overlay folder with no name left there ("(deleted)": O_TMPFILE, or unlinked at once).
      const fds = readdirSync('/proc/self/fd').map((fd) => ({ fd, link: (() => { try { return readlinkSync(`/proc/self/fd/${fd}`); } catch { return ''; } })() }));
      const flags = (fd: string) => parseInt(/^flags:\s+([0-7]+)$/m.exec(readFileSync(`/proc/self/fdinfo/${fd}`, 'utf8'))![1]!, 8);
      const imageFds = fds.filter((f) => f.link === img);
      expect(imageFds.length).toBe(1);
      expect(flags(imageFds[0]!.fd) & 3).toBe(0); // O_RDONLY
      const overlayFds = fds.filter((f) => f.link.startsWith(`${overlays}/`));
      expect(overlayFds.length).toBe(1);
      expect(overlayFds[0]!.link).toMatch(/ \(deleted\)$/);
      expect(flags(overlayFds[0]!.fd) & 3).toBe(2); // O_RDWR
      expect(readdirSync(overlays)).toEqual([]);
      // A writer is refused, naming the snapshot; a reader and a second snapshot share the image.
      await expect(startBlk('', [{ path: img }], 'writer')).rejects.toThrow(/is in use by VM "snap-holder" \(snapshot, this process/);
      const r = await runBlk('sector=8 sectors=8 write=0', [{ path: img, readonly: true }]);
      expect(event(r.events, 'virtio_blk_read')).toMatchObject({ status: 0, sum: fnv1a(Uint8Array.from({ length: 4096 }, (_, i) => ((4096 + i) * 13 + 5) & 0xff)) });
      // readonly=on with snapshot=on: read-only (VIRTIO_BLK_F_RO, the write refused), no overlay made.
      const both = await runBlk('sector=8 sectors=8 seed=4', [{ path: img, readonly: true, snapshot: true }]);
      expect(event(both.events, 'virtio_blk_dev')).toMatchObject({ ro: 1 });
      expect(event(both.events, 'virtio_blk_write')).toMatchObject({ status: 1 });
    } finally {
      await holder.vm.stop();
      rmSync(overlays, { recursive: true, force: true });
    }
    expect(sha(img)).toBe(before);
  });

  it('snapshot=on: a SIGKILL of unhalt run after the guest wrote and flushed leaves the image as it was and no overlay behind', async () => {
    const img = image('snap-killed.img');
    const before = sha(img);
    const mtime = statSync(img).mtimeMs;
    const overlays = mkdtempSync(join(dir, 'overlays-')); // removed with dir, whatever happens
    const log = join(dir, 'snap-killed.ttyS1.log');
    const child = spawn(process.execPath, [UNHALT_BIN, 'run', '--agent-log', log, '--guest', 'probe', '--memory', '64', '--append', 'scenario=virtio-blk sector=40 sectors=32 seed=11 hold=1', '--disk', `${img},snapshot=on`],
      { stdio: ['ignore', 'ignore', 'pipe'], env: { ...process.env, UNHALT_HOME: home, TMPDIR: overlays } });
    children.push(child);
    const exited = new Promise((resolve) => child.on('close', (code, signal) => resolve({ code, signal })));
    const end = Date.now() + scaled(30_000);
    while (!(existsSync(log) && /@u1 virtio_blk_flush status=0 /.test(readFileSync(log, 'utf8')))) {
      if (child.exitCode !== null || Date.now() > end) throw new Error(`no flush in the agent log (exit ${child.exitCode})`);
      await new Promise((r) => setTimeout(r, 20));
    }
    expect(readFileSync(log, 'utf8')).toMatch(/@u1 virtio_blk_write sector=40 bytes=16384 status=0 /);
    // Running, its overlay is open but has no name in the folder: nothing there for a crash to leave.
    expect(readdirSync(overlays)).toEqual([]);
    child.kill('SIGKILL');
    expect(await exited).toEqual({ code: null, signal: 'SIGKILL' });
    expect(sha(img)).toBe(before);
    expect(statSync(img).mtimeMs).toBe(mtime);
    expect(readdirSync(overlays)).toEqual([]);
    rmSync(overlays, { recursive: true, force: true });
  });

  it('an image in use: a second writer is refused naming the VM; readers share; a writer is refused by readers; another process is refused naming this one', async () => {
    const img = image('locked.img');
    const holder = await startBlk('sector=2 sectors=1 seed=1 hold=1', [{ path: img }], 'holder-a');
    await holder.waitForEvent('virtio_blk_flush');
    await expect(startBlk('', [{ path: img }], 'second')).rejects.toThrow(new RegExp(`^disk ${img}: is in use by VM "holder-a" \\(read-write, this process, pid ${process.pid}\\); stop that VM first`));
    await expect(startBlk('', [{ path: img, readonly: true }], 'reader')).rejects.toThrow(/is in use by VM "holder-a"/);
    // From another process: one line, exit code 1, this process named.
    const other = await runCli(['run', '--guest', 'probe', '--disk', img], { env: { UNHALT_HOME: home } });
    expect(other.code).toBe(1);
    expect(other.stdout).toBe('');
    expect(other.stderr).toMatch(new RegExp(`^unhalt: disk ${img}: is in use by process ${process.pid} \\(.*\\); stop that VM first, or add readonly=on \\(or snapshot=on\\) if every user only reads it\\n$`));
    await holder.vm.stop();

    // Read-only users share the image; a writer waits for none of them and is refused.
    const r1 = await startBlk('write=0', [{ path: img, readonly: true }], 'r1');
    const r2 = await startBlk('write=0', [{ path: img, readonly: true }], 'r2');
    await Promise.all([r1.vm.ended, r2.vm.ended]);
    expect(event(r1.events, 'virtio_blk')).toMatchObject({ ok: 1 });
    expect(event(r2.events, 'virtio_blk')).toMatchObject({ ok: 1 });
    const reader = await startBlk('sector=2 sectors=1 hold=1', [{ path: img, readonly: true }], 'reader-held');
    await reader.waitForEvent('virtio_blk_flush');
    await expect(startBlk('', [{ path: img }], 'writer')).rejects.toThrow(/is in use by VM "reader-held" \(read-only, this process/);
    const r3 = await startBlk('write=0', [{ path: img, readonly: true }], 'r3');
    await r3.vm.ended;
    expect(event(r3.events, 'virtio_blk')).toMatchObject({ ok: 1 });
    await reader.vm.stop();
    // Released with the VM: a writer gets it now.
    const w = await runBlk('write=0', [{ path: img }]);
    expect(event(w.events, 'virtio_blk')).toMatchObject({ ok: 1 });
  });

  it('discard punches a hole where the file system can: the guest reads zeros, the file keeps its size and gives the blocks back', async () => {
    const img = image('discard.img');
    const before = statSync(img);
    const g = await runBlk('sector=8 sectors=8 seed=2 discard=1', [{ path: img }]);
    expect(event(g.events, 'virtio_blk_dev')).toMatchObject({ discard: 1 }); // ext4 / tmpfs punch holes
    expect(event(g.events, 'virtio_blk_discard')).toEqual({ status: 0, read_status: 0, zeros: 1 });
    const after = statSync(img);
    expect(after.size).toBe(before.size);
    expect(after.blocks).toBeLessThan(before.blocks);
    const data = readFileSync(img);
    expect(data.subarray(8 * 512, 16 * 512).every((b) => b === 0)).toBe(true);
    expect(data[16 * 512]).toBe(((16 * 512) * 13 + 5) & 0xff); // the next sector as it was
    expect(g.vm.virtioCounters().blk0!.device).toMatchObject({ discards: 1 });
  });

  it('a VM of the service on an image another VM of the service runs is refused at start, naming it', async () => {
    const svcHome = mkdtempSync(join(tmpdir(), 'unhalt-virtio-blk-svc-'));
    const img = join(svcHome, 'shared.img');
    writeFileSync(img, Buffer.alloc(64 * 1024));
    const svc = await createService({ home: svcHome });
    try {
      const a = await svc.createVm({ name: 'first', guest: 'probe', memoryMiB: 64, append: 'scenario=virtio-blk hold=1', disks: [{ path: img }] });
      const b = await svc.createVm({ name: 'second', guest: 'probe', memoryMiB: 64, append: 'scenario=virtio-blk', disks: [{ path: img }] });
      await svc.startVm(a.id);
      const refused = await svc.startVm(b.id).then(() => undefined, (e: { code: string; message: string }) => e);
      expect(refused?.message).toMatch(new RegExp(`disk ${img}: is in use by VM "first" \\(read-write, this process, pid ${process.pid}\\); stop that VM first`));
      expect((await svc.getVm(b.id)).status.state).toBe('stopped');
      await svc.forceStopVm(a.id);
      // Stopped, the image is free: the second one runs on it now.
      await svc.startVm(b.id);
    } finally {
      await svc.close();
      rmSync(svcHome, { recursive: true, force: true });
    }
  });

  it('guest garbage: out-of-range and partial-sector requests get IOERR; a chain with no status byte gets DEVICE_NEEDS_RESET, then a reset works', async () => {
    const img = image('garbage.img');
    const before = sha(img);
    const g = await runBlk('bad=range', [{ path: img }]);
    // last sector OK; one past the end, a write past it, 100 bytes: IOERR; the device still running.
    expect(event(g.events, 'virtio_blk_bad')).toEqual({ kind: 1, last: 0, past: 1, past_write: 1, partial: 1, status: 15 });
    expect(sha(img)).toBe(before);
    const n = await runBlk('bad=nostatus', [{ path: img }]);
    expect(event(n.events, 'virtio_blk_bad')).toEqual({ kind: 2, needs_reset: 1, recovered_status: 0 });
    const c = n.vm.virtioCounters().blk0!;
    expect(c.lastError).toBe(QUEUE_ERROR.badRequest);
    expect(c.needsResets).toBe(1);
    expect(c.status & STATUS.needsReset).toBe(0);
  });
});

describe.skipIf(!kvmAvailable)('bad disk images given to unhalt run: one line, exit code 1, nothing started', () => {
  const bad = join(dir, 'bad');
  mkdirSync(bad, { recursive: true });
  const qcow2 = join(bad, 'guest.qcow2');
  writeFileSync(qcow2, Buffer.concat([Buffer.from([0x51, 0x46, 0x49, 0xfb, 0, 0, 0, 3]), Buffer.alloc(65536 - 8)]));
  const odd = join(bad, 'odd.img');
  writeFileSync(odd, Buffer.alloc(1000));
  const empty = join(bad, 'empty.img');
  writeFileSync(empty, '');
  const immutable = join(bad, 'immutable.img');
  writeFileSync(immutable, Buffer.alloc(4096));
  // Root may write any file mode; an immutable file (chattr +i) it may not.
  const immutableMade = spawnSync('chattr', ['+i', immutable]).status === 0;
  afterAll(() => { if (immutableMade) spawnSync('chattr', ['-i', immutable]); });

  const cases: [string, string[], RegExp][] = [
    ['a missing file', [join(bad, 'nope.img')], /^unhalt: disk \S+nope\.img: no such file\n$/],
    ['a directory', [bad], /^unhalt: disk \S+bad: is a directory, not an image file\n$/],
    ['a device node', ['/dev/null'], /^unhalt: disk \/dev\/null: is a device node; give a raw image file\n$/],
    ['a qcow2 image', [qcow2], new RegExp(`^unhalt: disk ${qcow2}: is a qcow2 image; disks are raw images: convert it with qemu-img convert -f qcow2 -O raw ${qcow2} ${join(bad, 'guest.raw')}\\n$`)],
    ['a size that is no whole number of sectors', [odd], /^unhalt: disk \S+odd\.img: is 1000 bytes, not a whole number of 512-byte sectors\n$/],
    ['an empty file', [empty], /^unhalt: disk \S+empty\.img: is empty \(0 bytes\); a disk needs at least one 512-byte sector\n$/],
    ['an unknown disk option', [`${odd},cache=none`], /^unhalt: disk option "cache=none" is not known; valid: readonly=on\|off, snapshot=on\|off\n$/],
    ['a bad readonly value', [`${odd},readonly=maybe`], /^unhalt: disk readonly must be on or off, got "maybe"\n$/],
    ['a path with a comma is cut at it', [join(bad, 'a,b.img')], /^unhalt: disk option "b\.img" is not known; valid: readonly=on\|off, snapshot=on\|off \(a disk path may not contain a comma\)\n$/],
  ];
  for (const [what, disk, message] of cases) {
    it(what, async () => {
      const r = await runCli(['run', '--guest', 'probe', '--append', 'scenario=hello', '--disk', ...disk], { env: { UNHALT_HOME: home } });
      expect(r.stderr).toMatch(message);
      expect(r.code).toBe(1);
      expect(r.stdout).toBe(''); // no guest console: nothing ran
    });
  }
  it.skipIf(!immutableMade)('a read-write disk on a file that may not be written (readonly=on is the way out, and works)', async () => {
    const r = await runCli(['run', '--guest', 'probe', '--disk', immutable], { env: { UNHALT_HOME: home } });
    expect(r.stderr).toMatch(/^unhalt: disk \S+immutable\.img: may not be written \(EPERM\); add readonly=on to use it read-only, or snapshot=on to throw the guest's writes away\n$/);
    expect(r.code).toBe(1);
    expect(r.stdout).toBe('');
    const ro = await runCli(['run', '--guest', 'probe', '--memory', '64', '--append', 'scenario=virtio-blk write=0', '--disk', `${immutable},readonly=on`], { env: { UNHALT_HOME: home } });
    expect(ro.code).toBe(0);
    expect(ro.stdout).toContain('virtio-blk 00:08.0 capacity 8 sectors, blk_size 512, read-only');
    // snapshot=on needs only to read it: the guest writes (to the overlay) and reads its data back.
    const snap = await runCli(['run', '--guest', 'probe', '--memory', '64', '--append', 'scenario=virtio-blk sector=2 sectors=4 seed=6', '--disk', `${immutable},snapshot=on`], { env: { UNHALT_HOME: home } });
    expect(snap.code).toBe(0);
    expect(snap.stdout).toMatch(/virtio-blk 00:08\.0 capacity 8 sectors, blk_size 512\r?\n/);
    expect(readFileSync(immutable).equals(Buffer.alloc(4096))).toBe(true);
  });
  it('snapshot=on whose overlay cannot be made (a missing folder, a full file system): one line, exit code 1, nothing started', async () => {
    const img = image('snap-nowhere.img');
    const missing = join(bad, 'no-such-folder');
    const r = await runCli(['run', '--guest', 'probe', '--append', 'scenario=hello', '--disk', `${img},snapshot=on`], { env: { UNHALT_HOME: home, TMPDIR: missing } });
    expect(r.stderr).toBe(`unhalt: disk ${img}: snapshot=on: the overlay for the guest's writes cannot be made in ${missing} (ENOENT); set TMPDIR to a writable folder with room\n`);
    expect(r.code).toBe(1);
    expect(r.stdout).toBe('');
    if (process.getuid?.() !== 0) return; // a full file system of the test's own needs a mount (root)
    // A 64 KiB tmpfs, filled, in a mount namespace of the run's own (gone with it).
    const full = join(bad, 'full');
    mkdirSync(full, { recursive: true });
    const prefix = ['unshare', '-m', 'sh', '-c', `mount -t tmpfs -o size=64k none '${full}' && (dd if=/dev/zero of='${full}/fill' bs=4k 2>/dev/null; true) && exec "$@"`, 'sh'];
    const f = await runCli(['run', '--guest', 'probe', '--append', 'scenario=hello', '--disk', `${img},snapshot=on`], { env: { UNHALT_HOME: home, TMPDIR: full }, prefix });
    expect(f.stderr).toBe(`unhalt: disk ${img}: snapshot=on: the overlay for the guest's writes has no room in ${full} (ENOSPC); set TMPDIR to a folder with room\n`);
    expect(f.code).toBe(1);
    expect(f.stdout).toBe('');
  });
  it('an image that may not be read (as a user without root\'s file-mode override): refused, read-write or read-only', async () => {
    const unreadable = join(bad, 'unreadable.img');
    writeFileSync(unreadable, Buffer.alloc(4096));
    chmodSync(unreadable, 0o000);
    // Root reads any file mode: the run drops that override (setpriv), as an ordinary user is.
    const prefix = process.getuid?.() === 0 ? ['setpriv', '--inh-caps=-dac_override,-dac_read_search', '--bounding-set=-dac_override,-dac_read_search'] : undefined;
    for (const disk of [unreadable, `${unreadable},readonly=on`]) {
      const r = await runCli(['run', '--guest', 'probe', '--append', 'scenario=hello', '--disk', disk], { env: { UNHALT_HOME: home }, ...(prefix ? { prefix } : {}) });
      expect(r.stderr).toBe(`unhalt: disk ${unreadable}: cannot be read (EACCES)\n`);
      expect(r.code).toBe(1);
      expect(r.stdout).toBe('');
    }
  });
  it('a relative --disk path means the file in the working directory', async () => {
    image('relative.img');
    const r = await runCli(['run', '--guest', 'probe', '--dry-run', '--disk', 'relative.img,readonly=on'], { env: { UNHALT_HOME: home }, cwd: dir });
    expect(r.code).toBe(0);
    expect(r.stdout).toContain(`virtio-blk 00:08.0 (${join(dir, 'relative.img')}, read-only)`);
  });
  it('--dry-run shows the disks and their slots, and refuses what a start refuses', async () => {
    const img = image('dry.img');
    const ro = image('dry-ro.img');
    const snap = image('dry-snap.img');
    const r = await runCli(['run', '--guest', 'probe', '--dry-run', '--disk', img, '--disk', `${ro},readonly=on`, '--disk', `${snap},snapshot=on`], { env: { UNHALT_HOME: home } });
    expect(r.stderr).toBe('');
    expect(r.stdout).toContain(`virtio-blk 00:08.0 (${img}), virtio-blk 00:09.0 (${ro}, read-only), virtio-blk 00:0a.0 (${snap}, snapshot: writes thrown away)`);
    expect(r.stdout).toContain(`--disk ${img} --disk ${ro},readonly=on --disk ${snap},snapshot=on`);
    const q = await runCli(['run', '--guest', 'probe', '--dry-run', '--disk', qcow2], { env: { UNHALT_HOME: home } });
    expect(q.code).toBe(1);
    expect(q.stderr).toMatch(/is a qcow2 image/);
  });
});

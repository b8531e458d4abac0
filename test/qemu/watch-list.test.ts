// `unhalt watch --list` as a real process against real processes: QEMUs (TCG: no KVM is needed to
// be listed) with a -qmp socket, with libvirt's monitor layout, and a process whose command line is
// a KVM QEMU's that counts the connections to its socket: listing connects to none, names a socket
// a client holds, one that is gone, and one this user may not open (a user dropped to nobody).
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli } from '../support/cli.ts';
import { scaled } from '../support/time-scale.ts';

const QEMU = 'qemu-system-x86_64';
const hasQemu = !spawnSync(QEMU, ['--version']).error;
if (!hasQemu && process.env.CI) throw new Error(`${QEMU} is not installed: .ci/run installs it (Debian qemu-system-x86)`);

type Listed = { pid: number; name?: string; accel: string; kvm: boolean; uid: number; libvirt?: { uri: string }; sockets: { path?: string; via: string; libvirtMonitor: boolean; watchable: boolean; target?: string; why?: string }[] };

/** A QMP-like server under QEMU's name: it greets each client and reports each connection on stdout. */
const FAKE = `
const net = require('node:net');
const path = process.argv[process.argv.indexOf('-qmp') + 1].replace(/^unix:/, '').split(',')[0];
net.createServer((c) => { process.stdout.write('connection\\n'); c.write('{"QMP": {"version": {}, "capabilities": []}}\\n'); c.on('error', () => {}); })
  .listen(path, () => process.stdout.write('listening\\n'));
`;

describe.skipIf(!hasQemu)('unhalt watch --list', () => {
  let dir: string;
  const children: ChildProcess[] = [];
  let fake: ChildProcess;
  let relative: ChildProcess;
  let fakeOut = '';
  const paths = {} as Record<'tcg' | 'monitor' | 'own' | 'fake', string>;

  const start = (cmd: string, args: string[], argv0?: string, cwd?: string) => {
    const c = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'], ...(argv0 ? { argv0 } : {}), ...(cwd ? { cwd } : {}) });
    children.push(c);
    return c;
  };
  const until = async (what: string, ok: () => boolean) => {
    const deadline = performance.now() + scaled(20_000);
    while (!ok()) {
      if (performance.now() > deadline) throw new Error(`timed out waiting for ${what}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  };
  const list = async (prefix?: string[]): Promise<Listed[]> => {
    const r = await runCli(['watch', '--list', '--json'], prefix ? { prefix } : {});
    expect(r.code, r.stderr).toBe(0);
    return JSON.parse(r.stdout) as Listed[];
  };
  const byPid = (rows: Listed[], c: ChildProcess) => rows.find((p) => p.pid === c.pid);

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'unhalt-watch-list-'));
    paths.tcg = join(dir, 'tcg.qmp');
    paths.monitor = join(dir, 'monitor.sock');
    paths.own = join(dir, 'own,qmp');
    paths.fake = join(dir, 'fake.qmp');
    const common = ['-machine', 'microvm', '-nodefaults', '-display', 'none', '-S', '-m', '32'];
    start(QEMU, [...common, '-accel', 'tcg', '-name', 'tcg-vm', '-qmp', `unix:${paths.tcg},server=on,wait=off`]);
    // libvirt's layout: its monitor as chardev "charmonitor", plus a QMP socket of the user's own.
    start(QEMU, [...common, '-accel', 'tcg', '-name', 'guest=dom1,debug-threads=on',
      '-chardev', `socket,id=charmonitor,path=${paths.monitor},server=on,wait=off`, '-mon', 'chardev=charmonitor,id=monitor,mode=control',
      '-chardev', `socket,id=mine,path=${paths.own.replace(/,/g, ',,')},server=on,wait=off`, '-mon', 'chardev=mine,mode=control']);
    const script = join(dir, 'fake-qemu.cjs');
    writeFileSync(script, FAKE);
    fake = start(process.execPath, [script, '-accel', 'kvm', '-name', 'kvm-vm', '-qmp', `unix:${paths.fake},server=on,wait=off`], '/usr/bin/qemu-system-x86_64');
    fake.stdout!.on('data', (d) => { fakeOut += d; });
    // Another, whose socket path is relative to its own working directory.
    relative = start(process.execPath, [script, '-enable-kvm', '-s', '-qmp', 'unix:rel.qmp,server=on'], '/usr/bin/qemu-system-x86_64', dir);
    let relativeOut = '';
    relative.stdout!.on('data', (d) => { relativeOut += d; });
    await until('the fake QEMUs to listen', () => fakeOut.includes('listening') && relativeOut.includes('listening'));
    await until('QEMU\'s sockets', () => [paths.tcg, paths.monitor, paths.own].every((p) => existsSync(p)));
  }, scaled(60_000));

  afterAll(() => {
    for (const c of children) c.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  });

  it('lists each QEMU with its sockets and what to do, connecting to none', async () => {
    const rows = await list();
    const [tcg, lv, kvm] = [children[0]!, children[1]!, fake].map((c) => byPid(rows, c));
    expect(tcg).toMatchObject({ name: 'tcg-vm', accel: 'tcg', kvm: false, uid: process.getuid!() });
    expect(tcg!.sockets).toEqual([expect.objectContaining({ path: paths.tcg, via: '-qmp', watchable: false, why: expect.stringContaining('no KVM stats') })]);
    expect(lv).toMatchObject({ name: 'dom1', libvirt: { uri: 'qemu:///session' } });
    expect(lv!.sockets[0]).toMatchObject({ path: paths.monitor, libvirtMonitor: true, watchable: false, why: expect.stringContaining("libvirt's own monitor") });
    expect(lv!.sockets[1]).toMatchObject({ path: paths.own, via: '-mon', libvirtMonitor: false });
    expect(kvm).toMatchObject({ name: 'kvm-vm', accel: 'kvm', kvm: true });
    expect(kvm!.sockets).toEqual([{ path: paths.fake, boundAs: paths.fake, via: '-qmp', libvirtMonitor: false, watchable: true, target: `qmp:${paths.fake}` }]);
    expect(fakeOut).not.toContain('connection');
    // A relative path is read against QEMU's working directory, not ours.
    expect(byPid(rows, relative)!.sockets).toEqual([{ path: join(dir, 'rel.qmp'), boundAs: 'rel.qmp', via: '-qmp', libvirtMonitor: false, watchable: true, target: `qmp:${join(dir, 'rel.qmp')}` }]);
    // The text form: one line per process, one per socket with the command to run.
    const text = await runCli(['watch', '--list']);
    expect(text.code).toBe(0);
    expect(text.stdout).toContain(`QEMU pid ${fake.pid} "kvm-vm", -accel kvm`);
    expect(text.stdout).toContain(`  ${paths.fake}: unhalt watch qmp:${paths.fake}\n`);
    expect(text.stdout).toContain(`QEMU pid ${children[1]!.pid} libvirt domain dom1 (qemu:///session)`);
    expect(fakeOut).not.toContain('connection');
  });

  it('names a socket another client holds', async () => {
    const holder: Socket = connect(paths.fake);
    try {
      await until('the fake to take the client', () => fakeOut.includes('connection'));
      expect(byPid(await list(), fake)!.sockets[0]).toMatchObject({ watchable: false, why: expect.stringContaining('another client holds the socket') });
    } finally {
      holder.destroy();
    }
  });

  it('says what keeps another user out: the socket, or the directory it is in', async () => {
    const asNobody = ['setpriv', '--reuid=65534', '--regid=65534', '--clear-groups'];
    if (process.getuid!() !== 0) return expect.fail('this check drops to nobody with setpriv: run it as root (CI does)');
    chmodSync(dir, 0o700);
    const hidden = byPid(await list(asNobody), fake)!;
    expect(hidden.sockets[0]).toMatchObject({ watchable: false, why: expect.stringContaining(`permission denied: this user may not open the socket; run as uid 0`) });
    chmodSync(dir, 0o755); // the socket itself is rwxr-xr-x: nobody may not connect
    expect(byPid(await list(asNobody), fake)!.sockets[0]).toMatchObject({ watchable: false, why: expect.stringContaining('permission denied') });
  });

  it('names a socket that is gone while its QEMU runs on', async () => {
    rmSync(paths.fake);
    expect(byPid(await list(), fake)!.sockets[0]).toMatchObject({ watchable: false, why: `${paths.fake} is gone (removed, or in another mount namespace)` });
  });

  it('refuses options that do not go with --list, and --json without it, in one line', async () => {
    const r = await runCli(['watch', '--list', '--stats', join(dir, 'x.ndjson')]);
    expect(r.code).toBe(1);
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
    expect(r.stderr).toContain('--list takes only --json');
    const j = await runCli(['watch', `qmp:${paths.tcg}`, '--json']);
    expect(j.code).toBe(1);
    expect(j.stderr).toContain('--json goes with --list');
  });
});

// The QEMU command lines `unhalt watch --list` reads: QMP server sockets in each of QEMU's
// spellings, libvirt's monitor, the accelerator and the name; and /proc/net/unix's users per path.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { isQemuBinary, parseQemuCommandLine, unixSocketUsers } from '../../electron/watch/discover.ts';

const q = (...args: string[]) => parseQemuCommandLine(['/usr/bin/qemu-system-x86_64', ...args]);

describe('parseQemuCommandLine', () => {
  it('finds -qmp unix sockets in server mode, in the old and the new spelling', () => {
    expect(q('-accel', 'kvm', '-qmp', 'unix:/run/a.qmp,server=on,wait=off').qmp).toEqual([{ path: '/run/a.qmp', boundAs: '/run/a.qmp', via: '-qmp', libvirtMonitor: false }]);
    expect(q('-enable-kvm', '-qmp', 'unix:/run/b.qmp,server,nowait').qmp).toEqual([{ path: '/run/b.qmp', boundAs: '/run/b.qmp', via: '-qmp', libvirtMonitor: false }]);
    expect(q('--qmp-pretty', 'unix:/run/c.qmp,server=on').qmp.map((s) => s.path)).toEqual(['/run/c.qmp']);
    // -qmp chardev:ID names a -chardev socket; a relative path stays as given (the listing resolves it).
    expect(q('-chardev', 'socket,id=c,path=rel.qmp,server=on', '-qmp', 'chardev:c').qmp).toEqual([{ path: 'rel.qmp', boundAs: 'rel.qmp', via: '-qmp', libvirtMonitor: false }]);
    expect(q('-qmp', 'unix:watch,server=on,abstract=on').qmp).toEqual([{ path: 'watch', boundAs: 'watch', abstract: true, via: '-qmp', libvirtMonitor: false }]);
  });

  it('does not let an option without a value swallow the next one', () => {
    expect(q('-s', '-qmp', 'unix:/x,server=on').qmp.map((s) => s.path)).toEqual(['/x']);
    expect(q('-usb', '-no-fd-bootchk', '-enable-kvm', '-name', 'n').name).toBe('n');
  });

  it('leaves out client-mode and TCP sockets, and HMP monitors', () => {
    expect(q('-qmp', 'unix:/run/a.qmp').qmp).toEqual([]);
    expect(q('-qmp', 'tcp:127.0.0.1:4444,server=on,wait=off').qmp).toEqual([]);
    expect(q('-chardev', 'socket,id=m,path=/run/hmp,server=on,wait=off', '-mon', 'chardev=m').qmp).toEqual([]);
    expect(q('-chardev', 'socket,id=t,host=127.0.0.1,port=4444,server=on,wait=off', '-mon', 'chardev=t,mode=control').qmp).toEqual([]);
  });

  it('reads a -chardev socket under -mon mode=control, with QEMU’s doubled commas in the path', () => {
    const cl = q('-chardev', 'socket,id=mine,path=/tmp/b,,c.qmp,server=on,wait=off', '-mon', 'chardev=mine,mode=control,pretty=on');
    expect(cl.qmp).toEqual([{ path: '/tmp/b,c.qmp', boundAs: '/tmp/b,c.qmp', via: '-mon', libvirtMonitor: false }]);
  });

  it("knows libvirt's monitor, its domain's name and which daemon started it", () => {
    const system = q('-name', 'guest=web1,debug-threads=on', '-S',
      '-object', '{"qom-type":"secret","id":"masterKey0","format":"raw","file":"/var/lib/libvirt/qemu/domain-3-web1/master-key.aes"}',
      '-machine', 'pc-q35-7.2,usb=off,dump-guest-core=off,memory-backend=pc.ram', '-accel', 'kvm',
      '-chardev', 'socket,id=charmonitor,fd=31,server=on,wait=off', '-mon', 'chardev=charmonitor,id=monitor,mode=control');
    expect(system).toMatchObject({ name: 'web1', accel: 'kvm', kvm: true, libvirt: { uri: 'qemu:///system' } });
    expect(system.qmp).toEqual([{ via: '-mon', libvirtMonitor: true }]);
    const session = q('-name', 'guest=dev', '-accel', 'kvm',
      '-chardev', 'socket,id=charmonitor,path=/home/u/.config/libvirt/qemu/lib/domain-1-dev/monitor.sock,server=on,wait=off', '-mon', 'chardev=charmonitor,id=monitor,mode=control');
    expect(session.libvirt).toEqual({ uri: 'qemu:///session' });
    expect(q('-accel', 'kvm').libvirt).toBeUndefined();
  });

  it('reads the accelerator from -accel, -machine accel=, -enable-kvm; tcg without any', () => {
    expect(q('-accel', 'kvm,kernel-irqchip=split')).toMatchObject({ accel: 'kvm', kvm: true });
    expect(q('-M', 'microvm,accel=kvm:tcg')).toMatchObject({ accel: 'kvm:tcg', kvm: true });
    expect(q('-machine', 'q35', '-accel', 'tcg,thread=multi')).toMatchObject({ accel: 'tcg', kvm: false });
    expect(q('-m', '512')).toMatchObject({ accel: 'tcg', kvm: false });
    expect(q('-accel', 'kvm', '-accel', 'tcg')).toMatchObject({ accel: 'kvm' });
    // QEMU tries them in the order given, -enable-kvm among them.
    expect(q('-accel', 'tcg', '-enable-kvm')).toMatchObject({ accel: 'tcg', kvm: false });
    expect(q('-accel', 'accel=kvm')).toMatchObject({ accel: 'kvm', kvm: true });
    // A binary named *kvm tries KVM first by default.
    expect(parseQemuCommandLine(['/usr/libexec/qemu-kvm', '-m', '512'])).toMatchObject({ accel: 'kvm:tcg', kvm: true });
  });

  it('takes a name in both spellings, and a value that looks like an option is not one', () => {
    expect(q('-name', 'plain').name).toBe('plain');
    expect(q('-name', 'guest=a,,b,process=x').name).toBe('a,b');
    expect(q('-append', '-qmp unix:/x,server=on', '-accel', 'kvm').qmp).toEqual([]);
  });

  it('knows QEMU binaries by name', () => {
    expect(isQemuBinary('/usr/bin/qemu-system-x86_64')).toBe(true);
    expect(isQemuBinary('qemu-kvm')).toBe(true);
    expect(isQemuBinary('/usr/bin/qemu-img')).toBe(false);
    expect(isQemuBinary('node')).toBe(false);
  });
});

describe('unixSocketUsers', () => {
  const dir = mkdtempSync(join(tmpdir(), 'unhalt-netunix-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('counts the sockets bound to each path, paths with spaces included', () => {
    const file = join(dir, 'unix');
    writeFileSync(file, [
      'Num       RefCount Protocol Flags    Type St Inode Path',
      '0000000000000000: 00000002 00000000 00010000 0001 01 14453 /tmp/a b.qmp',
      '0000000000000000: 00000003 00000000 00000000 0001 03 13493 /tmp/a b.qmp',
      '0000000000000000: 00000002 00000000 00010000 0001 01 13371 /tmp/c.qmp',
      '0000000000000000: 00000003 00000000 00000000 0001 03 13494',
      '0000000000000000: 00000002 00000000 00010000 0001 01 13495 /tmp/two  spaces ',
      '0000000000000000: 00000002 00000000 00010000 0001 01 13496 @abstract',
      '',
    ].join('\n'));
    const users = unixSocketUsers(file);
    expect(users.get('/tmp/a b.qmp')).toBe(2);
    expect(users.get('/tmp/c.qmp')).toBe(1);
    expect(users.get('/tmp/two  spaces ')).toBe(1);
    expect(users.get('@abstract')).toBe(1);
    expect(users.size).toBe(4);
    expect(unixSocketUsers(join(dir, 'missing')).size).toBe(0);
  });
});

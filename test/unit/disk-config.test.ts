// Disks through every configuration surface (one rule, vm-config.ts checkDisk): `--disk
// FILE[,readonly=on][,snapshot=on]` (repeatable), config strings (`disk=FILE,readonly=on,snapshot=on`),
// saved JSON, and the exports (QEMU -drive/-device, libvirt <disk>, KubeVirt disks + hostDisk or
// ephemeral volumes), each round trip back to the same configuration; every malformed disk refused
// with one line.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import type { ApiEvent } from '../../electron/service/api.ts';
import { createService } from '../../electron/service/service.ts';
import { LibraryStore } from '../../electron/service/library-store.ts';
import { QemuImgProgress } from '../../electron/service/disk-conversion.ts';
import { rejection } from '../support/api-errors.ts';
import { removeTempHomes, tempHome } from '../support/temp-home.ts';
import { missingTool } from '../support/tools.ts';
import { VM_OPTIONS, commandLine, configFromOptions, optionsFromConfig } from '../../electron/vmm/config/cli-args.ts';
import { formatConfigString, parseConfigString } from '../../electron/vmm/config/config-string.ts';
import { ConfigError, diskMode, validateConfig } from '../../electron/vmm/config/vm-config.ts';
import { resolveMachineWithoutKvm } from '../../electron/vmm/config/resolve.ts';
import { exportConfig } from '../../electron/vmm/export/export.ts';
import { prepareExperiment } from '../../electron/experiments/runner.ts';
import { MAX_DISKS } from '../../electron/vmm/config/limits.ts';
import { parseYamlSubset } from '../support/yaml-subset.ts';

afterAll(removeTempHomes);
const boot = { kernelPath: '/srv/kernels/probe.elf', cmdline: 'scenario=virtio-blk' };
const DISKS = [{ path: '/srv/images/root.img' }, { path: '/srv/images/data disk.raw', readonly: true as const }];

describe('disks in the configuration', () => {
  it('--disk is repeatable, keeps order, and round-trips through the command line', () => {
    const { values } = parseArgs({ args: ['--disk', '/srv/images/root.img', '--disk', '/srv/images/data disk.raw,readonly=on'], options: VM_OPTIONS, strict: true });
    const c = configFromOptions(values);
    expect(c.disks).toEqual(DISKS);
    const again = configFromOptions(parseArgs({ args: optionsFromConfig(c), options: VM_OPTIONS, strict: true }).values);
    expect(again).toEqual(c);
    expect(commandLine(c)).toContain("--disk /srv/images/root.img --disk '/srv/images/data disk.raw,readonly=on'");
    expect(configFromOptions({ disk: ['/a.img,readonly=off'] }).disks).toEqual([{ path: '/a.img' }]);
  });

  it('config strings: disk=FILE, with readonly=on right after it belonging to that disk', () => {
    const c = parseConfigString('cpus=2,disk=/srv/images/root.img,disk=/srv/images/data disk.raw,readonly=on,rng=on');
    expect(c.disks).toEqual(DISKS);
    expect(formatConfigString(c)).toBe(`cpus=2,memory=128,machine=${c.machine},rng=on,disk=/srv/images/root.img,disk=/srv/images/data disk.raw,readonly=on`);
    expect(parseConfigString(formatConfigString(c))).toEqual(c);
    expect(() => parseConfigString('cpus=2,readonly=on')).toThrow(/^config string: readonly= belongs right after a disk=FILE$/);
    expect(() => parseConfigString('disk=/a.img,cpus=2,readonly=on')).toThrow(/belongs right after a disk=FILE/);
  });

  it('the saved library keeps disks, in order and read-only where they were, across a reopen; a service started on it lists them', async () => {
    const home = tempHome('library-disks');
    const config = validateConfig({ name: 'with-disks', disks: DISKS });
    const a = await LibraryStore.open(home);
    await a.mutate((vms) => { vms.push({ id: 'id-disks', config, createdAt: 1, updatedAt: 1 }); });
    const b = await LibraryStore.open(home);
    expect(b.list()[0]!.config.disks).toEqual(DISKS);
    const svc = await createService({ home });
    try {
      expect((await svc.listVms()).find((v) => v.id === 'id-disks')?.config.disks).toEqual(DISKS);
    } finally {
      await svc.close();
    }
  });

  it('snapshot=on: in --disk, config strings and JSON, printed back as given; with readonly=on it means read-only', () => {
    const { values } = parseArgs({ args: ['--disk', '/srv/a.img,snapshot=on', '--disk', '/srv/b.img,readonly=on,snapshot=on', '--disk', '/srv/c.img,snapshot=off'], options: VM_OPTIONS, strict: true });
    const c = configFromOptions(values);
    expect(c.disks).toEqual([{ path: '/srv/a.img', snapshot: true }, { path: '/srv/b.img', readonly: true, snapshot: true }, { path: '/srv/c.img' }]);
    expect(commandLine(c)).toContain('--disk /srv/a.img,snapshot=on --disk /srv/b.img,readonly=on,snapshot=on --disk /srv/c.img');
    expect(configFromOptions(parseArgs({ args: optionsFromConfig(c), options: VM_OPTIONS, strict: true }).values)).toEqual(c);
    // The options in either order; the config string takes the same text after disk=.
    expect(configFromOptions({ disk: ['/srv/b.img,snapshot=on,readonly=on'] }).disks).toEqual([{ path: '/srv/b.img', readonly: true, snapshot: true }]);
    const s = parseConfigString('disk=/srv/a.img,snapshot=on,disk=/srv/b.img,readonly=on,snapshot=on,cpus=2');
    expect(s.disks).toEqual(c.disks!.slice(0, 2));
    expect(formatConfigString(s)).toContain(',disk=/srv/a.img,snapshot=on,disk=/srv/b.img,readonly=on,snapshot=on');
    expect(parseConfigString(formatConfigString(s))).toEqual(s);
    expect(validateConfig(JSON.parse(JSON.stringify(s)))).toEqual(s);
    // One reading of the two flags: readonly wins (the guest may not write: nothing to throw away).
    expect(c.disks!.map(diskMode)).toEqual(['snapshot', 'read-only', 'read-write']);
    const spec = resolveMachineWithoutKvm(validateConfig({ guest: 'probe', disks: c.disks })).spec;
    expect(spec.disks).toEqual([
      { path: '/srv/a.img', readonly: false, snapshot: true }, { path: '/srv/b.img', readonly: true, snapshot: false }, { path: '/srv/c.img', readonly: false, snapshot: false },
    ]);
  });

  it('snapshot refusals are one line each', () => {
    expect(() => configFromOptions({ disk: ['/a.img,snapshot=yes'] })).toThrow(/^disk snapshot must be on or off, got "yes"$/);
    expect(() => configFromOptions({ disk: ['/a.img,snapshot=on,snapshot=off'] })).toThrow(/^disk option snapshot= is given twice$/);
    expect(() => configFromOptions({ disk: ['/a.img,cache=none'] })).toThrow(/^disk option "cache=none" is not known; valid: readonly=on\|off, snapshot=on\|off$/);
    expect(() => parseConfigString('cpus=2,snapshot=on')).toThrow(/^config string: snapshot= belongs right after a disk=FILE$/);
    expect(() => parseConfigString('disk=/a.img,cpus=2,snapshot=on')).toThrow(/^config string: snapshot= belongs right after a disk=FILE$/);
    expect(() => validateConfig({ disks: [{ path: '/a.img', snapshot: 'maybe' }] })).toThrow(/^disk snapshot must be on or off, got "maybe"$/);
  });

  it('saved JSON round-trips; no disks means no field', () => {
    const c = validateConfig({ disks: DISKS });
    expect(validateConfig(JSON.parse(JSON.stringify(c)))).toEqual(c);
    expect('disks' in validateConfig({ disks: [] })).toBe(false);
    expect('disks' in validateConfig({})).toBe(false);
  });

  const bad: [string, unknown, RegExp][] = [
    ['not a list', '/a.img', /^disks must be a list of \{ path, readonly, snapshot \}$/],
    ['too many', Array.from({ length: MAX_DISKS + 1 }, (_, i) => ({ path: `/d${i}.img` })), new RegExp(`^${MAX_DISKS + 1} disks given; at most ${MAX_DISKS} are allowed$`)],
    ['a relative path', [{ path: 'root.img' }], /^disk must be an absolute path \(its full path on the host, starting with \/\), got "root\.img"$/],
    ['an empty path', [{ path: ' ' }], /^disk is an empty path$/],
    ['a comma in the path', [{ path: '/a,b.img' }], /contains a comma, which separates disk options; rename the file or link to it$/],
    ['an unknown field', [{ path: '/a.img', cache: 'none' }], /^unknown disk field "cache"; valid: path, readonly, snapshot$/],
    ['a bad readonly', [{ path: '/a.img', readonly: 'yes' }], /^disk readonly must be on or off, got "yes"$/],
    ['a NUL', [{ path: '/a\0.img' }], /^disk contains a NUL character$/],
  ];
  for (const [what, disks, message] of bad) {
    it(`refuses ${what} in one line`, () => {
      expect(() => validateConfig({ disks })).toThrow(ConfigError);
      expect(() => validateConfig({ disks })).toThrow(message);
    });
  }
});

describe('disks in the exports', () => {
  const config = validateConfig({ name: 'disks', disks: DISKS });
  it('QEMU: one -drive (raw, readonly=on where read-only, commas doubled) and one virtio-blk-pci per disk, in order', () => {
    const text = exportConfig('qemu', { config, boot, hostKind: 'hardware' }).text;
    expect(text).toContain('-drive file=/srv/images/root.img,if=none,id=disk0,format=raw');
    expect(text).toContain("-drive 'file=/srv/images/data disk.raw,if=none,id=disk1,format=raw,readonly=on'");
    expect(text.indexOf('drive=disk0')).toBeLessThan(text.indexOf('drive=disk1'));
    expect(text).toMatch(/-device virtio-blk-pci,drive=disk0/);
  });
  it('libvirt: <disk type=file device=disk> with a raw driver, vda then vdb, <readonly/> where read-only', () => {
    const text = exportConfig('libvirt', { config, boot, hostKind: 'hardware' }).text;
    expect(text).toContain("<disk type='file' device='disk'>\n      <driver name='qemu' type='raw'/>\n      <source file='/srv/images/root.img'/>\n      <target dev='vda' bus='virtio'/>\n    </disk>");
    expect(text).toContain("<source file='/srv/images/data disk.raw'/>\n      <target dev='vdb' bus='virtio'/>\n      <readonly/>\n    </disk>");
  });
  it('KubeVirt: virtio disks with hostDisk volumes of the same names, read-only marked, the feature gate named', () => {
    const text = exportConfig('kubevirt', { config, boot, hostKind: 'hardware' }).text;
    const doc = parseYamlSubset(text) as any;
    const spec = doc.spec.template.spec;
    expect(spec.domain.devices.disks).toEqual([{ name: 'disk0', disk: { bus: 'virtio' } }, { name: 'disk1', disk: { bus: 'virtio', readonly: true } }]);
    expect(spec.volumes).toEqual([{ name: 'disk0', hostDisk: { path: '/srv/images/root.img', type: 'Disk' } }, { name: 'disk1', hostDisk: { path: '/srv/images/data disk.raw', type: 'Disk' } }]);
    expect(text).toMatch(/HostDisk feature gate/);
  });

  // snapshot=on as each target names it; with readonly=on the disk is read-only there too.
  const snap = validateConfig({ name: 'snaps', disks: [{ path: '/srv/images/base.img', snapshot: true }, { path: '/srv/images/ro.img', readonly: true, snapshot: true }] });
  it('QEMU: snapshot=on on the -drive (readonly=on alone where both are given)', () => {
    const text = exportConfig('qemu', { config: snap, boot, hostKind: 'hardware' }).text;
    expect(text).toContain('-drive file=/srv/images/base.img,if=none,id=disk0,format=raw,snapshot=on');
    expect(text).toContain('-drive file=/srv/images/ro.img,if=none,id=disk1,format=raw,readonly=on ');
    expect(text).not.toMatch(/readonly=on,snapshot=on/);
  });
  it('libvirt: <transient/> in the snapshot disk, <readonly/> in the read-only one', () => {
    const text = exportConfig('libvirt', { config: snap, boot, hostKind: 'hardware' }).text;
    expect(text).toContain("<source file='/srv/images/base.img'/>\n      <target dev='vda' bus='virtio'/>\n      <transient/>\n    </disk>");
    expect(text).toContain("<source file='/srv/images/ro.img'/>\n      <target dev='vdb' bus='virtio'/>\n      <readonly/>\n    </disk>");
  });
  it('KubeVirt: a snapshot disk is an ephemeral volume over a claim the header names (never a writable hostDisk)', () => {
    const text = exportConfig('kubevirt', { config: snap, boot, hostKind: 'hardware' }).text;
    const spec = (parseYamlSubset(text) as any).spec.template.spec;
    expect(spec.domain.devices.disks).toEqual([{ name: 'disk0', disk: { bus: 'virtio' } }, { name: 'disk1', disk: { bus: 'virtio', readonly: true } }]);
    expect(spec.volumes).toEqual([
      { name: 'disk0', ephemeral: { persistentVolumeClaim: { claimName: 'snaps-disk0', readOnly: true } } },
      { name: 'disk1', hostDisk: { path: '/srv/images/ro.img', type: 'Disk' } },
    ]);
    expect(text).toMatch(/create this claim holding the raw image first: snaps-disk0 \(\/srv\/images\/base\.img\)/);
  });
});

describe('disks through the service: only from allowed folders, checked before anything is stored', () => {
  it('refuses /etc/shadow and a foreign folder as a disk; takes an image inside UNHALT_HOME; a qcow2 there is refused with the command', async () => {
    const home = tempHome('disks');
    const outside = mkdtempSync(join(tmpdir(), 'unhalt-disk-outside-'));
    const svc = await createService({ home });
    try {
      const shadow = await rejection(svc.createVm({ name: 'd', guest: 'probe', disks: [{ path: '/etc/shadow', readonly: true }] }));
      expect(shadow.code).toBe('invalid');
      expect(shadow.message).toMatch(/^disk \/etc\/shadow is outside the folders Unhalt may give to a guest \(/);
      const foreign = join(outside, 'x.img');
      writeFileSync(foreign, Buffer.alloc(4096));
      expect((await rejection(svc.createVm({ name: 'd', guest: 'probe', disks: [{ path: foreign }] }))).message).toMatch(/is outside the folders/);
      const qcow2 = join(home, 'x.qcow2');
      writeFileSync(qcow2, Buffer.concat([Buffer.from('QFI\xfb', 'latin1'), Buffer.alloc(4092)]));
      expect((await rejection(svc.createVm({ name: 'd', guest: 'probe', disks: [{ path: qcow2 }] }))).message)
        .toBe(`disk ${qcow2}: is a qcow2 image; disks are raw images: convert it with qemu-img convert -f qcow2 -O raw ${qcow2} ${join(home, 'x.raw')}`);
      const img = join(home, 'ok.img');
      writeFileSync(img, Buffer.alloc(4096));
      const rec = await svc.createVm({ name: 'd', guest: 'probe', disks: [{ path: img, readonly: true }] });
      expect(rec.config.disks).toEqual([{ path: img, readonly: true }]);
    } finally {
      await svc.close();
      rmSync(outside, { recursive: true, force: true });
    }
  });
});

describe('createDiskImage (the wizard\'s "create an image")', () => {
  it('makes a sparse raw image of the size in an allowed folder, never over a file, never outside', async () => {
    const home = tempHome('new-disk');
    const svc = await createService({ home });
    try {
      const img = join(home, 'new.img');
      await svc.createDiskImage(img, 64);
      const st = statSync(img);
      expect(st.size).toBe(64 * 1024 * 1024);
      expect(st.blocks * 512).toBeLessThan(1024 * 1024); // sparse
      // A VM takes it as its disk at once.
      expect((await svc.createVm({ name: 'n', guest: 'probe', disks: [{ path: img }] })).config.disks).toEqual([{ path: img }]);
      const again = await rejection(svc.createDiskImage(img, 64));
      expect(again.message).toBe(`disk ${img}: already exists; pick it as the disk, or choose a new name to create one`);
      expect(statSync(img).size).toBe(64 * 1024 * 1024);
      expect((await rejection(svc.createDiskImage('/etc/unhalt-disk.img', 1))).message).toMatch(/^disk \/etc\/unhalt-disk\.img is outside the folders/);
      expect((await rejection(svc.createDiskImage(join(home, 'no-such-folder', 'x.img'), 1))).message).toMatch(/is outside the folders/);
      expect((await rejection(svc.createDiskImage(join(home, 'big.img'), 0))).message).toBe('disk size (MiB) must be between 1 and 1048576, got 0');
      expect((await rejection(svc.createDiskImage('rel.img', 1))).message).toMatch(/^disk must be an absolute path/);
      expect(existsSync(join(home, 'big.img'))).toBe(false);
    } finally {
      await svc.close();
    }
  });
});

describe('qemu-img\'s progress as the conversion reports it', () => {
  it('whole percents, only rising, from output a pipe may cut anywhere', () => {
    const p = new QemuImgProgress();
    expect(p.feed('    (0.00/100%)\r')).toBe(0);
    expect(p.feed('    (12.')).toBeUndefined(); // a reading cut in two
    expect(p.feed('50/100%)\r')).toBe(12);
    expect(p.feed('    (25.00/100%)\r    (37.50/100%)\r')).toBe(37); // two in one chunk: the newer
    expect(p.feed('    (37.90/100%)\r')).toBeUndefined(); // the same whole percent
    expect(p.feed('    (20.00/100%)\r')).toBeUndefined(); // never back
    expect(p.feed('qemu-img: something (not a reading)\n')).toBeUndefined();
    expect(p.feed('(')).toBeUndefined();
    expect(p.feed('100.00/100%)\r')).toBe(100);
    expect(p.feed('    (100.00/100%)\r\n')).toBeUndefined();
    // Only the start of a reading is kept for the next chunk: what can be no reading is dropped.
    const q = new QemuImgProgress();
    for (let i = 0; i < 1000; i++) q.feed('(xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx');
    expect(q.tail).toBe('');
    expect(q.feed('50.00/100%)\r')).toBeUndefined(); // not joined to a "(" that began no reading
    q.feed('    (62.5');
    expect(q.tail).toBe('(62.5');
    q.feed('0/10');
    expect(q.tail).toBe('(62.50/10');
    expect(q.feed('0%)\r')).toBe(62);
    expect(q.tail).toBe('');
    expect(q.feed('    (75.00/100%)\r')).toBe(75);
  });
});

describe.skipIf(missingTool('qemu-img', 'qemu-utils') !== undefined)('convertDiskImage (the wizard\'s qcow2 -> raw, with qemu-img)', () => {
  it('converts a qcow2 beside itself with progress events between 0 and 100, ending in done; the raw holds the same bytes; never over a file; not a qcow2 refused', async () => {
    const home = tempHome('convert');
    const svc = await createService({ home });
    const events: ApiEvent[] = [];
    svc.on((e) => events.push(e));
    try {
      const raw = join(home, 'src.img');
      // 64 MiB of data, no two MiB alike: qemu-img reports its progress per 2 MiB (0, 3.12, 6.25 ...
      // 100 %), one write each; how many of those reach the service apart depends on how the pipe
      // is read (a run read 0, 12, 100 from 16 MiB), so at least one between 0 and 100 is asked.
      const block = Uint8Array.from({ length: 1024 * 1024 }, (_, i) => (i * 7 + (i >> 12)) & 0xff);
      const data = Buffer.alloc(64 * 1024 * 1024);
      for (let mib = 0; mib < 64; mib++) { data.set(block, mib * 1024 * 1024); data.writeUInt32LE(mib + 1, mib * 1024 * 1024); }
      writeFileSync(raw, data);
      const qcow2 = join(home, 'guest.qcow2');
      expect(spawnSync('qemu-img', ['convert', '-f', 'raw', '-O', 'qcow2', raw, qcow2]).status).toBe(0);
      const started = await svc.convertDiskImage(qcow2);
      expect(started).toMatchObject({ source: qcow2, target: join(home, 'guest.raw'), state: 'running' });
      const end = Date.now() + 30_000;
      const mine = () => events.flatMap((e) => (e.type === 'disk-conversion' && e.conversion.id === started.id ? [e.conversion] : []));
      while (!mine().some((c) => c.state !== 'running') && Date.now() < end) await new Promise((r) => setTimeout(r, 20));
      const last = mine().at(-1)!;
      expect(last).toMatchObject({ state: 'done', percent: 100 });
      const percents = mine().map((c) => c.percent);
      expect([...percents].sort((a, b) => a - b)).toEqual(percents); // progress only goes up
      expect(percents.filter((n) => n > 0 && n < 100).length, `percents seen: ${percents.join(' ')}`).toBeGreaterThanOrEqual(1);
      expect(readFileSync(join(home, 'guest.raw')).equals(data)).toBe(true);
      // The raw image is a disk now; converting again would overwrite it: refused.
      expect((await svc.createVm({ name: 'c', guest: 'probe', disks: [{ path: join(home, 'guest.raw') }] })).config.disks).toHaveLength(1);
      expect((await rejection(svc.convertDiskImage(qcow2))).message).toBe(`disk ${join(home, 'guest.raw')}: already exists; pick it as the disk, or move it away to convert again`);
      expect((await rejection(svc.convertDiskImage(raw))).message).toBe(`disk ${raw}: is not a qcow2 image; there is nothing to convert`);
      expect((await rejection(svc.convertDiskImage('/etc/shadow'))).message).toMatch(/^disk \/etc\/shadow is outside the folders/);
    } finally {
      await svc.close();
    }
  });
});

describe('disks and experiments', () => {
  it('a bench configuration with a disk is refused before anything runs (no files through experiments)', () => {
    expect(() => prepareExperiment({ guest: 'probe', workload: 'ipi', runs: 5, configs: [{ name: 'a', config: 'cpus=2' }, { name: 'b', config: 'cpus=2,disk=/etc/shadow,readonly=on' }] }))
      .toThrow('configuration "b": disk= is not a bench knob (the workloads use no disk); drop it');
  });
});

// --device isa-debug-exit through every configuration surface (one rule, device-config.ts): the
// spec's spellings (QEMU's hex and decimal), its refusals in one line naming cause and fix, the
// CLI, config strings, saved JSON and the service's checks, --dry-run, the board's ports, and
// the exports (QEMU's -device, libvirt's pass-through, KubeVirt's list of what is not exported).
import { parseArgs } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { createService } from '../../electron/service/service.ts';
import { LibraryStore } from '../../electron/service/library-store.ts';
import { rejection } from '../support/api-errors.ts';
import { removeTempHomes, tempHome } from '../support/temp-home.ts';
import { VM_OPTIONS, commandLine, configFromOptions, optionsFromConfig } from '../../electron/vmm/config/cli-args.ts';
import { formatConfigString, parseConfigString, withKnobs } from '../../electron/vmm/config/config-string.ts';
import { DEBUG_EXIT_DEFAULTS, debugExitStatus, formatDeviceOption, parseDeviceOption, qemuDeviceOption } from '../../electron/vmm/config/device-config.ts';
import { ConfigError, validateConfig } from '../../electron/vmm/config/vm-config.ts';
import { resolveMachineWithoutKvm } from '../../electron/vmm/config/resolve.ts';
import { exportConfig } from '../../electron/vmm/export/export.ts';
import { describeResolution } from '../../electron/cli/describe.ts';
import { parseYamlSubset } from '../support/yaml-subset.ts';

afterAll(removeTempHomes);
const KUT = { type: 'isa-debug-exit', iobase: 0xf4, iosize: 4 } as const;
const boot = { kernelPath: '/srv/kernels/x86/msr.flat', cmdline: '' };

describe('the --device spec', () => {
  it('takes QEMU\'s spellings: hex with 0x (either case) or decimal, options in any order, QEMU\'s defaults', () => {
    expect(parseDeviceOption('isa-debug-exit,iobase=0xf4,iosize=4')).toEqual(KUT);
    expect(parseDeviceOption('isa-debug-exit,iobase=0xF4,iosize=0x4')).toEqual(KUT);
    expect(parseDeviceOption('isa-debug-exit,iosize=4,iobase=244')).toEqual(KUT);
    expect(parseDeviceOption(' isa-debug-exit , iobase=0xf4 , iosize=4 ')).toEqual(KUT);
    expect(parseDeviceOption('isa-debug-exit')).toEqual({ type: 'isa-debug-exit', iobase: 0x501, iosize: 2 });
    expect(DEBUG_EXIT_DEFAULTS).toEqual({ iobase: 0x501, iosize: 2 });
    expect(parseDeviceOption('isa-debug-exit,iosize=1')).toMatchObject({ iosize: 1 });
    expect(parseDeviceOption('isa-debug-exit,iobase=0xfffc,iosize=4')).toMatchObject({ iobase: 0xfffc });
    expect(parseDeviceOption('isa-debug-exit,iobase=0')).toMatchObject({ iobase: 0 });
  });

  it('prints itself back as it parses, and in QEMU\'s hex for the QEMU export', () => {
    expect(formatDeviceOption(KUT)).toBe('isa-debug-exit,iobase=0xf4,iosize=4');
    expect(parseDeviceOption(formatDeviceOption(KUT))).toEqual(KUT);
    expect(qemuDeviceOption(KUT)).toBe('isa-debug-exit,iobase=0xf4,iosize=0x4');
  });

  const refusals: [string, string][] = [
    ['pci-testdev', 'device "pci-testdev" is not known; the devices known: isa-debug-exit[,iobase=N][,iosize=1|2|4] (N decimal or 0x hex; QEMU\'s defaults iobase=0x501,iosize=2)'],
    ['', 'device "" is not known; the devices known: isa-debug-exit'],
    ['ISA-debug-exit', 'device "ISA-debug-exit" is not known'],
    ['isa-debug-exit,port=0xf4', 'isa-debug-exit: option "port=0xf4" is not known; its options: iobase=N, iosize=1|2|4'],
    ['isa-debug-exit,iobase', 'isa-debug-exit: iobase must be a number (decimal, or hex with 0x), got ""'],
    ['isa-debug-exit,iobase=f4', 'isa-debug-exit: iobase must be a number (decimal, or hex with 0x), got "f4"'],
    ['isa-debug-exit,iobase=0xf4h', 'isa-debug-exit: iobase must be a number (decimal, or hex with 0x), got "0xf4h"'],
    ['isa-debug-exit,iobase=-1', 'isa-debug-exit: iobase must be a number (decimal, or hex with 0x), got "-1"'],
    ['isa-debug-exit,iobase=1e3', 'isa-debug-exit: iobase must be a number'],
    ['isa-debug-exit,iobase=0x10000', 'isa-debug-exit: iobase must be a port from 0 to 0xffff, got 65536'],
    ['isa-debug-exit,iosize=3', 'isa-debug-exit: iosize must be 1, 2 or 4, got 3'],
    ['isa-debug-exit,iosize=8', 'isa-debug-exit: iosize must be 1, 2 or 4, got 8'],
    ['isa-debug-exit,iobase=0xfffe,iosize=4', 'isa-debug-exit: iobase 0xfffe with iosize 4 runs past port 0xffff; give a lower iobase'],
    ['isa-debug-exit,iobase=0xf4,iobase=0x501', 'isa-debug-exit: iobase= is given twice; give it once'],
  ];
  for (const [text, message] of refusals) {
    it(`refuses "${text}" in one line`, () => {
      const fn = () => parseDeviceOption(text);
      expect(fn).toThrow(ConfigError);
      expect(fn).toThrow(message);
      try { fn(); } catch (e) { expect((e as Error).message).not.toContain('\n'); }
    });
  }

  it('the status is QEMU\'s (V << 1) | 1 as an 8-bit exit status', () => {
    expect([0, 1, 38, 0x7f, 0x80, 0xffffffff].map(debugExitStatus)).toEqual([1, 3, 77, 255, 1, 255]);
  });
});

describe('devices in a configuration', () => {
  it('one isa-debug-exit per VM, from any surface; JSON fields checked by the same rule', () => {
    expect(validateConfig({ devices: [KUT] }).devices).toEqual([KUT]);
    expect(validateConfig({ devices: [{ type: 'isa-debug-exit' }] }).devices).toEqual([{ type: 'isa-debug-exit', iobase: 0x501, iosize: 2 }]);
    expect(validateConfig({ devices: [] })).toEqual(validateConfig({}));
    expect(() => validateConfig({ devices: [KUT, KUT] })).toThrow('isa-debug-exit is given twice: a VM has at most one; give it once');
    expect(() => validateConfig({ devices: [KUT, { type: 'x' }, KUT] })).toThrow(/device "x" is not known/);
    expect(() => validateConfig({ devices: KUT })).toThrow(/^devices must be a list/);
    expect(() => validateConfig({ devices: [{ ...KUT, irq: 4 }] })).toThrow('isa-debug-exit: unknown field "irq"; its fields: type, iobase, iosize');
    expect(() => validateConfig({ devices: [{ ...KUT, iobase: '0xf4' }] })).toThrow('isa-debug-exit: iobase must be a port from 0 to 0xffff, got "0xf4"');
    expect(() => validateConfig({ devices: [{ ...KUT, iosize: 4.5 }] })).toThrow('isa-debug-exit: iosize must be 1, 2 or 4, got 4.5');
  });

  it('--device: parsed by the same rule, printed back by the equivalent command line; a second one refused', () => {
    const { values } = parseArgs({ args: ['--device', 'isa-debug-exit,iobase=0xf4,iosize=4'], options: VM_OPTIONS, strict: true });
    const c = configFromOptions(values);
    expect(c.devices).toEqual([KUT]);
    expect(commandLine(c)).toContain('--device isa-debug-exit,iobase=0xf4,iosize=4');
    const again = parseArgs({ args: optionsFromConfig(c), options: VM_OPTIONS, strict: true });
    expect(configFromOptions(again.values)).toEqual(c);
    expect(() => configFromOptions({ device: ['isa-debug-exit', 'isa-debug-exit,iobase=0xf4'] })).toThrow('isa-debug-exit is given twice');
    expect(() => configFromOptions({ device: ['edu'] })).toThrow(/^device "edu" is not known; the devices known: isa-debug-exit/);
  });

  it('config strings: device= with iobase= and iosize= right after it, as --device writes them; round trip', () => {
    const c = parseConfigString('cpus=2,device=isa-debug-exit,iobase=0xf4,iosize=4');
    expect(c.devices).toEqual([KUT]);
    expect(formatConfigString(c)).toContain('device=isa-debug-exit,iobase=0xf4,iosize=4');
    expect(parseConfigString(formatConfigString(c))).toEqual(c);
    // With a disk before it: each takes its own options.
    const both = parseConfigString('disk=/srv/a.img,readonly=on,device=isa-debug-exit,iosize=1');
    expect(both.disks).toEqual([{ path: '/srv/a.img', readonly: true }]);
    expect(both.devices).toEqual([{ type: 'isa-debug-exit', iobase: 0x501, iosize: 1 }]);
    expect(() => parseConfigString('iobase=0xf4')).toThrow('config string: iobase= belongs right after a device=NAME');
    expect(() => parseConfigString('device=isa-debug-exit,readonly=on')).toThrow('config string: readonly= belongs right after a disk=FILE');
    expect(() => parseConfigString('device=isa-debug-exit,device=isa-debug-exit')).toThrow('isa-debug-exit is given twice');
    expect(() => parseConfigString('device=isa-debug-exit,iosize=3')).toThrow('isa-debug-exit: iosize must be 1, 2 or 4, got 3');
    // A knob changed on top keeps the device.
    expect(parseConfigString(withKnobs('cpus=1,device=isa-debug-exit,iobase=0xf4,iosize=4', 'cpus=2')).devices).toEqual([KUT]);
  });

  it('--dry-run names its ports; one over a port of the board is refused, naming that device and the fix', () => {
    const c = validateConfig({ devices: [KUT] });
    const r = resolveMachineWithoutKvm(c);
    expect(r.spec.debugExit).toEqual({ iobase: 0xf4, iosize: 4 });
    const text = describeResolution(c, r);
    expect(text).toContain('isa-debug-exit: ports 0xf4-0xf7; a guest write of V ends the run with exit status (V << 1) | 1');
    expect(text).toContain('equivalent:    unhalt run --guest probe --cpus 1 --memory 128 --name vm --machine ');
    expect(text).toContain(' --device isa-debug-exit,iobase=0xf4,iosize=4\n');
    expect(resolveMachineWithoutKvm(validateConfig({})).spec.debugExit).toBeUndefined();
    expect(() => resolveMachineWithoutKvm(validateConfig({ devices: [{ type: 'isa-debug-exit', iobase: 0x3fc, iosize: 4 }] })))
      .toThrow("isa-debug-exit at 0x3fc (iosize 4) overlaps the board's com1 (ports 0x3f8-0x3ff); give another iobase, e.g. iobase=0xf4 (kvm-unit-tests') or QEMU's default 0x501");
    expect(() => resolveMachineWithoutKvm(validateConfig({ devices: [{ type: 'isa-debug-exit', iobase: 0xcfa, iosize: 2 }] }))).toThrow(/overlaps the board's PCI configuration \(ports 0xcf8-0xcfb\)/);
  });

  it('the library keeps it across a reopen; the service refuses a bad one in the schema\'s words', async () => {
    const home = tempHome('library-devices');
    const config = validateConfig({ name: 'kut', devices: [KUT] });
    const a = await LibraryStore.open(home);
    await a.mutate((vms) => { vms.push({ id: 'id-kut', config, createdAt: 1, updatedAt: 1 }); });
    const b = await LibraryStore.open(home);
    expect(b.list()[0]!.config.devices).toEqual([KUT]);
    const svc = await createService({ home });
    try {
      expect((await svc.listVms()).find((v) => v.id === 'id-kut')?.config.devices).toEqual([KUT]);
      const bad = await rejection(svc.createVm({ name: 'bad', guest: 'probe', devices: [{ type: 'isa-debug-exit', iosize: 3 }] }));
      expect(bad.message).toBe('isa-debug-exit: iosize must be 1, 2 or 4, got 3');
      const unknown = await rejection(svc.createVm({ name: 'bad', guest: 'probe', devices: [{ type: 'edu' }] }));
      expect(unknown.message).toMatch(/^device "edu" is not known; the devices known: isa-debug-exit/);
      const made = await svc.createVm({ name: 'kut2', guest: 'probe', devices: [KUT] });
      expect(made.config.devices).toEqual([KUT]);
    } finally {
      await svc.close();
    }
  });
});

describe('isa-debug-exit in the exports', () => {
  const config = validateConfig({ name: 'kut', devices: [KUT] });
  it('QEMU: its own -device, in QEMU\'s spelling; nothing said missing', () => {
    const text = exportConfig('qemu', { config, boot, hostKind: 'hardware' }).text;
    expect(text).toContain('  -device isa-debug-exit,iobase=0xf4,iosize=0x4');
    expect(text).toContain('Every knob of this VM has a QEMU option.');
    expect(exportConfig('qemu', { config: validateConfig({ name: 'kut' }), boot, hostKind: 'hardware' }).text).not.toContain('isa-debug-exit');
  });
  it('libvirt: no element for it, so QEMU\'s -device through <qemu:commandline>, said in the header', () => {
    const text = exportConfig('libvirt', { config, boot, hostKind: 'hardware' }).text;
    expect(text).toContain("<domain type='kvm' xmlns:qemu='http://libvirt.org/schemas/domain/qemu/1.0'>");
    expect(text).toContain("  <qemu:commandline>\n    <qemu:arg value='-device'/>\n    <qemu:arg value='isa-debug-exit,iobase=0xf4,iosize=0x4'/>\n  </qemu:commandline>");
    expect(text).toMatch(/<!-- device isa-debug-exit,iobase=0xf4,iosize=0x4: libvirt has no element for it; it is passed in <qemu:commandline> as -device/);
  });
  it('KubeVirt: listed as not exported, with what to do instead; the manifest carries nothing of it', () => {
    const text = exportConfig('kubevirt', { config, boot, hostKind: 'hardware' }).text;
    expect(text).toContain('device isa-debug-exit,iobase=0xf4,iosize=0x4: not exported; KubeVirt has no field for QEMU\'s isa-debug-exit');
    expect(text).not.toContain('Every knob of this VM has a KubeVirt field.');
    const doc = parseYamlSubset(text) as { spec: unknown };
    expect(JSON.stringify(doc.spec)).not.toContain('debug-exit');
  });
});

describe('pc-testdev through the same surfaces', () => {
  const TESTDEV = { type: 'pc-testdev' } as const;
  it('the spec: its name alone; any option refused in one line; it prints back as it parses', () => {
    expect(parseDeviceOption('pc-testdev')).toEqual(TESTDEV);
    expect(parseDeviceOption(' pc-testdev , ')).toEqual(TESTDEV);
    expect(formatDeviceOption(TESTDEV)).toBe('pc-testdev');
    expect(qemuDeviceOption(TESTDEV)).toBe('pc-testdev');
    expect(() => parseDeviceOption('pc-testdev,iobase=0xe0')).toThrow('pc-testdev: option "iobase=0xe0" is not known; it takes no options');
    expect(() => parseDeviceOption('pci-testdev')).toThrow(/the devices known: isa-debug-exit\[.*\), pc-testdev$/);
    expect(() => validateConfig({ devices: [{ type: 'pc-testdev', size: 1 }] })).toThrow('pc-testdev: unknown field "size"; it has only type');
    expect(() => validateConfig({ devices: [TESTDEV, TESTDEV] })).toThrow('pc-testdev is given twice: a VM has at most one; give it once');
  });

  it('next to isa-debug-exit from the CLI and config strings; round trips', () => {
    const c = configFromOptions({ device: ['pc-testdev', 'isa-debug-exit,iobase=0xf4,iosize=4'] });
    expect(c.devices).toEqual([TESTDEV, KUT]);
    expect(commandLine(c)).toContain('--device pc-testdev --device isa-debug-exit,iobase=0xf4,iosize=4');
    const s = parseConfigString('device=pc-testdev,device=isa-debug-exit,iobase=0xf4,iosize=4');
    expect(s.devices).toEqual([TESTDEV, KUT]);
    expect(parseConfigString(formatConfigString(s))).toEqual(s);
    expect(() => parseConfigString('device=pc-testdev,iobase=0xf4')).toThrow('pc-testdev: option "iobase=0xf4" is not known; it takes no options');
  });

  it('--dry-run names its ports and window; an isa-debug-exit over its ports is refused, naming it', () => {
    const c = validateConfig({ devices: [TESTDEV, KUT] });
    const r = resolveMachineWithoutKvm(c);
    expect(r.spec.pcTestdev).toBe(true);
    expect(describeResolution(c, r)).toContain('pc-testdev:    ports 0xe0-0xeb, IRQ-line ports 0x2000-0x2017, MMIO 0xff000000-0xff00ffff');
    expect(resolveMachineWithoutKvm(validateConfig({ devices: [KUT] })).spec.pcTestdev).toBeUndefined();
    expect(() => resolveMachineWithoutKvm(validateConfig({ devices: [TESTDEV, { type: 'isa-debug-exit', iobase: 0xe4, iosize: 4 }] })))
      .toThrow("isa-debug-exit at 0xe4 (iosize 4) overlaps the board's pc-testdev (ports 0xe4-0xe7)");
    // Without pc-testdev those ports are free.
    expect(resolveMachineWithoutKvm(validateConfig({ devices: [{ type: 'isa-debug-exit', iobase: 0xe4, iosize: 4 }] })).spec.debugExit).toEqual({ iobase: 0xe4, iosize: 4 });
  });

  it('the exports: QEMU\'s -device pc-testdev; KubeVirt lists it as not exported', () => {
    const config = validateConfig({ name: 'kut', devices: [TESTDEV] });
    expect(exportConfig('qemu', { config, boot, hostKind: 'hardware' }).text).toContain('  -device pc-testdev');
    const kv = exportConfig('kubevirt', { config, boot, hostKind: 'hardware' }).text;
    expect(kv).toContain('device pc-testdev: not exported; KubeVirt has no field for QEMU\'s test devices');
  });
});

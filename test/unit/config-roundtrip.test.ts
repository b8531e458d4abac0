// One schema: CLI flags, config strings, saved JSON and the API map to the same VmConfig.
import { parseArgs } from 'node:util';
import { describe, expect, it } from 'vitest';
import { VM_OPTIONS, commandLine, configFromOptions, optionsFromConfig } from '../../electron/vmm/config/cli-args.ts';
import { CONFIG_STRING_KEYS, KNOB_KEYS, formatConfigString, parseConfigString, withKnobs } from '../../electron/vmm/config/config-string.ts';
import { ConfigError, validateConfig, type VmConfig } from '../../electron/vmm/config/vm-config.ts';
import { FEATURE_NAMES } from '../../electron/vmm/machine/features.ts';

const samples: Record<string, unknown>[] = [
  {},
  { cpus: 4, memoryMiB: 512, machine: 'unhalt-1.0', cpuPm: true, haltPollNs: 0, pin: [0, 1] },
  { name: 'lab vm_1', cpuFeatures: { 'kvm-pv-unhalt': false, 'kvm-hint-dedicated': true }, memLock: true, append: "scenario=idle ms=500 it's" },
  { guest: 'custom', kernel: '/boot/vmlinux', initrd: '/tmp/initrd img', append: 'console=ttyS0', pvmProfile: false },
  { guest: 'linux', cpus: 2 },
  { cpus: 2, rng: true },
  { guest: 'linux', rng: 'on' },
  { guest: 'linux', cpus: 2, guestHaltPollNs: 200000, cpuFeatures: { 'kvm-poll-control': false } },
  { guest: 'custom', kernel: '/boot/vmlinuz', append: 'console=ttyS0', guestHaltPollNs: 0 },
  { guest: 'custom', kernel: '/srv/kvm-unit-tests/x86/msr.flat', devices: [{ type: 'isa-debug-exit', iobase: 0xf4, iosize: 4 }] },
  { cpus: 2, disks: [{ path: '/srv/a.img', readonly: true }], devices: [{ type: 'isa-debug-exit' }] },
];

function viaCli(c: VmConfig): VmConfig {
  const { values } = parseArgs({ args: optionsFromConfig(c), options: VM_OPTIONS, strict: true });
  return configFromOptions(values);
}

describe('config round trips', () => {
  for (const raw of samples) {
    const c = validateConfig(raw);
    it(`CLI <-> config: ${JSON.stringify(raw)}`, () => {
      expect(viaCli(c)).toEqual(c);
    });
    it(`JSON <-> config: ${JSON.stringify(raw)}`, () => {
      expect(validateConfig(JSON.parse(JSON.stringify(c)))).toEqual(c);
    });
    it(`config string <-> config: ${JSON.stringify(raw)}`, () => {
      const base = { guest: c.guest, name: c.name, kernel: c.kernel, initrd: c.initrd, append: c.append };
      expect(parseConfigString(formatConfigString(c), base)).toEqual(c);
    });
  }

  it('parses the documented config string', () => {
    const c = parseConfigString('cpus=4,memory=512,machine=unhalt-1.0,cpu-pm=on,kvm-pv-unhalt=off,halt-poll-ns=0,pin=0+1');
    expect(c).toMatchObject({ cpus: 4, memoryMiB: 512, machine: 'unhalt-1.0', cpuPm: true, haltPollNs: 0, pin: [0, 1], cpuFeatures: { 'kvm-pv-unhalt': false } });
    expect(parseConfigString('pin=0-3').pin).toEqual([0, 1, 2, 3]);
  });

  it('rng: on adds the virtio-rng device everywhere; off is the default and is not stored', () => {
    expect(parseConfigString('cpus=1,rng=on').rng).toBe(true);
    expect(configFromOptions({ rng: 'on' }).rng).toBe(true);
    expect(validateConfig({ rng: false })).toEqual(validateConfig({}));
    expect(configFromOptions({ rng: 'off' })).toEqual(validateConfig({}));
    expect(formatConfigString(validateConfig({ rng: true }))).toContain('rng=on');
    expect(commandLine(validateConfig({ rng: true }))).toContain('--rng on');
    expect(() => configFromOptions({ rng: 'maybe' })).toThrow(/rng must be on or off, got "maybe"/);
    expect(() => parseConfigString('rng=1')).toThrow(/rng must be on or off/);
  });

  it('guest-halt-poll-ns: the same knob on every surface, refused for the probe guest in one sentence', () => {
    expect(parseConfigString('cpus=2,guest-halt-poll-ns=50000', { guest: 'linux' }).guestHaltPollNs).toBe(50000);
    expect(configFromOptions({ guest: 'linux', 'guest-halt-poll-ns': '0' }).guestHaltPollNs).toBe(0);
    expect(commandLine(validateConfig({ guest: 'linux', guestHaltPollNs: 7 }))).toContain('--guest-halt-poll-ns 7');
    expect(formatConfigString(validateConfig({ guest: 'linux', guestHaltPollNs: 7 }))).toContain('guest-halt-poll-ns=7');
    for (const refuse of [() => validateConfig({ guestHaltPollNs: 1000 }), () => parseConfigString('guest-halt-poll-ns=1000'),
      () => configFromOptions({ 'guest-halt-poll-ns': '1000' })]) {
      expect(refuse).toThrow(ConfigError);
      expect(refuse).toThrow(/guest-halt-poll-ns sets a Linux guest kernel's cpuidle-haltpoll; the probe guest has none: drop it, or choose the linux or a custom guest/);
    }
    expect(() => configFromOptions({ guest: 'linux', 'guest-halt-poll-ns': '-1' })).toThrow(/guest-halt-poll-ns must be between 0 and 1000000000, got -1/);
    expect(() => configFromOptions({ guest: 'linux', 'guest-halt-poll-ns': '0x10' })).toThrow(/guest-halt-poll-ns must be a whole number/);
    expect(() => parseConfigString('guest-halt-poll-ns=1,guest-halt-poll-ns=2', { guest: 'linux' })).toThrow(/given twice/);
  });

  it('prints an equivalent, shell-quoted command line', () => {
    expect(commandLine(validateConfig({ append: 'scenario=idle ms=5' }))).toContain("--append 'scenario=idle ms=5'");
  });
});

describe('bad knob inputs', () => {
  const bad: [string, () => unknown, RegExp][] = [
    ['unknown machine type', () => validateConfig({ machine: 'pc-q35-9.9' }), /unknown machine type "pc-q35-9.9"; valid: unhalt, unhalt-1.0, unhalt-1.1, unhalt-1.2/],
    ['unknown feature (CLI)', () => configFromOptions({ cpu: 'host,kvm-turbo=on' }), /unknown CPU feature "kvm-turbo"; valid: kvmclock/],
    ['malformed feature', () => configFromOptions({ cpu: 'host,kvm-pv-unhalt' }), /needs a value/],
    ['bad feature value', () => configFromOptions({ cpu: 'host,kvm-pv-unhalt=maybe' }), /kvm-pv-unhalt must be on or off/],
    ['another CPU model', () => configFromOptions({ cpu: 'qemu64' }), /CPU model "qemu64" is not supported/],
    ['unknown overcommit key', () => configFromOptions({ overcommit: 'cpu-pm=on,turbo=on' }), /unknown overcommit option "turbo"/],
    ['negative halt-poll-ns', () => configFromOptions({ 'halt-poll-ns': '-5' }), /halt-poll-ns must be between 0/],
    ['bad pin list', () => configFromOptions({ pin: '0,x' }), /"x" is not a host CPU number/],
    ['unknown config string key', () => parseConfigString('cpus=2,speed=fast'), /unknown key "speed"/],
    ['every unknown config string key at once', () => parseConfigString('cpus=2,speed=fast,turbo=on,speed=slow,cpu=4'),
      new RegExp(`^config string: unknown keys "speed", "turbo", "cpu"; valid: ${KNOB_KEYS.join(', ')}, and the paravirt features \\(kvm-pv-unhalt=on, \\.\\.\\.: unhalt machines lists them\\)$`)],
    ['a mistyped paravirt feature', () => parseConfigString('kvm-pv-unhalted=on'), /^config string: unknown key "kvm-pv-unhalted"; valid paravirt features: kvmclock, kvm-nopiodelay, .*kvm-hint-dedicated$/],
    ['many unknown config string keys', () => parseConfigString('a=1,b=1,c=1,d=1,e=1,f=1,g=1'), /^config string: unknown keys "a", "b", "c", "d", "e" and 2 more; valid: cpus, /],
    ['an object property name as a config string key', () => parseConfigString('toString=1'), /^config string: unknown key "toString"; valid: /],
    ['config string without =', () => parseConfigString('cpus'), /is not key=value/],
    ['unknown JSON field', () => validateConfig({ cpuz: 2 }), /unknown configuration field "cpuz"/],
    ['future schema version', () => validateConfig({ version: 9 }), /configuration version 9 is not supported/],
  ];
  for (const [what, fn, message] of bad) {
    it(`refuses ${what}`, () => {
      expect(fn).toThrow(ConfigError);
      expect(fn).toThrow(message);
    });
  }
});

describe('config string keys', () => {
  // The list the forms show as their hint and the parser's message names is exactly what it accepts.
  it('accepts every key it lists, and no other', () => {
    for (const key of CONFIG_STRING_KEYS) {
      const value = key === 'readonly' || key === 'snapshot' ? `disk=/srv/a.img,${key}=on` : `${key}=0`;
      let message = '';
      try { parseConfigString(value); } catch (e) { message = (e as Error).message; }
      expect(message, key).not.toMatch(/unknown key/);
    }
    for (const key of ['cpu', 'memoryMiB', 'cpuPm', 'constructor', 'hostfwds']) {
      expect(() => parseConfigString(`${key}=0`), key).toThrow(`config string: unknown key "${key}"; valid: ${KNOB_KEYS.join(', ')}, and the paravirt features`);
    }
    expect(() => parseConfigString('kvm-turbo=0')).toThrow(`config string: unknown key "kvm-turbo"; valid paravirt features: ${FEATURE_NAMES.join(', ')}`);
  });

  it('refuses a key given twice (the last would win silently); disks, forwards and their options repeat', () => {
    expect(() => parseConfigString('cpus=2,cpus=3')).toThrow('config string: cpus= is given twice (2 and 3): give it once');
    expect(() => parseConfigString('kvm-pv-unhalt=on,halt-poll-ns=0,kvm-pv-unhalt=off')).toThrow('config string: kvm-pv-unhalt= is given twice (on and off): give it once');
    expect(() => parseConfigString('pin=0,pin=1')).toThrow(/pin= is given twice/);
    expect(parseConfigString('disk=/srv/a.img,readonly=on,disk=/srv/b.img,snapshot=on,net=user,hostfwd=tcp::2222-:22,hostfwd=tcp::8080-:80').disks).toHaveLength(2);
    // A knob changed on top of a configuration (the advisor's candidates): replaced, not repeated.
    expect(withKnobs('cpus=2,halt-poll-ns=0,kvm-pv-unhalt=on', 'halt-poll-ns=200000,cpu-pm=on')).toBe('cpus=2,kvm-pv-unhalt=on,halt-poll-ns=200000,cpu-pm=on');
    expect(parseConfigString(withKnobs('cpus=2,halt-poll-ns=0', 'halt-poll-ns=5')).haltPollNs).toBe(5);
    expect(withKnobs('', 'pin=0')).toBe('pin=0');
  });
});

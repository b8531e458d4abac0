// The user's own benchmark, the pure parts: the command splitter (quotes, escapes, refusals),
// the metric's checks and reading, a library VM's configs (knobs changed, disks made throwaway),
// saved workload names that never shadow ours, and the host conditions read from a /sys tree.
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { joinCommand, splitCommand } from '../../electron/experiments/argv-split.ts';
import { hostConditions } from '../../electron/experiments/conditions.ts';
import { conditionsLines } from '../../electron/experiments/conditions-format.ts';
import { checkSaveName, loadWorkload, saveWorkload } from '../../electron/experiments/saved-workloads.ts';
import { validateSpec } from '../../electron/experiments/spec.ts';
import { checkUnit, metricRegex, readMetric, SAVE_NAME, validateUserBenchmark } from '../../electron/experiments/user-bench.ts';
import { configOnVm } from '../../electron/experiments/vm-base.ts';
import { validateConfig } from '../../electron/vmm/config/vm-config.ts';
import { removeTempHomes, tempHome } from '../support/temp-home.ts';

afterAll(removeTempHomes);

describe('splitCommand', () => {
  it('splits at unquoted blanks; quotes and backslashes keep text together, nothing is expanded', () => {
    expect(splitCommand('wrk -t2 -c10  http://127.0.0.1:8080/')).toEqual(['wrk', '-t2', '-c10', 'http://127.0.0.1:8080/']);
    expect(splitCommand(`sh -c 'echo $HOME; ls *'`)).toEqual(['sh', '-c', 'echo $HOME; ls *']);
    expect(splitCommand('echo "a \\"b\\" \\\\ \\n c"')).toEqual(['echo', 'a "b" \\ \\n c']);
    expect(splitCommand("a\\ b c\\'d 'x'\"y\"z")).toEqual(['a b', "c'd", 'xyz']);
    expect(splitCommand(`x '' ""`)).toEqual(['x', '', '']);
    expect(splitCommand('\tprog\targ ')).toEqual(['prog', 'arg']);
    expect(splitCommand("'it'\\''s'")).toEqual(["it's"]);
    expect(splitCommand('~/bin/x > out | y &')).toEqual(['~/bin/x', '>', 'out', '|', 'y', '&']);
  });

  it('refuses unbalanced quotes, a trailing backslash, an empty command and control characters, in one line', () => {
    expect(() => splitCommand(`echo 'abc`)).toThrow("the command has an unbalanced single quote (at character 6): close it");
    expect(() => splitCommand('echo "abc')).toThrow('the command has an unbalanced double quote (at character 6): close it');
    expect(() => splitCommand('echo abc\\')).toThrow('the command ends with a backslash: escape it as \\\\ or quote it');
    expect(() => splitCommand('   ')).toThrow('the command is empty: give the program to run and its arguments');
    expect(() => splitCommand('a\nb')).toThrow(/one line without control characters/);
    expect(() => splitCommand('a\0b')).toThrow(/one line without control characters/);
  });

  it('joinCommand writes a vector that splits back to itself', () => {
    for (const argv of [['a'], ['sh', '-c', "echo 'x' \"$y\""], ['', 'a b', "it's", '\\']]) expect(splitCommand(joinCommand(argv))).toEqual(argv);
  });
});

describe('the metric', () => {
  it('needs exactly one capture group and compiles', () => {
    expect(metricRegex('latency_ms=([0-9.]+)').source).toBe('latency_ms=([0-9.]+)');
    expect(() => metricRegex('latency_ms=[0-9.]+')).toThrow("--metric must have exactly one capture group (the figure), such as 'latency_ms=([0-9.]+)'; it has 0");
    expect(() => metricRegex('(a)=(b)')).toThrow(/it has 2$/);
    expect(metricRegex('(?:p99|p50)=(\\d+)')).toBeTruthy(); // non-capturing groups do not count
    expect(() => metricRegex('x=(')).toThrow(/^--metric is not a valid regular expression/);
  });

  it('reads the last match as a number; no match or no number is the reason for a failed run', () => {
    expect(readMetric('warm-up latency_ms=99\nlatency_ms=12.5\n', 'latency_ms=([0-9.]+)')).toEqual({ value: 12.5 });
    expect(readMetric('all done\n', 'latency_ms=([0-9.]+)')).toEqual({ error: 'the host command\'s output has no match for --metric /latency_ms=([0-9.]+)/ (last line: "all done")' });
    expect(readMetric('', 'x=(\\d+)')).toEqual({ error: "the host command's output has no match for --metric /x=(\\d+)/ (it printed nothing)" });
    expect(readMetric('x=abc', 'x=(\\w+)')).toEqual({ error: '--metric /x=(\\w+)/ matched "abc", which is not a number' });
  });

  it('a benchmark from any surface is checked field by field', () => {
    expect(validateUserBenchmark({ hostCmd: ['node', 'x.js'], metric: 'v=(\\d+)', higherIsBetter: true, unit: 'req/s' }))
      .toEqual({ hostCmd: ['node', 'x.js'], metric: 'v=(\\d+)', higherIsBetter: true, unit: 'req/s' });
    expect(() => validateUserBenchmark({ hostCmd: 'node x.js', metric: 'v=(\\d+)' })).toThrow(/must be a list of one or more strings/);
    expect(() => validateUserBenchmark({ hostCmd: ['x'], metric: 'v=(\\d+)', shell: true })).toThrow(/unknown bench field "shell"/);
    expect(() => validateUserBenchmark({ hostCmd: ['x'], metric: 'v=(\\d+)', ready: '(' })).toThrow(/^--ready is not a valid regular expression/);
  });
});

describe('experiments on a library VM', () => {
  const vm = validateConfig({ name: 'web 1', guest: 'probe', cpus: 2, append: 'scenario=echo', haltPollNs: 5000,
    disks: [{ path: '/data/root.img' }, { path: '/data/ro.img', readonly: true }, { path: '/data/s.img', snapshot: true }] });

  it('each config is the VM with the named knobs changed; every writable disk becomes snapshot=on', () => {
    const c = configOnVm(vm, 'halt-poll-ns=0');
    expect(c).toMatchObject({ name: 'web 1', cpus: 2, append: 'scenario=echo', haltPollNs: 0 });
    expect(c.disks).toEqual([{ path: '/data/root.img', snapshot: true }, { path: '/data/ro.img', readonly: true }, { path: '/data/s.img', snapshot: true }]);
    expect(vm.disks![0]).toEqual({ path: '/data/root.img' }); // the VM's own record is not touched
    expect(configOnVm(vm, 'cpus=1', 'scenario=timer').append).toBe('scenario=timer');
  });

  it('the spec takes the VM\'s guest, refuses disk= knobs and a custom kernel without a benchmark', () => {
    const base = { configs: [{ name: 'a', config: 'halt-poll-ns=0' }, { name: 'b', config: 'halt-poll-ns=200000' }], runs: 2 };
    expect(validateSpec({ ...base, workload: 'timer', vm: { name: 'web 1', image: '/data/root.img', config: vm } })).toMatchObject({ guest: 'probe', vm: { name: 'web 1', image: '/data/root.img' } });
    expect(() => validateSpec({ ...base, configs: [{ name: 'a', config: 'disk=/etc/shadow' }, base.configs[1]], workload: 'timer', vm: { name: 'web 1', config: vm } }))
      .toThrow(/configuration "a": disk= is not a bench knob: the runs use the VM's own disks, each attached snapshot=on; drop it/);
    const custom = validateConfig({ name: 'mine', guest: 'custom', kernel: '/k/vmlinuz' });
    expect(() => validateSpec({ ...base, workload: 'timer', vm: { name: 'mine', config: custom } })).toThrow(/boots its own kernel, where the built-in workloads cannot run: give your own benchmark/);
    expect(validateSpec({ ...base, vm: { name: 'mine', config: custom }, bench: { hostCmd: ['x'], metric: 'v=(\\d+)' } })).toMatchObject({ guest: 'custom', workload: 'host-cmd' });
    expect(validateSpec({ ...base, vm: { name: 'mine', config: custom }, bench: { guestCmd: ['x'], metric: 'v=(\\d+)' } })).toMatchObject({ guest: 'custom', workload: 'guest-cmd' });
  });
});

describe('the unit and the saved name: one rule for the service and the compare form', () => {
  it('takes 1 to 24 printable characters as a unit, µ included', () => {
    expect(checkUnit('µs')).toBe('µs');
    expect(checkUnit('req/s')).toBe('req/s');
    for (const bad of ['', 'x'.repeat(25), 'ms\n', 'a\u202eb', 3]) expect(() => checkUnit(bad)).toThrow('the unit (--unit) must be 1 to 24 printable characters, such as ms or req/s');
    expect(() => validateUserBenchmark({ hostCmd: ['x'], metric: 'v=(\\d+)', unit: '\t' })).toThrow(/the unit \(--unit\)/);
  });
  it('names a saved benchmark by lower-case letters, digits, - and _', () => {
    expect(SAVE_NAME.test('nginx-rps_2')).toBe(true);
    for (const bad of ['', '-x', 'Big', 'a'.repeat(33), 'a b']) expect(SAVE_NAME.test(bad), bad).toBe(false);
  });
});

describe('saved workloads', () => {
  it('never shadow a built-in name; saved ones load back', () => {
    expect(() => checkSaveName('timer')).toThrow("--save-workload timer: that is a built-in workload's name; choose another (a saved workload never shadows one of ours)");
    expect(() => checkSaveName('pipe')).toThrow(/built-in/);
    expect(() => checkSaveName('Bad Name')).toThrow(/use up to 32 lower-case letters/);
    const dir = join(tempHome('saved-wl'), 'workloads');
    const bench = { hostCmd: ['node', 'load.js'], metric: 'rps=(\\d+)', higherIsBetter: true as const, unit: 'req/s' };
    saveWorkload(dir, 'nginx-rps', bench);
    expect(loadWorkload(dir, 'nginx-rps')).toEqual(bench);
    expect(loadWorkload(dir, 'other')).toBeUndefined();
    expect(loadWorkload(dir, 'timer')).toBeUndefined();
  });
});

describe('host conditions', () => {
  it('reads what exists and says unknown for the rest', () => {
    const root = tempHome('sysroot');
    const put = (p: string, v: string) => { mkdirSync(join(root, p, '..'), { recursive: true }); writeFileSync(join(root, p), `${v}\n`); };
    put('proc/sys/kernel/osrelease', '6.1.0-test');
    put('sys/module/kvm/parameters/halt_poll_ns', '200000');
    put('sys/module/kvm/parameters/halt_poll_ns_grow', '2');
    put('sys/devices/system/cpu/cpu0/cpufreq/scaling_governor', 'performance');
    put('sys/devices/system/cpu/intel_pstate/no_turbo', '1');
    put('sys/devices/system/cpu/smt/active', '1');
    put('sys/devices/system/cpu/vulnerabilities/meltdown', 'Not affected');
    put('sys/devices/system/cpu/vulnerabilities/retbleed', 'Vulnerable');
    const c = hostConditions(root);
    expect(c).toMatchObject({
      kernel: '6.1.0-test', kvm: { haltPollNs: '200000', haltPollNsGrow: '2', haltPollNsShrink: 'unknown' },
      governor: 'performance', boost: 'off', smt: 'on', mitigations: { meltdown: 'Not affected', retbleed: 'Vulnerable' },
    });
    expect(conditionsLines(c)[1]).toBe('kvm: halt_poll_ns 200000, grow 2, shrink unknown; mitigations: 2 listed, vulnerable: retbleed');
    const empty = hostConditions(tempHome('sysroot-empty'));
    expect(empty).toMatchObject({ kernel: 'unknown', governor: 'unknown', boost: 'unknown', smt: 'unknown', mitigations: 'unknown' });
  });
});

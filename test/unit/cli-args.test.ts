// The parts of the command line a user meets first (issue 13, finding 9) and the run command's
// pure helpers (finding 8): --help detection, negative numbers, one decimal number rule, repeated
// options, one "unhalt: " prefix, VM names normalised in one place, limits that name the limit,
// timers longer than Node's 24.8-day maximum, mkdir -p that ends under /proc, "disk full".
import { afterEach, describe, expect, it, vi } from 'vitest';
import { UsageError, parse, say, wantsHelp } from '../../electron/cli/args.ts';
import { RUN_OPTIONS } from '../../electron/cli/run.ts';
import { MAX_TIMER_MS, setLongTimeout } from '../../electron/cli/long-timer.ts';
import { toApiError } from '../../electron/service/errors.ts';
import { describeIoError } from '../../electron/service/io-errors.ts';
import { MakeDirError, makeDirs } from '../../electron/service/make-dir.ts';
import { configFromOptions } from '../../electron/vmm/config/cli-args.ts';
import { parseConfigString } from '../../electron/vmm/config/config-string.ts';
import { ConfigError, sameVmName, validateConfig } from '../../electron/vmm/config/vm-config.ts';
import { describeGuestFault } from '../../electron/vmm/runtime/guest-fault.ts';

describe('option parsing', () => {
  it('finds --help and -h as options, not as the value of another option', () => {
    expect(wantsHelp(['--help'], RUN_OPTIONS)).toBe(true);
    expect(wantsHelp(['--cpus', '2', '-h'], RUN_OPTIONS)).toBe(true);
    expect(wantsHelp(['--append=--help'], RUN_OPTIONS)).toBe(false);
    expect(wantsHelp(['--cpus', '2'], RUN_OPTIONS)).toBe(false);
  });

  it('takes a negative number as a value, so its range check speaks (not "ambiguous")', () => {
    const { values } = parse(['--cpus', '-1'], RUN_OPTIONS);
    expect(values.cpus).toBe('-1');
    expect(() => configFromOptions(values)).toThrow(/^cpus must be between 1 and 254, got -1$/);
    expect(() => configFromOptions(parse(['--halt-poll-ns', '-5'], RUN_OPTIONS).values)).toThrow(/halt-poll-ns must be between 0 and/);
  });

  it('refuses a single-valued option given twice', () => {
    expect(() => parse(['--kernel', '/a', '--kernel', '/b'], RUN_OPTIONS)).toThrow(new UsageError('--kernel is given more than once; give it once'));
    expect(() => parse(['--cpus=1', '--cpus', '2'], RUN_OPTIONS)).toThrow(/--cpus is given more than once/);
  });

  it('one number rule everywhere: decimal digits, no hex, no exponent', () => {
    for (const bad of ['0x2', '1e1', '2.0', '']) {
      expect(() => configFromOptions({ cpus: bad })).toThrow(bad === '' ? 'cpus is empty: give a whole number from 1 to 254' : /cpus must be a whole number, got/);
      expect(() => parseConfigString(`cpus=${bad}`)).toThrow(ConfigError);
    }
    expect(configFromOptions({ cpus: '2', 'halt-poll-ns': '0' }).cpus).toBe(2);
  });

  it('prefixes a message with "unhalt: " exactly once', () => {
    const spy = vi.spyOn(process.stderr, 'write').mockImplementation(() => true);
    say('unhalt: unhalt: bad thing');
    say('plain');
    expect(spy.mock.calls.map((c) => c[0])).toEqual(['unhalt: bad thing\n', 'unhalt: plain\n']);
    spy.mockRestore();
  });
});

describe('VM names and limits', () => {
  it('"dup" and "dup " are one name: normalised where every config is validated', () => {
    expect(validateConfig({ name: 'dup ' }).name).toBe('dup');
    expect(validateConfig({ name: '  two   words ' }).name).toBe('two words');
    expect(sameVmName('dup', 'DUP ')).toBe(true);
  });

  it('a long name names the name limit, whatever its raw length', () => {
    expect(() => validateConfig({ name: 'a'.repeat(300) })).toThrow(/^name is 300 characters long; at most 64 are allowed$/);
    expect(() => validateConfig({ name: 'a'.repeat(5000) })).toThrow(/at most 64 are allowed/);
  });

  it('a long pin list names the pin limit', () => {
    expect(() => configFromOptions({ pin: '0-2000' })).toThrow(/at most 1024 host CPUs/);
    expect(() => validateConfig({ pin: Array.from({ length: 1100 }, (_, i) => i % 4) })).toThrow(/pin lists 1100 host CPUs; at most 1024 are allowed/);
  });
});

describe('long timers', () => {
  afterEach(() => { vi.useRealTimers(); });

  it('fires after a delay beyond setTimeout\'s 2^31-1 ms, not at once', () => {
    vi.useFakeTimers();
    const fired = vi.fn();
    const days30 = 30 * 24 * 3600 * 1000;
    expect(days30).toBeGreaterThan(MAX_TIMER_MS);
    setLongTimeout(fired, days30);
    vi.advanceTimersByTime(1000);
    expect(fired).not.toHaveBeenCalled();
    vi.advanceTimersByTime(MAX_TIMER_MS);
    expect(fired).not.toHaveBeenCalled();
    vi.advanceTimersByTime(days30 - MAX_TIMER_MS - 1000);
    expect(fired).toHaveBeenCalledTimes(1);
  });

  it('can be cancelled', () => {
    vi.useFakeTimers();
    const fired = vi.fn();
    const cancel = setLongTimeout(fired, 10);
    cancel();
    vi.advanceTimersByTime(100);
    expect(fired).not.toHaveBeenCalled();
  });
});

describe('folders and I/O errors', () => {
  it('mkdir -p under /proc fails at once with a message (Node\'s own recursive mkdir spins forever)', () => {
    const t = performance.now();
    expect(() => makeDirs('/proc/unhalt-test/experiments')).toThrow(MakeDirError);
    expect(() => makeDirs('/proc/unhalt-test')).toThrow(/cannot create the folder \/proc\/unhalt-test: no such file or directory \(ENOENT\)/);
    expect(performance.now() - t).toBeLessThan(1000);
  });

  it('a full disk reaches the API as "disk full", not "internal"', () => {
    const enospc = Object.assign(new Error('ENOSPC: no space left on device, write'), { code: 'ENOSPC' });
    const e = toApiError(enospc);
    expect(e.code).toBe('host');
    expect(e.message).toMatch(/^disk full: /);
    expect(describeIoError(enospc)).toBe('disk full (ENOSPC)');
  });

  it('a guest-reported exception is one readable line', () => {
    expect(describeGuestFault({ vector: 6, error_code: 0, rip: 0x10326a, cpu: 0 })).toBe('the guest reported an unhandled #UD invalid opcode (vector 6) at rip 0x10326a on CPU 0');
    expect(describeGuestFault({ vector: 14, error_code: 2, rip: 0x1000, cpu: 1 })).toMatch(/#PF page fault \(vector 14\) at rip 0x1000, error code 0x2 on CPU 1/);
  });
});

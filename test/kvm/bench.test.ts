// `unhalt bench` end to end with tiny settings: two configs, one run each, results saved; and a
// run that cannot meet its deadline, reported as a failure in every format and the exit code.
import { existsSync, mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { spawnSync } from 'node:child_process';
import { allowedHostCpus as allowedCpus } from '../../native/kvm/affinity.ts';
import { runCli } from '../support/cli.ts';
import { kvmAvailable } from '../support/probe.ts';

describe.skipIf(!kvmAvailable)('unhalt bench', () => {
  it('runs two configs end to end, prints the table and keeps the evidence', async () => {
    const home = mkdtempSync(join(tmpdir(), 'unhalt-bench-'));
    const r = await runCli(['bench', '--workload', 'pio', '--workload-args', 'count=2000', '--runs', '1',
      '--config', 'base=cpus=1', '--config', 'nopoll=cpus=1,halt-poll-ns=0'], { env: { UNHALT_HOME: home } });
    expect(r.stderr).toMatch(/experiment saved/);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/\| config \| VMM \| median \(ns\/exit\)/);
    expect(r.stdout).toMatch(/\| base \| unhalt \| [\d.]+ \|/);
    expect(r.stdout).toMatch(/\| nopoll \| unhalt \| [\d.]+ \|/);
    const files = readdirSync(join(home, 'experiments'));
    expect(files).toHaveLength(1);
    const saved = JSON.parse(readFileSync(join(home, 'experiments', files[0]!), 'utf8'));
    expect(saved.raw).toHaveLength(2);
    expect(saved.environment).toMatchObject({ hostKind: expect.stringMatching(/pvm|hardware/), kernel: expect.any(String), appVersion: expect.any(String) });
    expect(saved.environment.configs[1].config.haltPollNs).toBe(0);
    expect(saved).toMatchObject({ status: 'ok', unit: 'ns/exit', failures: [] });
    expect(saved.environment.hostSpeed.slowdown).toBeGreaterThanOrEqual(1);
    // The mechanism's counters are columns of the table.
    expect(r.stdout).toMatch(/\| halt exits\/s \| poll hit rate \| halt exits \| hypercalls \| runs ok \|/);
    expect(r.stdout).toMatch(/\| base \| unhalt \| .* \| 1\/1 \|$/m);
  });

  it('a run that cannot finish by its deadline: the experiment says it failed, run by run, and exits 2', async () => {
    const home = mkdtempSync(join(tmpdir(), 'unhalt-bench-'));
    // The idle scenario takes 5 s; --deadline gives every run 1 s.
    const r = await runCli(['bench', '--workload', 'idle', '--workload-args', 'ms=5000', '--runs', '1', '--deadline', '1',
      '--config', 'a=cpus=1', '--config', 'b=cpus=1,halt-poll-ns=0'], { env: { UNHALT_HOME: home } });
    expect(r.code).toBe(2);
    const why = 'no idle result: stopped at its 1.0 s deadline (set by --deadline)';
    expect(r.stdout).toMatch(/^\*\*the experiment failed: none of its 2 runs gave a result\.\*\*$/m);
    expect(r.stdout).not.toMatch(/\| config \|/);
    expect(r.stdout).not.toMatch(/\(\)/);
    expect(r.stdout).toContain(`failed: a (unhalt) run 1: ${why}`);
    expect(r.stdout).toContain(`failed: b (unhalt) run 1: ${why}`);
    expect(r.stderr).toContain(`unhalt: failed: a (unhalt) run 1: ${why}\n`);
    expect(r.stderr).toContain(`unhalt: failed: b (unhalt) run 1: ${why}\n`);
    expect(r.stderr).toMatch(/unhalt: the experiment failed: none of its 2 runs gave a result\n/);
    const files = readdirSync(join(home, 'experiments'));
    const saved = JSON.parse(readFileSync(join(home, 'experiments', files[0]!), 'utf8'));
    expect(saved).toMatchObject({ status: 'failed', unit: 'ticks', rows: [] });
    expect(saved.failures).toEqual([
      { config: 'a', runner: 'unhalt', run: 1, error: why },
      { config: 'b', runner: 'unhalt', run: 1, error: why },
    ]);
    const csv = await runCli(['bench', '--workload', 'idle', '--workload-args', 'ms=5000', '--runs', '1', '--deadline', '0.5', '--format', 'csv',
      '--config', 'a=cpus=1', '--config', 'b=cpus=1'], { env: { UNHALT_HOME: home } });
    expect(csv.code).toBe(2);
    expect(csv.stdout.trim().split('\n').slice(1)).toEqual([
      expect.stringMatching(/^a,unhalt,1,,ticks,.*,no idle result: stopped at its 0\.5 s deadline \(set by --deadline\),/),
      expect.stringMatching(/^b,unhalt,1,,ticks,.*,no idle result: stopped at its 0\.5 s deadline \(set by --deadline\),/),
    ]);
  });

  it('runs every run under host contention when asked: busy processes on the vCPUs\' CPUs, named in the record, their CPU per run, and gone after', async () => {
    const home = mkdtempSync(join(tmpdir(), 'unhalt-bench-'));
    // The busy loops of any unhalt process (contention.ts busyLoop): none may be left after the run.
    const busy = () => (spawnSync('pgrep', ['-f', '^/bin/sh -c while kill -0 [0-9]+ 2>/dev/null; do :; done$'], { encoding: 'utf8' }).stdout.trim().split('\n').filter(Boolean)).length;
    const before = busy();
    const r = await runCli(['bench', '--workload', 'timer', '--workload-args', 'count=200', '--runs', '2', '--contention', '2', '--format', 'json',
      '--config', 'free=cpus=1', '--config', 'pinned=cpus=1,pin=0'], { env: { UNHALT_HOME: home } });
    expect(r.code, r.stderr).toBe(0);
    const saved = JSON.parse(r.stdout);
    expect(saved.spec.contention).toBe(2);
    const all = allowedCpus().join(',');
    expect(saved.environment.contention).toEqual([
      { config: 'free', processes: 2, hostCpus: allowedCpus() }, { config: 'pinned', processes: 2, hostCpus: [0] },
    ]);
    expect(saved.notes).toContain(`host contention: 2 CPU-bound processes on host CPUs ${all}, during every run (free); host contention: 2 CPU-bound processes on host CPU 0, during every run (pinned)`);
    expect(saved.raw).toHaveLength(4);
    for (const run of saved.raw) {
      expect(run.contentionCpuNs, JSON.stringify(run)).toBeGreaterThan(0);
      // The vCPU thread waited for a CPU the busy processes held (where the kernel has schedstat).
      if (existsSync('/proc/self/schedstat')) expect(run.runqueueWaitNs).toBeGreaterThan(0);
    }
    expect(busy()).toBe(before);
  });

  it('refuses a bad experiment before running anything', async () => {
    const home = mkdtempSync(join(tmpdir(), 'unhalt-bench-'));
    for (const [args, message] of [
      [['--workload', 'pio', '--config', 'a=cpus=1'], /two or more configurations/],
      [['--workload', 'nope', '--config', 'a=cpus=1', '--config', 'b=cpus=1'], /unknown probe workload "nope"/],
      [['--workload', 'ipi', '--config', 'a=cpus=1', '--config', 'b=cpus=2'], /configuration "a": workload ipi needs at least 2 vCPUs/],
      [['--workload', 'pio', '--config', 'a=cpus=1', '--config', 'b=turbo=on'], /configuration "b": config string: unknown key "turbo"/],
      [['--workload', 'pio', '--config', 'a=cpus=1', '--config', 'b=cpus=1', '--deadline', '0'], /deadline must be a number of seconds above 0/],
      // The same limit and message as the API's (experiments/spec.ts).
      [['--workload', 'pio', '--config', 'a=cpus=1', '--config', 'b=cpus=1', '--runs', '0'], /runs must be a whole number from 1 to 100, got 0/],
      [['--workload', 'pio', '--config', 'a=cpus=1', '--config', 'b=cpus=1', '--runs', '101'], /runs must be a whole number from 1 to 100, got 101/],
      [['--workload', 'pio', '--config', 'a=cpus=1', '--config', 'b=cpus=1', '--contention', '65'], /host contention must be a whole number of CPU-bound processes from 0 to 64, got 65/],
      [['--workload', 'pio', '--config', 'a=cpus=1', '--config', 'b=cpus=1', '--contention', 'x'], /--contention/],
    ] as const) {
      const r = await runCli(['bench', ...args], { env: { UNHALT_HOME: home } });
      expect(r.code).toBe(1);
      expect(r.stderr).toMatch(message);
    }
    expect(() => readdirSync(join(home, 'experiments'))).toThrow();
  });
});

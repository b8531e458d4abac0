// `unhalt bench` end to end with tiny settings: two configs, one run each, results saved.
import { mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
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
  });

  it('refuses a bad experiment before running anything', async () => {
    const home = mkdtempSync(join(tmpdir(), 'unhalt-bench-'));
    for (const [args, message] of [
      [['--workload', 'pio', '--config', 'a=cpus=1'], /two or more configurations/],
      [['--workload', 'nope', '--config', 'a=cpus=1', '--config', 'b=cpus=1'], /unknown probe workload "nope"/],
      [['--workload', 'ipi', '--config', 'a=cpus=1', '--config', 'b=cpus=2'], /configuration a: workload ipi needs at least 2 vCPUs/],
      [['--workload', 'pio', '--config', 'a=cpus=1', '--config', 'b=turbo=on'], /configuration b: config string: unknown key "turbo"/],
    ] as const) {
      const r = await runCli(['bench', ...args], { env: { UNHALT_HOME: home } });
      expect(r.code).toBe(1);
      expect(r.stderr).toMatch(message);
    }
    expect(() => readdirSync(join(home, 'experiments'))).toThrow();
  });
});

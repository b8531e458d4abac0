// unhalt-1.2's board as kvm-unit-tests sees it, through the real CLI: the suite reads its vCPU
// count from QEMU's fw_cfg when no environment file says it (smptest), and times `inl` of the
// FADT's PM timer (vmexit inl_from_pmtimer). Under unhalt-1.1 the same kernel finds no fw_cfg:
// its ports read all ones, so it waits for 0xffff - 1 APs, and passes only with the env file.
import { beforeAll, describe, expect, it } from 'vitest';
import { buildKvmUnitTests } from '../../native/guest/kvm-unit-tests/build.mjs';
import { runUnderUnhalt, unitTests, type RunResult, type UnitTest } from '../support/kvm-unit-tests.ts';
import { kvmAvailable } from '../support/probe.ts';
import { guestScaled, scaled } from '../support/time-scale.ts';

let suite = '';
let tests: UnitTest[] = [];
const test = (name: string): UnitTest => tests.find((t) => t.name === name)!;
const said = (r: RunResult): string => `${r.verdict}, status ${r.status}, in ${(r.ms / 1000).toFixed(1)} s:\n${r.output.slice(-1200)}\n${r.stderr.slice(-600)}`;
const DEADLINE = Math.min(guestScaled(90_000), 600_000);

describe.skipIf(!kvmAvailable)('fw_cfg and the ACPI PM timer (unhalt-1.2) under kvm-unit-tests', () => {
  beforeAll(() => {
    suite = buildKvmUnitTests(); // built already: its stamp makes this a look-up
    tests = unitTests(suite);
  }, scaled(300_000));

  it('smptest without an env file under unhalt-1.2: fw_cfg gives it 2 vCPUs, and it passes', async () => {
    const t = test('smptest');
    expect(t.smp).toBe(2);
    const r = await runUnderUnhalt(suite, t, DEADLINE, { machine: 'unhalt-1.2', envFile: false });
    expect(r.status, said(r)).toBe(1);
    expect(r.verdict, said(r)).toBe('PASS');
    expect(r.output).toContain('found 2 cpus');
  }, DEADLINE + 10_000);

  it('smptest under unhalt-1.1: no fw_cfg (0x510/0x511 read all ones); it passes only with the env file', async () => {
    const t = test('smptest');
    const vmmTimeoutS = Math.ceil(scaled(3_000) / 1000);
    const bare = await runUnderUnhalt(suite, t, DEADLINE, { machine: 'unhalt-1.1', envFile: false, vmmTimeoutS });
    // The suite's fw_cfg read of FW_CFG_NB_CPUS: two bytes of 0xff, so it waits for 65534 APs until --timeout.
    expect(bare.output, said(bare)).toContain('smp: waiting for 65534 APs');
    expect(bare.status, said(bare)).toBe(124);
    const withEnv = await runUnderUnhalt(suite, t, DEADLINE, { machine: 'unhalt-1.1' });
    expect(withEnv.verdict, said(withEnv)).toBe('PASS');
    expect(withEnv.output).toContain('found 2 cpus');
  }, 2 * DEADLINE + 10_000);

  it('vmexit inl_from_pmtimer under unhalt-1.2: the FADT names PM timer port 0x608 and the guest times its reads', async () => {
    const t = test('vmexit_inl_pmtimer');
    expect(t.args).toBe('inl_from_pmtimer');
    const r = await runUnderUnhalt(suite, t, DEADLINE, { machine: 'unhalt-1.2', envFile: false });
    expect(r.status, said(r)).toBe(1);
    expect(r.output).toMatch(/^PM timer port is 608\r?$/m);
    const cycles = /^inl_from_pmtimer (\d+)\r?$/m.exec(r.output);
    expect(cycles, said(r)).not.toBeNull();
    expect(Number(cycles![1])).toBeGreaterThan(0);
  }, DEADLINE + 10_000);
});

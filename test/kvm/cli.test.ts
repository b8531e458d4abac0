// The `unhalt` command line end to end: exit codes (docs/cli.md), stdout = ttyS0 only, one-line errors.
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { runCli } from '../support/cli.ts';
import { linuxKitBuilt } from '../../electron/vmm/guests-linux.ts';
import { hardwareKvm } from '../support/kvm-semantics.ts';
import { kvmAvailable } from '../support/probe.ts';

const dir = mkdtempSync(join(tmpdir(), 'unhalt-cli-'));

describe.skipIf(!kvmAvailable)('unhalt run', () => {
  it('boots the probe guest, prints ttyS0 on stdout and exits 0 on power-off', async () => {
    const log = join(dir, 'agent.log');
    const r = await runCli(['run', '--guest', 'probe', '--cpus', '2', '--append', 'scenario=hello', '--agent-log', log]);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(r.stdout).toContain('2 of 2 CPUs up');
    expect(r.stdout).not.toContain('@u1');
    expect(readFileSync(log, 'utf8')).toMatch(/@u1 boot cpus_found=2 cpus_up=2/);
  });

  it('--stats writes NDJSON: one object per vCPU per sample, KVM counters, _per_s rates and the halt histograms', async () => {
    const stats = join(dir, 'stats.ndjson');
    const r = await runCli(['run', '--guest', 'probe', '--cpus', '2', '--append', 'scenario=idle ms=600', '--stats', stats, '--stats-interval', '100']);
    expect(r.code).toBe(0);
    const lines = readFileSync(stats, 'utf8').trim().split('\n').map((l) => JSON.parse(l));
    const samples = lines.filter((l) => 'vcpu' in l);
    expect(new Set(samples.map((s) => s.vcpu))).toEqual(new Set([0, 1]));
    expect(samples.length).toBeGreaterThanOrEqual(6);
    const last0 = samples.filter((s) => s.vcpu === 0).at(-1);
    expect(last0).toMatchObject({ t: expect.any(Number), halt_exits: expect.any(Number), halt_exits_per_s: expect.any(Number) });
    expect(last0.halt_exits).toBeGreaterThan(100);
    // KVM's halt histograms, as arrays of the interval's counts per bucket (null on a vCPU's first line).
    const HISTS = ['halt_wait_hist', 'halt_poll_success_hist', 'halt_poll_fail_hist'];
    const withHists = samples.filter((s) => Array.isArray(s.halt_wait_hist));
    expect(withHists.length).toBeGreaterThanOrEqual(samples.length - 2);
    let halts = 0;
    let counted = 0;
    for (const s of withHists) {
      for (const h of HISTS) {
        expect(s[h], h).toHaveLength(s.halt_wait_hist.length);
        for (const n of s[h]) expect(Number.isInteger(n) && n >= 0, `${h}: ${n}`).toBe(true);
      }
      halts += Math.round((s.halt_exits_per_s * s.interval_ms) / 1000);
      // A halt that blocked is in the wait histogram, one a poll caught in the success one (one
      // that found a wake-up already there is in neither): never more than the halts.
      counted += [...s.halt_wait_hist, ...s.halt_poll_success_hist].reduce((a: number, b: number) => a + b, 0);
    }
    expect(withHists[0].halt_wait_hist.length).toBeGreaterThanOrEqual(2);
    expect(counted, `histograms ${counted}, halt exits ${halts}`).toBeGreaterThan(0);
    expect(counted).toBeLessThanOrEqual(halts + 2 * withHists.length);
  });

  it('with no guest named: the Linux kit on hardware semantics, else the probe guest and why', async () => {
    if (hardwareKvm() && linuxKitBuilt()) {
      const r = await runCli(['run', '--dry-run']);
      expect(r.code).toBe(0);
      expect(r.stdout).toMatch(/^guest: +linux/m);
      return;
    }
    const r = await runCli(['run', '--append', 'scenario=hello']);
    expect(r.code).toBe(0);
    const note = r.stderr.trim();
    if (note) expect(note).toMatch(/^unhalt: note: using the probe guest: (this host is PVM|the Linux guest kit is not built)/);
  });

  it('feeds stdin to the echo shell; `poweroff` exits 0', async () => {
    const r = await runCli(['run', '--guest', 'probe'], { input: 'cpus\rpoweroff\r', inputAfter: 'probe> ' });
    expect(r.code).toBe(0);
    expect(r.stdout).toContain('cpus up: 1');
  });

  it('exits 2 with the reason when the guest triple-faults', async () => {
    const r = await runCli(['run', '--guest', 'probe', '--append', 'scenario=fault']);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/the VM failed: vCPU 0: (triple fault|KVM internal error)/);
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
  });

  it('exits 124 when --timeout expires', async () => {
    const r = await runCli(['run', '--timeout', '1']);
    expect(r.code).toBe(124);
    expect(r.stderr).toMatch(/timeout/);
  });

  const notPvh = join(dir, 'not-a-kernel.txt');
  writeFileSync(notPvh, 'hello, I am a text file\n');
  const cases: [string, string[], RegExp, NodeJS.ProcessEnv?][] = [
    ['a missing kernel', ['--kernel', join(dir, 'nope.elf')], /kernel not found/],
    ['a file that is not a kernel', ['--kernel', notPvh], /neither a PVH ELF, a Linux bzImage nor a multiboot kernel/],
    ['an ELF without a PVH note', ['--kernel', process.execPath], /is an ELF without a PVH entry note/],
    ['memory too small', ['--memory', '4'], /memory \(MiB\) must be between 16 and/],
    ['memory larger than the host', ['--memory', '900000'], /more than this host has/],
    ['memory that is not a number', ['--memory', 'lots'], /must be a whole number/],
    ['zero cpus', ['--cpus', '0'], /cpus must be between 1 and/],
    ['too many cpus', ['--cpus', '5000'], /cpus must be between 1 and/],
    ['an unknown option', ['--frobnicate'], /Unknown option '--frobnicate'/],
    ['a missing KVM device', [], /UNHALT_KVM_DEVICE names \/nonexistent\/kvm, a path that does not exist\. To fix: /, { UNHALT_KVM_DEVICE: '/nonexistent/kvm' }],
    ['a device that is not KVM', [], /not a KVM device/, { UNHALT_KVM_DEVICE: '/dev/null' }],
  ];
  for (const [what, args, message, env] of cases) {
    it(`refuses ${what} with one line and exit code 1`, async () => {
      const r = await runCli(['run', ...args], { env });
      expect(r.code).toBe(1);
      expect(r.stdout).toBe('');
      expect(r.stderr).toMatch(message);
      expect(r.stderr.trim().split('\n')).toHaveLength(1);
    });
  }

  it('explains a KVM device the user may not open (dropped privileges)', async () => {
    const r = await runCli(['run'], { prefix: ['setpriv', '--reuid=65534', '--regid=65534', '--clear-groups'], env: { NODE_COMPILE_CACHE: join(dir, 'cc') } });
    if (process.getuid?.() !== 0) return; // only root can drop to another user here
    expect(r.code).toBe(1);
    // The cause found (this user may not open it) and its fix (the "kvm" group), in one line.
    expect(r.stderr).toMatch(/user "nobody" may not open \/dev\/kvm.*\. To fix: .*\bkvm\b/);
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
  });
});

describe('unhalt doctor', () => {
  it('reports as JSON', async () => {
    const r = await runCli(['doctor', '--json']);
    const report = JSON.parse(r.stdout);
    // KVM's capabilities are read only where its device opens; without one, doctor says that much and fails.
    expect(report.checks.map((c: { name: string }) => c.name)).toEqual(
      expect.arrayContaining(['kvm-device', ...(kvmAvailable ? ['kvm-capabilities'] : []), 'host-kind', 'host-platform', 'halt-polling', 'probe-guest']),
    );
    if (!kvmAvailable) expect(report.checks.find((c: { name: string }) => c.name === 'kvm-device')).toMatchObject({ ok: false });
    expect(['pvm', 'hardware']).toContain(report.hostKind);
    expect(['bare-metal', 'virtual-machine', 'emulated']).toContain(report.hostVirtualization.platform);
    expect(report.hostVirtualization.evidence.length).toBeGreaterThan(0);
    expect(r.code).toBe(report.ok ? 0 : 1);
  });

  it('recognises an emulated host (QEMU TCG) and says what it means for timings', async () => {
    const cpuinfo = join(dir, 'cpuinfo-tcg');
    writeFileSync(cpuinfo, 'processor\t: 0\nmodel name\t: QEMU TCG CPU version 2.5+\nflags\t\t: fpu tsc msr hypervisor svm npt\n');
    const env = { UNHALT_CPUINFO_PATH: cpuinfo };
    const json = JSON.parse((await runCli(['doctor', '--json'], { env })).stdout);
    expect(json.hostVirtualization).toMatchObject({ platform: 'emulated', hypervisor: 'QEMU TCG' });
    const text = await runCli(['doctor'], { env });
    expect(text.stdout).toMatch(/ok    host-platform: emulated CPU \(QEMU TCG\): .*QEMU TCG CPU/);
    expect(text.stdout).toMatch(/-> .*10-50x/);
  });

  it('names the fix when the KVM device is unusable', async () => {
    const r = await runCli(['doctor'], { env: { UNHALT_KVM_DEVICE: '/nonexistent/kvm' } });
    expect(r.code).toBe(1);
    expect(r.stdout).toMatch(/^FAIL  kvm-device: UNHALT_KVM_DEVICE names \/nonexistent\/kvm, a path that does not exist .*ENOENT/m);
    expect(r.stdout).toMatch(/^      -> unset UNHALT_KVM_DEVICE to use \/dev\/kvm/m);
    // The last line sums it up: the cause and its fix.
    expect(r.stdout.trimEnd().split('\n').at(-1)).toMatch(/^not ready: no KVM: UNHALT_KVM_DEVICE names \/nonexistent\/kvm, .*; fix: unset UNHALT_KVM_DEVICE/);
  });
});

// `unhalt` as a real process (issue 13, findings 2, 8 and 9): exit codes for signals and guest
// faults, output that cannot be written (a full device, a folder) reported and non-zero, device
// nodes never replaced, an agent log kept when the start fails, --help on every command, EPIPE
// without a stack trace, UNHALT_HOME under /proc. Device nodes are mknod copies in a temp
// folder: a regression here replaces those, never the real /dev/null or /dev/full.
import { spawn, spawnSync } from 'node:child_process';
import { closeSync, lstatSync, mkdtempSync, openSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { UNHALT_BIN, runCli } from '../support/cli.ts';
import { kvmAvailable } from '../support/probe.ts';

const dir = mkdtempSync(join(tmpdir(), 'unhalt-cli-exits-'));
const home = mkdtempSync(join(tmpdir(), 'unhalt-cli-exits-home-'));
const devMade = spawnSync('sh', ['-c', `mknod ${dir}/null c 1 3 && mknod ${dir}/full c 1 7`]).status === 0;
const FULL = join(dir, 'full');
const NULL = join(dir, 'null');
const isCharDevice = (p: string) => lstatSync(p).isCharacterDevice();
const env = { UNHALT_HOME: home };

/** Runs the CLI with stdout sent to a file or device (not a pipe), e.g. `> /dev/full`. */
function runToFile(args: string[], stdoutPath: string): Promise<{ code: number | null; stderr: string }> {
  return new Promise((resolve, reject) => {
    const fd = openSync(stdoutPath, 'w');
    const child = spawn(process.execPath, [UNHALT_BIN, ...args], { stdio: ['ignore', fd, 'pipe'], env: { ...process.env, ...env } });
    closeSync(fd);
    let stderr = '';
    child.stderr!.on('data', (d) => { stderr += d; });
    const killer = setTimeout(() => child.kill('SIGKILL'), 60_000);
    child.on('error', reject);
    child.on('close', (code) => { clearTimeout(killer); resolve({ code, stderr }); });
  });
}

/** Starts a run and sends `signal` once the guest printed its first line. */
function runAndSignal(signal: NodeJS.Signals): Promise<{ code: number | null; signal: NodeJS.Signals | null; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [UNHALT_BIN, 'run', '--append', 'scenario=idle ms=20000'], { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...env } });
    let stderr = '';
    let sent = false;
    child.stdout.on('data', () => {
      if (sent) return;
      sent = true;
      // Past the first ~150 ms (where the old code already answered 0), well inside the run.
      setTimeout(() => child.kill(signal), 300);
    });
    child.stderr.on('data', (d) => { stderr += d; });
    const killer = setTimeout(() => child.kill('SIGKILL'), 60_000);
    child.on('error', reject);
    child.on('close', (code, sig) => { clearTimeout(killer); resolve({ code, signal: sig, stderr }); });
  });
}

describe.skipIf(!kvmAvailable)('unhalt run: exit codes', () => {
  it('SIGINT ends the run with 130, SIGTERM with 143, SIGHUP with 129 (not 0 as a power-off), each a clean stop', async () => {
    const int = await runAndSignal('SIGINT');
    expect(int.code).toBe(130);
    expect(int.stderr).toMatch(/SIGINT: stopped the VM/);
    const term = await runAndSignal('SIGTERM');
    expect(term.code).toBe(143);
    const hup = await runAndSignal('SIGHUP');
    expect(hup.code).toBe(129);
    expect(hup.signal).toBeNull();
    expect(hup.stderr).toMatch(/SIGHUP: stopped the VM/);
  });

  for (const kind of ['ud2', 'pf']) {
    it(`a guest's unhandled exception (fault kind=${kind}) exits 2 with one line, not 0 "poweroff"`, async () => {
      const r = await runCli(['run', '--guest', 'probe', '--append', `scenario=fault kind=${kind}`], { env });
      expect(r.code).toBe(2);
      const lines = r.stderr.trim().split('\n');
      expect(lines).toHaveLength(1);
      expect(lines[0]).toMatch(new RegExp(`^unhalt: the VM failed: the guest reported an unhandled ${kind === 'ud2' ? '#UD' : '#PF'}`));
    });
  }

  it.skipIf(!devMade)('stdout on a full disk is reported and non-zero, not lost with exit 0', async () => {
    const r = await runToFile(['run', '--guest', 'probe', '--append', 'scenario=hello'], FULL);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/^unhalt: cannot write to stdout: disk full \(ENOSPC\); output was lost$/m);
    expect(r.stderr.match(/cannot write to stdout/g)).toHaveLength(1);
    expect(isCharDevice(FULL)).toBe(true);
  });

  it.skipIf(!devMade)('--agent-log and --stats on a full device: reported, non-zero, the device kept', async () => {
    const a = await runCli(['run', '--guest', 'probe', '--append', 'scenario=hello', '--agent-log', FULL], { env });
    expect(a.code).toBe(1);
    expect(a.stderr).toContain(`unhalt: cannot write the agent log ${FULL}: disk full (ENOSPC)`);
    const s = await runCli(['run', '--guest', 'probe', '--append', 'scenario=idle ms=400', '--stats', FULL, '--stats-interval', '50'], { env });
    expect(s.code).toBe(1);
    expect(s.stderr).toContain(`unhalt: cannot write the stats file ${FULL}: disk full (ENOSPC)`);
    expect(isCharDevice(FULL)).toBe(true);
  });

  it('a failed start leaves an existing --agent-log as it was', async () => {
    const log = join(dir, 'keep.log');
    writeFileSync(log, 'evidence from the last run\n');
    const r = await runCli(['run', '--guest', 'probe', '--memory', '4', '--agent-log', log], { env });
    expect(r.code).toBe(1);
    expect(readFileSync(log, 'utf8')).toBe('evidence from the last run\n');
  });

  it('--timeout beyond Node\'s timer limit (24.8 days) does not fire at once', async () => {
    const r = await runCli(['run', '--guest', 'probe', '--append', 'scenario=idle ms=300', '--timeout', '3000000'], { env });
    expect(r.code).toBe(0);
    expect(r.stderr).not.toMatch(/timeout/);
  });
});

describe.skipIf(!kvmAvailable)('unhalt bench: the output path', () => {
  const bench = ['bench', '--workload', 'pio', '--workload-args', 'count=1000', '--config', 'a=cpus=1', '--config', 'b=cpus=1', '--runs', '1'];

  it.skipIf(!devMade)('--output to a device writes through and keeps the device node', async () => {
    const r = await runCli([...bench, '--output', NULL], { env });
    expect(r.code).toBe(0);
    expect(isCharDevice(NULL)).toBe(true);
  });

  it.skipIf(!devMade)('--output to a full device says "disk full", exits 1, and the device stays', async () => {
    const r = await runCli([...bench, '--output', FULL], { env });
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(`unhalt: cannot write the bench output ${FULL}: disk full (ENOSPC)`);
    expect(isCharDevice(FULL)).toBe(true);
  });

  it('--output to a folder is refused before any run', async () => {
    const r = await runCli([...bench, '--output', dir], { env });
    expect(r.code).toBe(1);
    expect(r.stderr.trim()).toBe(`unhalt: cannot write the bench output ${dir}: it is a folder`);
  });
});

describe('the command line a user meets first', () => {
  for (const command of ['run', 'serve', 'bench', 'tune', 'doctor', 'selftest', 'machines']) {
    for (const flag of ['--help', '-h']) {
      it(`${command} ${flag}: usage on stdout, exit 0`, async () => {
        const r = await runCli([command, flag], { env });
        expect(r.code).toBe(0);
        expect(r.stdout).toMatch(new RegExp(`^usage: unhalt ${command}`));
        expect(r.stderr).toBe('');
      });
    }
  }

  it('a refusal right at start exits 1 every time, never 134 from a half-loaded vCPU thread', async () => {
    // `unhalt run` starts vCPU 0's thread at once; a process that ended while that thread was
    // still loading koffi's addon died in koffi's initialisation (seen: 1 in ~10 runs).
    const codes: (number | null)[] = [];
    for (let i = 0; i < 15; i++) {
      const r = await runCli(['run', '--cpus', '-1'], { env });
      codes.push(r.code);
      expect(r.stderr).not.toMatch(/FATAL ERROR|napi_throw/);
    }
    expect(codes).toEqual(Array(15).fill(1));
  });

  it('bare `unhalt` prints the overview on stdout and exits 0', async () => {
    const r = await runCli([], { env });
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^usage: unhalt <command>/);
  });

  it('`doctor | head -c1` prints no EPIPE stack trace', async () => {
    const r = await new Promise<{ code: number | null; stderr: string }>((resolve) => {
      const child = spawn(process.execPath, [UNHALT_BIN, 'doctor'], { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...env } });
      let stderr = '';
      child.stderr.on('data', (d) => { stderr += d; });
      child.stdout.once('data', () => child.stdout.destroy());
      child.on('close', (code) => resolve({ code, stderr }));
    });
    expect(r.stderr).not.toMatch(/EPIPE|Error|at /);
    expect([0, 1]).toContain(r.code);
  });

  it('negative numbers get a range message, repeated options are refused, no double prefix', async () => {
    const neg = await runCli(['run', '--dry-run', '--cpus', '-1'], { env });
    expect(neg.stderr.trim()).toBe('unhalt: cpus must be between 1 and 254, got -1');
    const twice = await runCli(['run', '--dry-run', '--kernel', '/a', '--kernel', '/b'], { env });
    expect(twice.code).toBe(1);
    expect(twice.stderr.trim()).toBe('unhalt: --kernel is given more than once; give it once');
    const hex = await runCli(['run', '--dry-run', '--timeout', '0x10'], { env });
    expect(hex.code).toBe(1);
    expect(hex.stderr.trim()).toBe('unhalt: --timeout must be a positive number of seconds, got "0x10"');
  });

  // The stats file is opened once the VM has been resolved against the host's KVM.
  it.skipIf(!kvmAvailable)('a stats file that cannot be written: one line, one prefix', async () => {
    const stats = await runCli(['run', '--stats', join(dir, 'no-such-dir', 's.ndjson')], { env });
    expect(stats.stderr).not.toMatch(/unhalt: .*unhalt: /);
    expect(stats.stderr.match(/cannot write the stats file/g)).toHaveLength(1);
  });

  it('UNHALT_HOME under /proc fails at once with a message (it spun at 100% CPU)', async () => {
    const r = await runCli(['serve', '--no-open', '--port', '0'], { env: { UNHALT_HOME: '/proc/unhalt-test' }, killAfterMs: 10_000 });
    expect(r.code).toBe(1);
    expect(r.stderr.trim()).toBe('unhalt: cannot create the folder /proc/unhalt-test: no such file or directory (ENOENT)');
  });

  it('leaves no file of its own in the device folder', () => {
    expect(readdirSync(dir).filter((n) => n.startsWith('.'))).toEqual([]);
  });
});

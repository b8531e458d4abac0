// The nested lane: a KVM with hardware semantics on a machine whose /dev/kvm is PVM. QEMU in pure
// software emulation (TCG, -cpu max) emulates AMD SVM with nested paging; the Linux it boots ("L1")
// loads kvm-amd and its /dev/kvm behaves like KVM on hardware. Inside L1 the project's own test
// runner runs the lanes whose outcome depends on KVM's semantics (docs/nested.md says which and
// why); their results come out as a tar archive on a raw virtio disk. Several L1s (one per host
// CPU) share the files. The outer host's /dev/kvm is never used here. Every phase has its own
// deadline and fails the lane on its own; nothing is retried. Each L1's whole console and every
// L2 console its checks read (live, on its second serial port) are kept in
// test/artifacts/nested/l1.N/.
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { createWriteStream, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { availableParallelism, totalmem } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checksMinutes, filesWithoutResults, innerSelection, type InnerReport, KVM_UNIT_TESTS_FILES, l1Append, lanesOf, splitFiles, summarizeInner, type VitestJson } from './inner-report.ts';
// @ts-expect-error plain ESM build script without types
import { outerQemu } from './outer-qemu.mjs';
import { buildKvmUnitTests } from '../../native/guest/kvm-unit-tests/build.mjs';
import { chromium, type BrowserServer } from 'playwright-core';
import { canBindTcp } from '../support/free-port.ts';
import { CHROMIUM, CHROMIUM_ARGS, ensureRendererBuilt } from '../e2e/support.ts';

const root = new URL('../../', import.meta.url).pathname;
const NESTED = join(root, 'assets', 'nested');
const ARTIFACTS = join(root, 'test', 'artifacts', 'nested');
/** How L1's QEMU is run: the binary and its firmware folders (outer-qemu.mjs says why not /usr/bin's). */
interface OuterQemu { binary: string; dataArgs: string[]; version: string }
let outer: OuterQemu | undefined;
const minutes = (n: number) => n * 60_000;
/** A positive whole number from the environment, or the default; anything else is refused by name. */
function countFromEnv(name: string, fallback: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 1) throw new Error(`${name} must be a whole number of at least 1, not ${JSON.stringify(raw)}`);
  return n;
}
/** Memory an L1 takes on the host: its 4 GiB of RAM, QEMU's 512 MiB translation cache and the rest of QEMU, with room. */
const HOST_MEMORY_PER_L1 = 6 * 2 ** 30;
/**
 * How many L1s share the checks, and each one's CPUs. One CPU per L1: QEMU's emulated SVM lets an
 * interrupt through with GIF=0 now and then when L1's CPUs send each other IPIs (docs/nested.md),
 * which a one-CPU L1 never does; one L1 per host CPU (memory allowing) keeps the lane as fast as
 * one L1 with them all. UNHALT_NESTED_L1S and UNHALT_NESTED_L1_CPUS override.
 */
const L1_CPUS = countFromEnv('UNHALT_NESTED_L1_CPUS', 1);
const L1_COUNT = countFromEnv('UNHALT_NESTED_L1S',
  Math.max(1, Math.min(Math.floor(availableParallelism() / L1_CPUS), Math.floor(totalmem() / HOST_MEMORY_PER_L1))));
/** How long an L1 may print no phase and no check line before it is asked for its state (askForState). */
const QUIET_MS = minutes(Number(process.env.UNHALT_NESTED_QUIET_MINUTES ?? 10));
/**
 * How often a byte goes to each L1's console once it is up (its init reads and drops them). Under
 * QEMU TCG an idle L1 sometimes gets no timer interrupt for minutes (bench/history.md, nested run P: its
 * watchdog saw 502 s in the idle loop): a serial interrupt every few seconds wakes it, and its
 * kernel then reprograms the timer. A lost wake-up then costs at most this long.
 */
const HEARTBEAT_MS = 5_000;
/** Deadlines per phase. An L1 is at its checks ~10 s after its QEMU starts on an idle 2-CPU host. */
const DEADLINE = { build: minutes(10), boot: minutes(4), poweroff: minutes(3) };

interface Phase { name: string; fields: Record<string, string>; atMs: number }

/**
 * The e2e files in L1 (where this host has no KVM): their browser is a Playwright browser server
 * here, and each L1 gets QEMU's user network with a range of this host's loopback ports
 * forwarded to the same ports in L1 (test/nested/l1/run-checks relays them to L1's loopback).
 */
const E2E_PORTS_PER_L1 = 16;
/** A run of `count` ports free on 127.0.0.1 now, none of them in `taken`; below Linux's ephemeral range (32768-). */
async function freePortRun(count: number, taken: Set<number>): Promise<number> {
  for (let tries = 0; tries < 200; tries++) {
    const base = 20_000 + Math.floor(Math.random() * (12_000 - count));
    let ok = true;
    for (let p = base; ok && p < base + count; p++) ok = !taken.has(p) && await canBindTcp(p);
    if (ok) {
      for (let p = base; p < base + count; p++) taken.add(p);
      return base;
    }
  }
  throw new Error(`no run of ${count} free ports on 127.0.0.1 for the e2e files' servers in L1`);
}
/**
 * QEMU arguments for an L1's network, and the kernel word that tells its init about it: the
 * browser server's port and its path (Playwright's own random one: the path is its only key),
 * and the forwarded range.
 */
function e2eNetwork(browser: URL, base: number): { args: string[]; append: string } {
  const forwards = Array.from({ length: E2E_PORTS_PER_L1 }, (_, i) => `hostfwd=tcp:127.0.0.1:${base + i}-:${base + i}`);
  return {
    args: ['-netdev', `user,id=e2e,${forwards.join(',')}`, '-device', 'virtio-net-pci,netdev=e2e'],
    append: `unhalt.e2e=${browser.port}:${base}:${E2E_PORTS_PER_L1}:${browser.pathname}`,
  };
}

class L1 {
  readonly phases: Phase[] = [];
  private proc?: ChildProcess;
  private waiters = new Set<() => void>();
  private buffered = '';
  exitCode: number | null | undefined;
  readonly startedAt = performance.now();

  /** This L1's artifacts: its two consoles, the results disk and what came out of it. */
  readonly dir: string;
  /** Names it in errors and prefixes its progress lines ("L1.2"). */
  readonly label: string;

  constructor(qemu: OuterQemu, dir: string, label: string, append: string, extraArgs: string[] = []) {
    this.dir = dir;
    this.label = label;
    mkdirSync(dir, { recursive: true });
    const resultsImage = join(dir, 'results.tar');
    rmSync(resultsImage, { force: true });
    writeFileSync(resultsImage, '');
    spawnSync('truncate', ['-s', '256M', resultsImage]);
    const log = createWriteStream(join(dir, 'l1-console.log'));
    const args = [
      ...qemu.dataArgs,
      '-accel', 'tcg,thread=multi,tb-size=512', '-cpu', 'max', '-smp', String(L1_CPUS), '-m', '4G', '-machine', 'q35',
      // ttyS0: L1's console (its init's phases, vitest's output); ttyS1: every L2 console the
      // checks read, as it comes (test/support/console-mirror.ts).
      '-display', 'none', '-serial', 'mon:stdio', '-serial', `file:${join(dir, 'l2-consoles.log')}`, '-monitor', 'none', '-no-reboot', '-nodefaults',
      '-kernel', join(NESTED, 'vmlinuz'), '-initrd', join(NESTED, 'initramfs.cpio.gz'),
      // UNHALT_NESTED_L1_APPEND: extra L1 kernel words, e.g. unhalt.kvm_amd=vgif=0 (module parameters).
      // sysrq_always_enabled: a quiet L1 can be asked for its state (askForState).
      '-append', `console=ttyS0 panic=-1 loglevel=4 mitigations=off sysrq_always_enabled ${append} ${process.env.UNHALT_NESTED_L1_APPEND ?? ''}`.trim(),
      // snapshot=on: L1 writes to its root go to a throw-away overlay, the image stays cached.
      '-drive', `file=${join(NESTED, 'root.ext4')},if=virtio,format=raw,snapshot=on`,
      '-drive', `file=${resultsImage},if=virtio,format=raw`,
      ...extraArgs,
    ];
    // stdin: QEMU's serial mux (mon:stdio above), through which a quiet L1 is asked what it is doing.
    this.proc = spawn(qemu.binary, args, { stdio: ['pipe', 'pipe', 'pipe'] });
    this.proc.stdin!.on('error', () => { /* QEMU gone: nothing more to ask */ });
    let lastProgress = performance.now();
    const quiet = setInterval(() => {
      if (performance.now() - lastProgress < QUIET_MS) return;
      lastProgress = performance.now();
      this.askForState();
    }, 10_000);
    quiet.unref();
    const onData = (b: Buffer) => {
      log.write(b);
      this.buffered += b.toString('latin1');
      let nl: number;
      while ((nl = this.buffered.indexOf('\n')) >= 0) {
        const line = this.buffered.slice(0, nl).replace(/\r$/, '');
        this.buffered = this.buffered.slice(nl + 1);
        // vitest may end its output with a terminal escape and no newline: the phase can follow it.
        const m = /@nested (?:(fail) )?(.*)$/.exec(line);
        if (m) {
          const phase = parsePhase(m[2]!, m[1] === 'fail', performance.now() - this.startedAt);
          this.phases.push(phase);
          if (phase.name === 'l1-up' && phase.fields.heartbeat === '1') this.startHeartbeat();
        }
        // The phases and the live reporter's one line per check are the lane's progress.
        const progress = m !== null || /@l1 /.test(line);
        if (progress) lastProgress = performance.now();
        if (progress || process.env.UNHALT_NESTED_VERBOSE) process.stdout.write(`${label}| ${line}\n`);
      }
      this.poke();
    };
    this.proc.stdout!.on('data', onData);
    this.proc.stderr!.on('data', onData);
    this.proc.on('exit', (code) => { clearInterval(quiet); this.exitCode = code; log.end(); this.poke(); });
  }

  /**
   * Asks L1's kernel, over its serial console, what its tasks and CPU are doing: a serial BREAK
   * (QEMU's mux: Ctrl-A b) and then a magic SysRq key — `w` lists the blocked tasks with their
   * stacks, `l` the CPU's backtrace — into l1-console.log. For an L1 that has gone quiet
   * (bench/history.md, nested run N): nothing else can look into it from outside.
   */
  private askForState(): void {
    if (this.exitCode !== undefined) return;
    process.stdout.write(`${this.label}| (no progress for ${QUIET_MS / 60_000} min: asking L1 for its blocked tasks and backtrace, SysRq 9 w l)\n`);
    // 9 first: the dumps print at KERN_INFO, which L1's loglevel=4 keeps off the console.
    ['9', 'w', 'l'].forEach((key, i) => {
      setTimeout(() => { if (this.exitCode === undefined) this.proc!.stdin!.write(`\x01b${key}`); }, 3000 * i).unref();
    });
  }

  /** Starts the heartbeat (HEARTBEAT_MS) once L1 says its console takes it without echo. */
  private startHeartbeat(): void {
    const beat = setInterval(() => {
      if (this.exitCode !== undefined) return clearInterval(beat);
      this.proc!.stdin!.write(' ');
    }, HEARTBEAT_MS);
    beat.unref();
  }

  private poke(): void { for (const w of [...this.waiters]) w(); }

  /** Resolves with the phase's line once L1 prints it; rejects on a failure line, QEMU's exit or the deadline. */
  waitPhase(name: string, deadlineMs: number): Promise<Phase> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => done(new Error(`${this.label}: phase "${name}" did not come within ${deadlineMs / 1000} s (last: ${this.phases.at(-1)?.name ?? 'none'}; consoles in ${this.dir})`)), deadlineMs);
      const check = () => {
        const p = this.phases.find((x) => x.name === name);
        if (p) return done(undefined, p);
        const failed = this.phases.find((x) => x.name.startsWith('fail:'));
        if (failed) return done(new Error(`${this.label} failed in phase ${failed.name.slice(5)}: ${JSON.stringify(failed.fields)}`));
        if (this.exitCode !== undefined) return done(new Error(`${this.label}'s QEMU exited (status ${this.exitCode}) before its phase "${name}" (consoles in ${this.dir})`));
      };
      const done = (err?: Error, p?: Phase) => {
        clearTimeout(timer);
        this.waiters.delete(check);
        if (err) reject(err); else resolve(p!);
      };
      this.waiters.add(check);
      check();
    });
  }

  exited(deadlineMs: number): Promise<number | null> {
    return new Promise((resolve, reject) => {
      if (this.exitCode !== undefined) return resolve(this.exitCode);
      const timer = setTimeout(() => reject(new Error(`${this.label}'s QEMU did not exit within ${deadlineMs / 1000} s of its power-off`)), deadlineMs);
      this.proc!.once('exit', (code) => { clearTimeout(timer); resolve(code); });
    });
  }

  kill(): void { if (this.exitCode === undefined) this.proc?.kill('SIGKILL'); }
}

/**
 * Runs `step` for every L1 to its end, whichever fail: one L1's failure neither hides another's
 * nor stops the others' results from being read. Throws one error naming every L1 that failed.
 */
async function eachL1(l1s: L1[], step: (l1: L1, i: number) => Promise<void>): Promise<void> {
  const settled = await Promise.allSettled(l1s.map(step));
  const failed = settled.flatMap((r, i) => (r.status === 'rejected' ? [`${l1s[i]!.label}: ${(r.reason as Error).message ?? r.reason}`] : []));
  if (failed.length) throw new Error(failed.join('\n'));
}

function parsePhase(text: string, failed: boolean, atMs: number): Phase {
  const fields: Record<string, string> = {};
  for (const m of text.matchAll(/(\w+)=("([^"]*)"|\S*)/g)) fields[m[1]!] = m[3] ?? m[2]!;
  const name = fields.phase ?? 'unknown';
  return { name: failed ? `fail:${name}` : name, fields, atMs };
}

describe('nested lane: hardware-semantics KVM inside QEMU TCG (L1)', () => {
  const l1s: L1[] = [];
  let report: InnerReport | undefined;
  const t0 = performance.now();
  const elapsed = () => `${((performance.now() - t0) / 1000).toFixed(0)} s`;
  const selection = innerSelection();
  // Several L1s share the files (splitFiles: about equal time each), one per host CPU by default.
  const parts = splitFiles(selection.files, L1_COUNT).filter((p) => p.length > 0);
  const checksDeadline = minutes(checksMinutes(parts, process.env.UNHALT_NESTED_CHECKS_MINUTES));
  /** Each L1's checks' results, as they came out of it (brought out one by one: see below). */
  const reports: VitestJson[][] = [];
  let browserServer: BrowserServer | undefined;
  beforeAll(() => {
    if (parts.length === 0) throw new Error('no files selected for L1 (UNHALT_NESTED_FILES is empty)');
    rmSync(ARTIFACTS, { recursive: true, force: true }); // never read an earlier run's consoles or checks
    mkdirSync(ARTIFACTS, { recursive: true });
  });
  afterAll(async () => {
    for (const l1 of l1s) l1.kill();
    await browserServer?.close().catch(() => {});
    // The one place the summary is written: whatever did come out, also when some L1 failed.
    if (!reports.length) return;
    const r = report ?? summarizeInner(reports.flat());
    writeFileSync(join(ARTIFACTS, 'summary.md'), r.markdown);
    writeFileSync(join(ARTIFACTS, 'totals.json'), `${JSON.stringify(r.totals)}\n`);
  });

  it('resolves the QEMU that emulates L1 (bookworm-backports, unpacked privately, cached)', () => {
    const override = process.env.UNHALT_NESTED_QEMU; // a QEMU binary to try instead, e.g. /usr/bin's
    outer = override
      ? { binary: override, dataArgs: [], version: spawnSync(override, ['--version'], { encoding: 'utf8' }).stdout?.split('\n')[0] ?? '' }
      : outerQemu() as OuterQemu;
    console.log(`nested: L1 runs under ${outer.version} (${outer.binary})`);
    expect(outer.version).toMatch(/^QEMU emulator version \d+/);
  }, minutes(5));

  it('builds the Debian root a user would boot (mmdebstrap: Debian\'s kernel, its initramfs-tools initrd; cached), which L1 boots', () => {
    // Only the Linux checks in L1 boot it (linux-workloads: a distribution's own kernel and initrd
    // on our virtio-blk); it goes into L1's image with the rest of assets/guests.
    if (!selection.lanes.includes('linux')) return void console.log('nested: no Linux checks selected: the Debian root is not needed');
    const r = spawnSync(process.execPath, [join(root, 'native/guest/linux/build-debian-root.mjs')], { stdio: 'inherit', timeout: DEADLINE.build });
    expect(r.error?.message, 'the Debian root was built within its deadline').toBeUndefined();
    expect(r.status).toBe(0);
    console.log(`nested: Debian root ready after ${elapsed()}`);
  }, DEADLINE.build + 10_000);

  it('builds the cloud image a user would import (mmdebstrap: systemd, cloud-init, sshd, Debian\'s kernel; GPT, grub.cfg; cached), which L1 imports and boots', () => {
    if (!selection.lanes.includes('linux')) return void console.log('nested: no Linux checks selected: the cloud image is not needed');
    const r = spawnSync(process.execPath, [join(root, 'native/guest/linux/build-cloud-image.mjs')], { stdio: 'inherit', timeout: DEADLINE.build });
    expect(r.error?.message, 'the cloud image was built within its deadline').toBeUndefined();
    expect(r.status).toBe(0);
    console.log(`nested: cloud image ready after ${elapsed()}`);
  }, DEADLINE.build + 10_000);

  it('builds kvm-unit-tests from its source tarball (cached), whose kernels L1 boots', () => {
    if (!selection.files.some((f) => KVM_UNIT_TESTS_FILES.includes(f))) return void console.log('nested: kvm-unit-tests not selected: not built');
    console.log(`nested: kvm-unit-tests in ${buildKvmUnitTests()} after ${elapsed()}`);
  }, DEADLINE.build + 10_000);

  it('builds the L1 kernel, initramfs and root image (cached by content)', () => {
    // The e2e files' servers in L1 serve the app built here (it goes into L1's image).
    if (selection.lanes.includes('e2e')) ensureRendererBuilt();
    const r = spawnSync(process.execPath, [join(root, 'test/nested/l1/build.mjs')], { stdio: 'inherit', timeout: DEADLINE.build });
    expect(r.error?.message, 'the L1 build ran within its deadline').toBeUndefined();
    expect(r.status).toBe(0);
    console.log(`nested: L1 material ready after ${elapsed()}`);
  }, DEADLINE.build + 10_000);

  it('boots each L1 and finds AMD SVM with nested paging and a /dev/kvm', async () => {
    expect(outer, 'the outer QEMU was resolved').toBeDefined();
    console.log(`nested: ${parts.length} L1(s) of ${L1_CPUS} CPU(s):\n${parts.map((p, i) => `  L1.${i + 1}: ${p.join(' ')}`).join('\n')}`);
    const ports = new Set<number>();
    let browser: URL | undefined;
    if (selection.lanes.includes('e2e')) {
      browserServer = await chromium.launchServer({ executablePath: CHROMIUM, headless: true, args: CHROMIUM_ARGS, host: '127.0.0.1', port: await freePortRun(1, ports) });
      browser = new URL(browserServer.wsEndpoint());
      // Every e2e check in L1 fails once it is gone: say so where the lane's output is read.
      browserServer.on('close', () => console.log('nested: the e2e files\' browser server closed'));
      console.log(`nested: the e2e files' browser for L1 listens on 127.0.0.1:${browser.port}`);
    }
    for (const [i, files] of parts.entries()) {
      const net = browser && lanesOf(files).includes('e2e')
        ? e2eNetwork(browser, await freePortRun(E2E_PORTS_PER_L1, ports))
        : { args: [], append: '' };
      l1s.push(new L1(outer!, join(ARTIFACTS, `l1.${i + 1}`), `L1.${i + 1}`, `${l1Append(files, selection.tests)} ${net.append}`.trim(), net.args));
    }
    await eachL1(l1s, async (l1) => {
      const up = await l1.waitPhase('l1-up', DEADLINE.boot);
      const cpu = await l1.waitPhase('cpu', minutes(1));
      const kvm = await l1.waitPhase('kvm', minutes(1));
      console.log(`nested: ${l1.label} up ${up.fields.uptime_s} s after its kernel started (${elapsed()} into the lane); `
        + `CPU "${cpu.fields.model}" svm=${cpu.fields.svm} npt=${cpu.fields.npt}; /dev/kvm=${kvm.fields.dev}; modules ${kvm.fields.modules}`);
      expect(cpu.fields.svm, l1.label).toBe('1');
      expect(cpu.fields.npt, l1.label).toBe('1');
      expect(kvm.fields.dev, l1.label).toBe('1');
      expect(kvm.fields.modules, l1.label).toMatch(/\bkvm_amd\b/);
    });
  }, DEADLINE.boot + minutes(3));

  it('runs the hardware-semantics checks inside each L1', async () => {
    expect(l1s.length, 'the L1s were started').toBe(parts.length);
    await eachL1(l1s, async (l1) => {
      // A script run by hand (UNHALT_NESTED_L1_APPEND=unhalt.script=PATH, e.g. bench/l1-virtio.sh)
      // runs instead of the checks: it gets the checks' time, not the minute their start gets.
      if (/\bunhalt\.script=/.test(process.env.UNHALT_NESTED_L1_APPEND ?? '')) {
        const done = await l1.waitPhase('script-done', checksDeadline);
        return void console.log(`nested: ${l1.label}'s script done with status ${done.fields.status} (${elapsed()} into the lane)`);
      }
      await l1.waitPhase('checks-start', minutes(1));
      const done = await l1.waitPhase('checks-done', checksDeadline);
      console.log(`nested: ${l1.label}'s checks done with status ${done.fields.status} (${elapsed()} into the lane)`);
    });
  }, checksDeadline + minutes(2));

  it('brings the results out and powers each L1 off', async () => {
    expect(l1s.length, 'the L1s were started').toBe(parts.length);
    await eachL1(l1s, async (l1, i) => {
      await l1.waitPhase('results-written', minutes(2));
      expect(await l1.exited(DEADLINE.poweroff), `${l1.label}'s QEMU exit status`).toBe(0);
      const out = join(l1.dir, 'results');
      mkdirSync(out, { recursive: true });
      const tar = spawnSync('tar', ['xf', join(l1.dir, 'results.tar'), '-C', out], { encoding: 'utf8' });
      expect(tar.status, tar.stderr).toBe(0);
      const lanes = lanesOf(parts[i]!);
      const present = lanes.filter((l) => existsSync(join(out, `vitest-${l}.json`)));
      reports.push(present.map((l) => JSON.parse(readFileSync(join(out, `vitest-${l}.json`), 'utf8')) as VitestJson));
      expect(lanes.filter((l) => !present.includes(l)), `every lane's report came out of ${l1.label} (a missing one: its vitest died, see ${l1.dir}/l1-console.log)`).toEqual([]);
    });
    const all = reports.flat();
    expect(filesWithoutResults(selection.files, all), 'every selected file ran in an L1').toEqual([]);
    report = summarizeInner(all);
    console.log(`nested: inside L1 ${report.totals.passed} passed, ${report.totals.failed} failed, ${report.totals.skipped} skipped; lane ${elapsed()}\n${report.markdown}`);
  }, minutes(6));

  it('every check passed in L1 and none skipped', () => {
    expect(report, 'results came out of L1').toBeDefined();
    expect(report!.failures).toEqual([]);
    // A run narrowed to some checks by hand (UNHALT_NESTED_TESTS) skips the others on purpose.
    if (!selection.tests) expect(report!.skips).toEqual([]);
    expect(report!.totals.passed).toBeGreaterThan(0);
  });
});

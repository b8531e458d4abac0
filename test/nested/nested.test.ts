// The nested lane: a KVM with hardware semantics on a machine whose /dev/kvm is PVM. QEMU in pure
// software emulation (TCG, -cpu max) emulates AMD SVM with nested paging; the Linux it boots ("L1")
// loads kvm-amd and its /dev/kvm behaves like KVM on hardware. Inside L1 the project's own test
// runner runs the lanes whose outcome depends on KVM's semantics (docs/nested.md says which and
// why); their results come out as a tar archive on a raw virtio disk. The outer host's /dev/kvm
// is never used here. Every phase has its own deadline and fails the lane on its own; nothing is
// retried. The whole L1 console (with every L2 console the inner tests print) is kept in
// test/artifacts/nested/.
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { createWriteStream, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { filesWithoutResults, innerSelection, type InnerReport, summarizeInner } from './inner-report.ts';
// @ts-expect-error plain ESM build script without types
import { outerQemu } from './outer-qemu.mjs';

const root = new URL('../../', import.meta.url).pathname;
const NESTED = join(root, 'assets', 'nested');
const ARTIFACTS = join(root, 'test', 'artifacts', 'nested');
/** How L1's QEMU is run: the binary and its firmware folders (outer-qemu.mjs says why not /usr/bin's). */
interface OuterQemu { binary: string; dataArgs: string[]; version: string }
let outer: OuterQemu | undefined;
const minutes = (n: number) => n * 60_000;
/** Deadlines per phase. L1 is at its checks ~10 s after QEMU starts on an idle 2-CPU host. */
const DEADLINE = { build: minutes(10), boot: minutes(4), checks: minutes(Number(process.env.UNHALT_NESTED_CHECKS_MINUTES ?? 45)), poweroff: minutes(3) };

interface Phase { name: string; fields: Record<string, string>; atMs: number }

class L1 {
  readonly phases: Phase[] = [];
  private proc?: ChildProcess;
  private waiters = new Set<() => void>();
  private buffered = '';
  exitCode: number | null | undefined;
  readonly startedAt = performance.now();

  constructor(qemu: OuterQemu, resultsImage: string, append: string) {
    mkdirSync(ARTIFACTS, { recursive: true });
    const log = createWriteStream(join(ARTIFACTS, 'l1-console.log'));
    const args = [
      ...qemu.dataArgs,
      // UNHALT_NESTED_L1_CPUS: L1's CPU count (2; 1 takes IPIs between emulation threads away).
      '-accel', 'tcg,thread=multi,tb-size=512', '-cpu', 'max', '-smp', process.env.UNHALT_NESTED_L1_CPUS ?? '2', '-m', '4G', '-machine', 'q35',
      // ttyS0: L1's console (its init's phases, vitest's output); ttyS1: every L2 console the
      // checks read, as it comes (test/support/console-mirror.ts).
      '-display', 'none', '-serial', 'stdio', '-serial', `file:${join(ARTIFACTS, 'l2-consoles.log')}`, '-monitor', 'none', '-no-reboot', '-nodefaults',
      '-kernel', join(NESTED, 'vmlinuz'), '-initrd', join(NESTED, 'initramfs.cpio.gz'),
      // UNHALT_NESTED_L1_APPEND: extra L1 kernel words, e.g. unhalt.kvm_amd=vgif=0 (module parameters).
      '-append', `console=ttyS0 panic=-1 loglevel=4 mitigations=off ${append} ${process.env.UNHALT_NESTED_L1_APPEND ?? ''}`.trim(),
      // snapshot=on: L1 writes to its root go to a throw-away overlay, the image stays cached.
      '-drive', `file=${join(NESTED, 'root.ext4')},if=virtio,format=raw,snapshot=on`,
      '-drive', `file=${resultsImage},if=virtio,format=raw`,
    ];
    this.proc = spawn(qemu.binary, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    const onData = (b: Buffer) => {
      log.write(b);
      this.buffered += b.toString('latin1');
      let nl: number;
      while ((nl = this.buffered.indexOf('\n')) >= 0) {
        const line = this.buffered.slice(0, nl).replace(/\r$/, '');
        this.buffered = this.buffered.slice(nl + 1);
        // vitest may end its output with a terminal escape and no newline: the phase can follow it.
        const m = /@nested (?:(fail) )?(.*)$/.exec(line);
        if (m) this.phases.push(parsePhase(m[2]!, m[1] === 'fail', performance.now() - this.startedAt));
        // The phases and the live reporter's one line per check are the lane's progress.
        if (m || /@l1 /.test(line) || process.env.UNHALT_NESTED_VERBOSE) process.stdout.write(`L1| ${line}\n`);
      }
      this.poke();
    };
    this.proc.stdout!.on('data', onData);
    this.proc.stderr!.on('data', onData);
    this.proc.on('exit', (code) => { this.exitCode = code; log.end(); this.poke(); });
  }

  private poke(): void { for (const w of [...this.waiters]) w(); }

  /** Resolves with the phase's line once L1 prints it; rejects on a failure line, QEMU's exit or the deadline. */
  waitPhase(name: string, deadlineMs: number): Promise<Phase> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => done(new Error(`L1 phase "${name}" did not come within ${deadlineMs / 1000} s (last: ${this.phases.at(-1)?.name ?? 'none'}; console in ${ARTIFACTS}/l1-console.log)`)), deadlineMs);
      const check = () => {
        const p = this.phases.find((x) => x.name === name);
        if (p) return done(undefined, p);
        const failed = this.phases.find((x) => x.name.startsWith('fail:'));
        if (failed) return done(new Error(`L1 failed in phase ${failed.name.slice(5)}: ${JSON.stringify(failed.fields)}`));
        if (this.exitCode !== undefined) return done(new Error(`QEMU exited (status ${this.exitCode}) before L1 phase "${name}"`));
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
      const timer = setTimeout(() => reject(new Error(`QEMU did not exit within ${deadlineMs / 1000} s of L1's power-off`)), deadlineMs);
      this.proc!.once('exit', (code) => { clearTimeout(timer); resolve(code); });
    });
  }

  kill(): void { if (this.exitCode === undefined) this.proc?.kill('SIGKILL'); }
}

function parsePhase(text: string, failed: boolean, atMs: number): Phase {
  const fields: Record<string, string> = {};
  for (const m of text.matchAll(/(\w+)=("([^"]*)"|\S*)/g)) fields[m[1]!] = m[3] ?? m[2]!;
  const name = fields.phase ?? 'unknown';
  return { name: failed ? `fail:${name}` : name, fields, atMs };
}

describe('nested lane: hardware-semantics KVM inside QEMU TCG (L1)', () => {
  let l1: L1 | undefined;
  let report: InnerReport | undefined;
  const resultsImage = join(ARTIFACTS, 'results.tar');
  const t0 = performance.now();
  const elapsed = () => `${((performance.now() - t0) / 1000).toFixed(0)} s`;
  afterAll(() => l1?.kill());
  rmSync(join(ARTIFACTS, 'totals.json'), { force: true }); // never count an earlier run's checks

  it('resolves the QEMU that emulates L1 (bookworm-backports, unpacked privately, cached)', () => {
    const override = process.env.UNHALT_NESTED_QEMU; // a QEMU binary to try instead, e.g. /usr/bin's
    outer = override
      ? { binary: override, dataArgs: [], version: spawnSync(override, ['--version'], { encoding: 'utf8' }).stdout?.split('\n')[0] ?? '' }
      : outerQemu() as OuterQemu;
    console.log(`nested: L1 runs under ${outer.version} (${outer.binary})`);
    expect(outer.version).toMatch(/^QEMU emulator version \d+/);
  }, minutes(5));

  it('builds the L1 kernel, initramfs and root image (cached by content)', () => {
    const r = spawnSync(process.execPath, [join(root, 'test/nested/l1/build.mjs')], { stdio: 'inherit', timeout: DEADLINE.build });
    expect(r.error?.message, 'the L1 build ran within its deadline').toBeUndefined();
    expect(r.status).toBe(0);
    console.log(`nested: L1 material ready after ${elapsed()}`);
  }, DEADLINE.build + 10_000);

  it('boots L1 and finds AMD SVM with nested paging and a /dev/kvm', async () => {
    mkdirSync(ARTIFACTS, { recursive: true });
    rmSync(resultsImage, { force: true });
    writeFileSync(resultsImage, '');
    spawnSync('truncate', ['-s', '256M', resultsImage]);
    const selection = innerSelection();
    expect(outer, 'the outer QEMU was resolved').toBeDefined();
    l1 = new L1(outer!, resultsImage, selection.append);
    const up = await l1.waitPhase('l1-up', DEADLINE.boot);
    const cpu = await l1.waitPhase('cpu', minutes(1));
    const kvm = await l1.waitPhase('kvm', minutes(1));
    console.log(`nested: L1 up ${up.fields.uptime_s} s after its kernel started (${elapsed()} into the lane); `
      + `CPU "${cpu.fields.model}" svm=${cpu.fields.svm} npt=${cpu.fields.npt}; /dev/kvm=${kvm.fields.dev}; modules ${kvm.fields.modules}`);
    expect(cpu.fields.svm).toBe('1');
    expect(cpu.fields.npt).toBe('1');
    expect(kvm.fields.dev).toBe('1');
    expect(kvm.fields.modules).toMatch(/\bkvm_amd\b/);
  }, DEADLINE.boot + minutes(3));

  it('runs the hardware-semantics checks inside L1', async () => {
    expect(l1, 'L1 booted').toBeDefined();
    await l1!.waitPhase('checks-start', minutes(1));
    const done = await l1!.waitPhase('checks-done', DEADLINE.checks);
    console.log(`nested: checks done in L1 with status ${done.fields.status} (${elapsed()} into the lane)`);
  }, DEADLINE.checks + minutes(2));

  it('brings the results out and powers L1 off', async () => {
    expect(l1, 'L1 booted').toBeDefined();
    await l1!.waitPhase('results-written', minutes(2));
    expect(await l1!.exited(DEADLINE.poweroff)).toBe(0);
    const out = join(ARTIFACTS, 'results');
    rmSync(out, { recursive: true, force: true });
    mkdirSync(out, { recursive: true });
    const tar = spawnSync('tar', ['xf', resultsImage, '-C', out], { encoding: 'utf8' });
    expect(tar.status, tar.stderr).toBe(0);
    const selection = innerSelection();
    const missing = selection.lanes.filter((l) => !existsSync(join(out, `vitest-${l}.json`)));
    expect(missing, 'every lane\'s report came out of L1 (a missing one: its vitest died, see l1-console.log)').toEqual([]);
    const reports = selection.lanes.map((l) => JSON.parse(readFileSync(join(out, `vitest-${l}.json`), 'utf8')));
    expect(filesWithoutResults(selection.files, reports), 'every selected file ran in L1').toEqual([]);
    report = summarizeInner(reports);
    writeFileSync(join(ARTIFACTS, 'summary.md'), report.markdown);
    writeFileSync(join(ARTIFACTS, 'totals.json'), `${JSON.stringify(report.totals)}\n`);
    console.log(`nested: inside L1 ${report.totals.passed} passed, ${report.totals.failed} failed, ${report.totals.skipped} skipped; lane ${elapsed()}\n${report.markdown}`);
  }, minutes(6));

  it('every check passed in L1 and none skipped', () => {
    expect(report, 'results came out of L1').toBeDefined();
    expect(report!.failures).toEqual([]);
    // A run narrowed to some checks by hand (UNHALT_NESTED_TESTS) skips the others on purpose.
    if (!innerSelection().tests) expect(report!.skips).toEqual([]);
    expect(report!.totals.passed).toBeGreaterThan(0);
  });
});

// User-space CPU per exit (issue 15, target 3: at most 250 ns), by the README's recipe: the whole
// `unhalt run --cpus 1 --append 'scenario=pio count=N'` process's user time (wait4 rusage, GNU
// time's %U) minus the median user time of `count=0` runs (same boot and power-off), over N;
// beside it the same for the C VMM (bench/c/kvm-pio-ref.c) on the same guest, and with
// `--base DIR` for another checkout of Unhalt (say, main's), so a change is measured against
// what it changes, in one run. Everyone alternates (the order rotates each round), so host
// load drifts into every column alike; medians. User time, not wall time: on a shared host a
// run's wall time is mostly time spent preempted, and on PVM most of an exit's time is the
// kernel's (sys), which this target does not cover.
//
// --scenario mmio does the same with the probe's `mmio` scenario: N 4-byte reads of unmapped
// MMIO (0xD0000000), each a KVM_EXIT_MMIO answered by the VMM's empty bus.
//
//   node bench/exit-cpu.ts [--runs 7] [--count 200000] [--scenario pio|mmio] [--base DIR] [--json FILE]
//
// A checkout of main for --base:
//   git worktree add /work/wt/base main && cd /work/wt/base && ln -s "$OLDPWD/node_modules" .
//   (plus its guest: `node native/guest/build.mjs --quiet`, or a symlink to this tree's assets/guests)
import { join } from 'node:path';
import { baseUnhaltBin,
  ROOT, UNHALT_BIN, PROBE_ELF, buildC, checkPrerequisites, describeHost, fail, finishReport, fmt, haveGnuTime,
  hostInfo, markdownTable, parseBenchArgs, runTimed, summarize, type Summary,
} from './lib.ts';

const USAGE = `usage: node bench/exit-cpu.ts [--runs 7] [--count 200000] [--scenario pio|mmio] [--base DIR] [--json FILE]
User-space CPU per PIO (or MMIO) exit: Unhalt vs the C VMM (vs another checkout of Unhalt with --base),
whole-process user time of COUNT exits minus that of 0, alternating, medians.
`;
const opts = parseBenchArgs(USAGE, 7, { count: '200000', scenario: 'pio', base: '' });
const count = Number(opts.count);
if (!Number.isInteger(count) || count < 1) fail(`--count must be a positive integer, got "${opts.count}"`);
const scenario = opts.scenario;
if (scenario !== 'pio' && scenario !== 'mmio') fail(`--scenario must be pio or mmio, got "${scenario}"`);
const baseBin = baseUnhaltBin(opts.base);
if (!haveGnuTime()) fail('GNU time (/usr/bin/time) is needed for whole-process user time (apt-get install time)');
checkPrerequisites({ gcc: true });

const host = hostInfo();
process.stdout.write(describeHost(host));
const ref = buildC(join(ROOT, 'bench/c/kvm-pio-ref.c'), 'kvm-pio-ref');

type Who = 'ours' | 'base' | 'c';
const who: Who[] = baseBin ? ['ours', 'base', 'c'] : ['ours', 'c'];
const label: Record<Who, string> = {
  ours: `Unhalt (${ROOT})`,
  base: `Unhalt --base (${opts.base})`,
  c: 'C, KVM directly (kvm-pio-ref)',
};

interface Sample { userMs: number; sysMs: number }

/**
 * vCPU 0 on its worker from the start, for count=0 and count=N alike. Otherwise `unhalt run`
 * begins it on the main thread and starts the worker only if the guest outlives the hand-over
 * delay: a count=0 guest ends before any worker exists, a 200k one does not, and the worker's
 * own start-up CPU (100+ ms) would be counted as the exits' cost.
 */
const ONE_VCPU_THREAD = { ...process.env, UNHALT_HANDOVER_AFTER_MS: '0' };

async function run(w: Who, n: number): Promise<Sample> {
  const r = w === 'c'
    ? await runTimed(ref, ['-s', scenario, PROBE_ELF, String(n)], { timeoutMs: 300_000, rusage: true })
    : await runTimed(process.execPath, [w === 'ours' ? UNHALT_BIN : baseBin!, 'run', '--cpus', '1', '--append', `scenario=${scenario} count=${n}`],
      { timeoutMs: 300_000, rusage: true, env: ONE_VCPU_THREAD });
  if (r.code !== 0) fail(`${label[w]} exited with ${r.code ?? r.signal}: ${r.stderr.trim()}`);
  // The guest prints its own count on ttyS0 ("pio: N writes ..." / "mmio: N reads ..."): it ran them all.
  if (w !== 'c' && !r.stdout.includes(`${scenario}: ${n} `)) fail(`${label[w]}: no "${scenario}: ${n}" line from the guest:\n${r.stdout}`);
  if (w === 'c' && Number(r.stdout.trim().split(/\s+/)[1]) !== n) fail(`kvm-pio-ref: the guest did not report count=${n}: ${r.stdout}`);
  if (!r.rusage) fail(`no rusage for ${label[w]}`);
  return { userMs: r.rusage.userMs, sysMs: r.rusage.sysMs };
}

const full: Record<Who, Sample[]> = { ours: [], base: [], c: [] };
const zero: Record<Who, Sample[]> = { ours: [], base: [], c: [] };
const loads: number[] = [];
for (let i = 0; i < opts.runs; i++) {
  // Rotate the order every round: no VMM always goes first (or right after another's start-up).
  const order = who.map((_, k) => who[(k + i) % who.length]!);
  for (const w of order) {
    full[w].push(await run(w, count));
    zero[w].push(await run(w, 0));
  }
  loads.push(Number((await import('node:os')).loadavg()[0]!.toFixed(2)));
  process.stderr.write(`round ${i + 1}/${opts.runs}: ${order.map((w) => `${w} ${fmt((full[w].at(-1)!.userMs - zero[w].at(-1)!.userMs) * 1e6 / count, 0)}`).join(', ')} ns user/exit (load ${loads.at(-1)})\n`);
}

/** User (or sys) ns per exit of each COUNT run, against the median of the count=0 runs. */
const perExit = (w: Who, part: keyof Sample): Summary => {
  const base = summarize(zero[w].map((s) => s[part])).median;
  return summarize(full[w].map((s) => (s[part] - base) * 1e6 / count));
};
const user = Object.fromEntries(who.map((w) => [w, perExit(w, 'userMs')])) as Record<Who, Summary>;
const sys = Object.fromEntries(who.map((w) => [w, perExit(w, 'sysMs')])) as Record<Who, Summary>;
const zeroUser = Object.fromEntries(who.map((w) => [w, summarize(zero[w].map((s) => s.userMs))])) as Record<Who, Summary>;

process.stdout.write(`\nUser-space CPU per ${scenario.toUpperCase()} exit: whole-process user time of ${count} exits minus the median of count=0 runs, ` +
  `over ${count}; ${opts.runs} rounds, order rotating; GNU time resolution 10 ms = ${fmt(1e7 / count, 0)} ns/exit\n\n`);
process.stdout.write(markdownTable(
  ['VMM', 'runs', 'user ns/exit median', 'min', 'max', 'sys ns/exit median', 'user at count=0 (ms, median)'],
  who.map((w) => [label[w], user[w].n, fmt(user[w].median, 0), fmt(user[w].min, 0), fmt(user[w].max, 0), fmt(sys[w].median, 0), fmt(zeroUser[w].median, 0)]),
));
process.stdout.write(`\nUnhalt / C, user per exit: ${fmt(user.ours.median / user.c.median, 2)}x of medians (target: at most 250 ns: ${user.ours.median <= 250 ? 'met' : 'not met'})\n`);
if (baseBin) process.stdout.write(`Unhalt / --base: ${fmt(user.ours.median / user.base.median, 2)}x of medians (${fmt(user.ours.median, 0)} vs ${fmt(user.base.median, 0)} ns)\n`);
process.stdout.write(`load average after each round: ${loads.join(' ')}\n`);

finishReport(opts.json, {
  bench: 'exit-cpu', host, scenario, count, runs: opts.runs, base: opts.base || undefined,
  userNsPerExit: user, sysNsPerExit: sys, zeroCountUserMs: zeroUser, samples: full, zeroCountSamples: zero, loadAfterRound: loads,
});

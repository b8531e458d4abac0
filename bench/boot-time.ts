// Boot of the probe guest (`scenario=hello`, 1 vCPU, 128 MiB) to its first ttyS0 line, measured
// from process start (just before spawn) to the first '\n' on the child's stdout, and to the
// process's exit: `unhalt run` vs QEMU microvm with the command line of bench/lib.ts qemuArgs, alternating in
// one run. Unhalt runs twice per round: from its bundle (dist-node/, `npm run build:node`; what
// bin/unhalt.mjs runs while the bundle is current) and from its TypeScript sources
// (UNHALT_SOURCES=1), so one run shows both; without a current bundle both rows are the sources. Unhalt's module compile cache (NODE_COMPILE_CACHE, which bin/unhalt.mjs sets) lives in
// a fresh directory of this run: the first Unhalt run starts with it empty (cold), the others
// reuse it (warm). QEMU's first run is reported apart too. Then a breakdown of Unhalt's warm
// start (bench/boot-breakdown.ts) and two floors: bare Node start-up, and `unhalt run --dry-run`.
// Target (issue 2): ours faster than QEMU. Measured, not asserted.
//
//   node bench/boot-time.ts [--runs 10] [--breakdown-runs 5] [--json FILE]
import { readFileSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
import { currentBundle } from '../bin/bundle.mjs';
import { join } from 'node:path';
import {
  QEMU, QEMU_CLEAN_EXIT, ROOT, UNHALT_BIN, agentEvents, checkPrerequisites, describeHost, fmt, haveGnuTime, hostInfo,
  markdownTable, pairedRatio, parseBenchArgs, qemuArgs, removeDir, runTimed, summarize, tempDir, type TimedRun, finishReport,
} from './lib.ts';

const USAGE = `usage: node bench/boot-time.ts [--runs 10] [--breakdown-runs 5] [--json FILE]
Process start to the probe guest's first ttyS0 line and to exit: Unhalt vs QEMU microvm.
`;
const opts = parseBenchArgs(USAGE, 10, { 'breakdown-runs': '5' });
const breakdownRuns = Number(opts['breakdown-runs']);
checkPrerequisites({ qemu: true });
const host = hostInfo();
process.stdout.write(describeHost(host));

const dir = tempDir('boot');
const cacheDir = join(dir, 'compile-cache');
const env = { ...process.env, NODE_COMPILE_CACHE: cacheDir };
const srcEnv = { ...env, UNHALT_SOURCES: '1' };
const haveBundle = currentBundle(pathToFileURL(ROOT)) !== null;
if (!haveBundle) process.stderr.write('note: no current bundle (npm run build:node): the "bundle" rows run the sources too\n');
const OURS = [UNHALT_BIN, 'run', '--cpus', '1', '--memory', '128', '--append', 'scenario=hello'];
const QEMU_ARGS = qemuArgs({ smp: 1, memoryMiB: 128, append: 'scenario=hello' });
const TIMEOUT_MS = 60_000;

interface Sample {
  firstLineMs: number;
  exitMs: number;
  cpuMs?: number;
  maxRssMiB?: number;
}

function sample(who: string, r: TimedRun, okCode: number): Sample {
  if (r.code !== okCode) throw new Error(`${who} exited with ${r.code ?? r.signal} (expected ${okCode}): ${r.stderr.trim().slice(-400)}`);
  if (r.firstLineMs === undefined) throw new Error(`${who} printed no line on stdout`);
  if (!r.stdout.includes('Unhalt probe guest:')) throw new Error(`${who}: no probe banner on ttyS0: ${JSON.stringify(r.stdout.slice(0, 200))}`);
  return {
    firstLineMs: r.firstLineMs, exitMs: r.totalMs,
    cpuMs: r.rusage ? r.rusage.userMs + r.rusage.sysMs : undefined,
    maxRssMiB: r.rusage ? r.rusage.maxRssKiB / 1024 : undefined,
  };
}

const ours = async () => sample('unhalt', await runTimed(process.execPath, OURS, { env, rusage: true, timeoutMs: TIMEOUT_MS }), 0);
const oursSrc = async () => sample('unhalt (sources)', await runTimed(process.execPath, OURS, { env: srcEnv, rusage: true, timeoutMs: TIMEOUT_MS }), 0);
const qemu = async () => sample('qemu', await runTimed(QEMU, QEMU_ARGS, { rusage: true, timeoutMs: TIMEOUT_MS }), QEMU_CLEAN_EXIT);

const res = { oursCold: [] as Sample[], oursSrcCold: [] as Sample[], qemuFirst: [] as Sample[], ours: [] as Sample[], oursSrc: [] as Sample[], qemu: [] as Sample[] };
interface Marks { [k: string]: number }
interface Breakdown { marks: Marks; parentFirstLineMs: number; parentExitMs: number; guestBootUs?: number }
const breakdown: Breakdown[] = [];
const breakdownSrc: Breakdown[] = [];
const floors = { nodeBare: [] as number[], nodeTs: [] as number[], dryRun: [] as number[] };

try {
  // Cold: the compile cache directory is empty.
  res.oursCold.push(await ours());
  res.oursSrcCold.push(await oursSrc());
  res.qemuFirst.push(await qemu());
  process.stderr.write(`cold unhalt ${fmt(res.oursCold[0]!.firstLineMs, 0)} ms (sources ${fmt(res.oursSrcCold[0]!.firstLineMs, 0)} ms), first qemu ${fmt(res.qemuFirst[0]!.firstLineMs, 0)} ms\n`);
  const contenders = [ours, oursSrc, qemu];
  const into = new Map([[ours, res.ours], [oursSrc, res.oursSrc], [qemu, res.qemu]]);
  for (let i = 0; i < opts.runs; i++) {
    // Each contender takes each place in the order in turn (the host's noise drifts).
    const order = contenders.map((_, k) => contenders[(k + i) % contenders.length]!);
    if (i % 2) order.reverse();
    for (const f of order) into.get(f)!.push(await f());
    process.stderr.write(`run ${i + 1}/${opts.runs}: unhalt ${fmt(res.ours.at(-1)!.firstLineMs, 0)} ms (sources ${fmt(res.oursSrc.at(-1)!.firstLineMs, 0)} ms), qemu ${fmt(res.qemu.at(-1)!.firstLineMs, 0)} ms to the first line\n`);
  }

  // Breakdown of a warm Unhalt start, and the floors under it.
  // (i = -1 warms the compile cache for bench/boot-breakdown.ts itself and is not reported.)
  for (let i = -1; i < breakdownRuns; i++) {
    for (const [into, runEnv] of [[breakdown, env], [breakdownSrc, srcEnv]] as const) {
      const marksFile = join(dir, `marks-${i}.json`);
      const agentLog = join(dir, `ttyS1-${i}.txt`);
      const r = await runTimed(process.execPath, [join(ROOT, 'bench/boot-breakdown.ts'), marksFile, '--', ...OURS.slice(1), '--agent-log', agentLog],
        { env: runEnv, timeoutMs: TIMEOUT_MS });
      if (r.code !== 0 || r.firstLineMs === undefined) throw new Error(`boot-breakdown exited with ${r.code ?? r.signal}: ${r.stderr.trim()}`);
      if (i < 0) continue;
      const boot = agentEvents(readFileSync(agentLog, 'utf8')).find((e) => e.event === 'boot');
      into.push({ marks: JSON.parse(readFileSync(marksFile, 'utf8')) as Marks, parentFirstLineMs: r.firstLineMs, parentExitMs: r.totalMs, guestBootUs: boot?.fields.boot_us });
    }
    if (i < 0) continue;

    const bare = await runTimed(process.execPath, ['-e', '0'], { env });
    floors.nodeBare.push(bare.totalMs);
    const dry = await runTimed(process.execPath, [...OURS, '--dry-run'], { env });
    if (dry.code !== 0) throw new Error(`unhalt run --dry-run exited with ${dry.code}: ${dry.stderr}`);
    floors.dryRun.push(dry.totalMs);
  }
} finally {
  removeDir(dir);
}

// ---- report ----
const row = (name: string, xs: Sample[]) => {
  const f = summarize(xs.map((s) => s.firstLineMs));
  const e = summarize(xs.map((s) => s.exitMs));
  const cpu = summarize(xs.flatMap((s) => (s.cpuMs === undefined ? [] : [s.cpuMs])));
  const rss = summarize(xs.flatMap((s) => (s.maxRssMiB === undefined ? [] : [s.maxRssMiB])));
  return [name, f.n, fmt(f.median, 0), fmt(f.min, 0), fmt(f.max, 0), fmt(e.median, 0), fmt(e.min, 0), fmt(cpu.median, 0), fmt(rss.median, 1)];
};
const first = (xs: Sample[]) => xs.map((s) => s.firstLineMs);
const exit = (xs: Sample[]) => xs.map((s) => s.exitMs);
const oF = summarize(first(res.ours));
const qF = summarize(first(res.qemu));
const oE = summarize(exit(res.ours));
const qE = summarize(exit(res.qemu));
const ratios = {
  firstLine: { ofMedians: oF.median / qF.median, ofMins: oF.min / qF.min, pairedMedian: pairedRatio(first(res.ours), first(res.qemu)) },
  exit: { ofMedians: oE.median / qE.median, ofMins: oE.min / qE.min, pairedMedian: pairedRatio(exit(res.ours), exit(res.qemu)) },
  cpu: medianRatio(res.ours, res.qemu, (x) => x.cpuMs),
  maxRss: medianRatio(res.ours, res.qemu, (x) => x.maxRssMiB),
  sources: {
    firstLine: pairedRatio(first(res.oursSrc), first(res.qemu)), exit: pairedRatio(exit(res.oursSrc), exit(res.qemu)),
    cpu: medianRatio(res.oursSrc, res.qemu, (x) => x.cpuMs), maxRss: medianRatio(res.oursSrc, res.qemu, (x) => x.maxRssMiB),
  },
};
function medianRatio(a: Sample[], b: Sample[], f: (s: Sample) => number | undefined): number {
  const of = (xs: Sample[]) => summarize(xs.flatMap((x) => { const v = f(x); return v === undefined ? [] : [v]; })).median;
  return of(a) / of(b);
}

process.stdout.write(`\nProbe guest \`scenario=hello\`, 1 vCPU, 128 MiB: process start -> first ttyS0 line, and -> process exit (ms); ` +
  `${opts.runs} warm runs each, alternating${haveGnuTime() ? '; CPU = user+sys of the whole process (wait4 rusage via GNU time, 10 ms resolution), RSS = max resident' : ''}\n\n`);
process.stdout.write(markdownTable(
  ['VMM', 'runs', 'first line median', 'min', 'max', 'exit median', 'exit min', 'CPU ms', 'max RSS MiB'],
  [
    row(`Unhalt${haveBundle ? ' (bundle)' : ''}, cold compile cache (first run)`, res.oursCold),
    row('Unhalt from sources, cold compile cache', res.oursSrcCold),
    row(`Unhalt${haveBundle ? ' (bundle)' : ''}, warm`, res.ours),
    row('Unhalt from sources (UNHALT_SOURCES=1), warm', res.oursSrc),
    row('QEMU microvm, first run', res.qemuFirst),
    row('QEMU microvm', res.qemu),
  ],
));
process.stdout.write(`\nratio Unhalt / QEMU, first line: ${fmt(ratios.firstLine.ofMedians, 2)}x of medians, ${fmt(ratios.firstLine.ofMins, 2)}x of minimums, ` +
  `${fmt(ratios.firstLine.pairedMedian, 2)}x median of pairs; to exit: ${fmt(ratios.exit.ofMedians, 2)}x, ${fmt(ratios.exit.ofMins, 2)}x, ${fmt(ratios.exit.pairedMedian, 2)}x ` +
  `(target: below 1)\n`);
process.stdout.write(`ratio Unhalt / QEMU, CPU ${fmt(ratios.cpu, 2)}x (target <= 1.5), max RSS ${fmt(ratios.maxRss, 2)}x (target <= 1.3), of medians; ` +
  `from the sources: first line ${fmt(ratios.sources.firstLine, 2)}x, exit ${fmt(ratios.sources.exit, 2)}x (medians of pairs), CPU ${fmt(ratios.sources.cpu, 2)}x, max RSS ${fmt(ratios.sources.maxRss, 2)}x\n`);

// Phases on the child's clock (ms since its time origin), aligned with the parent's by the first line.
interface Phase { name: string; values: number[]; sourceValues: number[] }
const phases: Phase[] = [];
const add = (name: string, f: (m: Marks, b: Breakdown) => number | undefined) => {
  const of = (runs: Breakdown[]) => runs.map((b) => f(b.marks, b)).filter((v): v is number => v !== undefined && Number.isFinite(v));
  const values = of(breakdown);
  const sourceValues = of(breakdownSrc);
  if (values.length || sourceValues.length) phases.push({ name, values, sourceValues });
};
const d = (a: string, b: string) => (m: Marks) => (m[a] !== undefined && m[b] !== undefined ? m[b]! - m[a]! : undefined);
if (breakdown.length) {
  add('exec + Node runtime start-up, until the entry script runs', (m, b) => m.script! + (b.parentFirstLineMs - m.firstLine!));
  add('load koffi and start vCPU 0\'s worker early (older trees\' bin/unhalt.mjs)', d('script', 'prewarmed'));
  add('import the CLI and VMM modules, koffi included (compile cache warm)', (m) => (m.imported === undefined ? undefined : m.imported - (m.prewarmed ?? m.script!)));
  add('parse options, probe the host (KVM caps, CPUID), resolve the machine', d('imported', 'startEnter'));
  add('VM build (builder: boot files, memory, ACPI, ELF load, KVM VM, vCPU set-up)', d('buildEnter', 'buildDone'));
  add('  meanwhile: vCPU worker spawn -> worker online (isolate + Node bootstrap)', d('spawnEnter', 'worker0Online'));
  add('  meanwhile: worker online -> ready (its modules load, vCPU handed over)', d('worker0Online', 'workersReady'));
  add('wait for the vCPU worker after the build (critical path)', d('buildDone', 'workersReady'));
  add('build done -> vCPU 0 runs on the main thread (no worker waited for)', d('buildDone', 'vcpu0OnMain'));
  add('  vCPU 0\'s worker started (guest still running after the hand-over delay), ms after KVM_RUN', d('startDone', 'handoverWorkerSpawn'));
  add('KVM_RUN entered -> first ttyS0 line on stdout (guest boot + console drain)', d('startDone', 'firstLine'));
  add('  KVM_RUN entered -> first ttyS1 bytes (`@u1 boot`) on the main thread', d('startDone', 'firstAgentBytes'));
  add('  the guest\'s own boot_us (its main() -> `@u1 boot`, guest TSC)', (_m, b) => (b.guestBootUs === undefined ? undefined : b.guestBootUs / 1000));
  add('first line -> guest powers off (rest of the hello scenario)', d('firstLine', 'teardownEnter'));
  add('teardown (kick, join workers, release)', d('teardownEnter', 'teardownDone'));
  add('teardown done -> process gone (exit, as the parent sees it)', (m, b) => b.parentExitMs - (b.parentFirstLineMs - m.firstLine!) - m.teardownDone!);
  add('total to the first line (parent clock)', (_m, b) => b.parentFirstLineMs);
  add('total to exit (parent clock)', (_m, b) => b.parentExitMs);
  process.stdout.write(`\nWhere a warm Unhalt start goes (bench/boot-breakdown.ts: the same CLI path with timestamps; ${breakdown.length} runs each, ` +
    'alternating; its own entry is a .ts file, served from the warm compile cache)\n\n');
  const cell = (xs: number[]) => {
    if (!xs.length) return ['—', '—'];
    const s = summarize(xs);
    return [fmt(s.median, 1), fmt(s.min, 1)];
  };
  process.stdout.write(markdownTable(['phase', `${haveBundle ? 'bundle' : 'sources'}: median ms`, 'min ms', 'sources: median ms', 'min ms'],
    phases.map((p) => [p.name, ...cell(p.values), ...cell(p.sourceValues)])));
  const bare = summarize(floors.nodeBare);
  const dry = summarize(floors.dryRun);
  process.stdout.write(`\nfloors (process exit, ms, median / min): \`node -e 0\` ${fmt(bare.median, 0)} / ${fmt(bare.min, 0)}; ` +
    `\`unhalt run --dry-run\` (Node + all modules + host probe, no VM) ${fmt(dry.median, 0)} / ${fmt(dry.min, 0)}\n`);
}

finishReport(opts.json, {
  bench: 'boot-time', host, runs: opts.runs,
  commands: { unhalt: [process.execPath, ...OURS].join(' '), qemu: [QEMU, ...QEMU_ARGS].join(' ') },
  unhaltCold: res.oursCold, qemuFirst: res.qemuFirst,
  unhalt: { firstLine: oF, exit: oE, samples: res.ours },
  qemu: { firstLine: qF, exit: qE, samples: res.qemu },
  ratios,
  unhaltSourcesCold: res.oursSrcCold,
  unhaltSources: { firstLine: summarize(first(res.oursSrc)), exit: summarize(exit(res.oursSrc)), samples: res.oursSrc },
  haveBundle,
  breakdown: {
    phases: phases.map((p) => ({ name: p.name, bundle: p.values.length ? summarize(p.values) : null, sources: p.sourceValues.length ? summarize(p.sourceValues) : null })),
    runs: breakdown, sourceRuns: breakdownSrc,
  },
  floors: { nodeBare: summarize(floors.nodeBare), dryRun: summarize(floors.dryRun) },
});

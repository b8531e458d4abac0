// Host CPU of an idle 2-vCPU probe guest: `scenario=idle ms=10000` (the BSP halts between 1 ms
// LAPIC timer ticks; the AP just halts) under `unhalt run --cpus 2` vs QEMU microvm `-smp 2`,
// neither sampling any telemetry, alternating in one run.
// - whole run: user+sys CPU time of the whole process (every thread, live or exited) from wait4
//   rusage, as GNU time reports it (10 ms resolution); it includes start-up and teardown;
// - steady idle: per-thread CPU (/proc/PID/task/*/stat) over a window from 1 s after the first
//   ttyS0 line to 1 s before the idle period ends, as a share of one host CPU, per thread role:
//   what dominates while the guest idles.
// Target (issue 2): ours no more than QEMU. Measured, not asserted.
//
//   node bench/idle-cpu.ts [--runs 3] [--seconds 10] [--json FILE]
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  QEMU, QEMU_CLEAN_EXIT, UNHALT_BIN, agentEvents, checkPrerequisites, describeHost, findEvent, fmt, haveGnuTime, hostInfo,
  markdownTable, pairedRatio, parseBenchArgs, qemuArgs, removeDir, runTimed, summarize, tempDir, threadCpu, type ThreadCpu, finishReport,
} from './lib.ts';

const USAGE = `usage: node bench/idle-cpu.ts [--runs 3] [--seconds 10] [--json FILE]
Host CPU of an idle 2-vCPU probe guest (scenario=idle): Unhalt vs QEMU microvm.
`;
const opts = parseBenchArgs(USAGE, 3, { seconds: '10' });
const seconds = Number(opts.seconds);
if (!(seconds >= 3)) throw new Error(`--seconds must be at least 3, got "${opts.seconds}"`);
checkPrerequisites({ qemu: true });
if (!haveGnuTime()) throw new Error('/usr/bin/time (GNU time) is needed for the whole-process CPU time: apt-get install time');
const host = hostInfo();
process.stdout.write(describeHost(host));

const CPUS = 2;
const MEMORY_MIB = 128;
const append = `scenario=idle ms=${seconds * 1000}`;
const dir = tempDir('idle');
const WINDOW_MS = (seconds - 2) * 1000;

/** Thread roles, so runs and VMMs compare: vCPU threads, the main thread, everything else. */
function role(who: 'unhalt' | 'qemu', t: ThreadCpu, pid: number): string {
  if (who === 'unhalt') {
    if (/^vcpu-\d+$/.test(t.name)) return t.name.replace('vcpu-', 'vCPU ');
    if (t.tid === pid) return 'main thread';
    return 'other threads (V8 workers/GC, libuv, ...)';
  }
  const m = /^CPU (\d+)\/KVM$/.exec(t.name);
  if (m) return `vCPU ${m[1]}`;
  if (t.tid === pid) return 'main thread';
  return 'other threads (RCU, I/O, ...)';
}

interface Sample {
  totalCpuMs: number;
  wallMs: number;
  maxRssMiB: number;
  /** CPU per thread role over the steady window, ms (user + sys, and the user part) */
  window: Record<string, number>;
  windowUser: Record<string, number>;
  windowMs: number;
  ticks: number;
}

async function run(who: 'unhalt' | 'qemu', i: number): Promise<Sample> {
  const ttyS1 = join(dir, `${who}-${i}.ttyS1`);
  const [cmd, args, ok] = who === 'unhalt'
    ? [process.execPath, [UNHALT_BIN, 'run', '--cpus', String(CPUS), '--memory', String(MEMORY_MIB), '--append', append, '--agent-log', ttyS1], 0]
    : [QEMU, qemuArgs({ smp: CPUS, memoryMiB: MEMORY_MIB, append, ttyS1File: ttyS1, threadNames: true }), QEMU_CLEAN_EXIT];
  let pid = 0;
  let start: ThreadCpu[] = [];
  let end: ThreadCpu[] = [];
  let windowStart = 0;
  let windowEnd = 0;
  const timers: NodeJS.Timeout[] = [];
  const r = await runTimed(cmd, args, {
    rusage: true,
    timeoutMs: (seconds + 60) * 1000,
    onPid: (p) => { pid = p; },
    onFirstLine: () => {
      timers.push(setTimeout(() => { start = threadCpu(pid); windowStart = performance.now(); }, 1000));
      timers.push(setTimeout(() => { end = threadCpu(pid); windowEnd = performance.now(); }, 1000 + WINDOW_MS));
    },
  });
  timers.forEach(clearTimeout);
  if (r.code !== ok) throw new Error(`${who} exited with ${r.code ?? r.signal} (expected ${ok}): ${r.stderr.trim().slice(-400)}`);
  if (!r.rusage) throw new Error(`${who}: no rusage from GNU time`);
  if (!end.length) throw new Error(`${who}: the process ended before the end of the sampling window`);
  const window: Record<string, number> = {};
  const windowUser: Record<string, number> = {};
  for (const t of end) {
    const before = start.find((s) => s.tid === t.tid);
    const k = role(who, t, pid);
    window[k] = (window[k] ?? 0) + t.cpuMs - (before?.cpuMs ?? 0);
    windowUser[k] = (windowUser[k] ?? 0) + t.userMs - (before?.userMs ?? 0);
  }
  const idle = findEvent(agentEvents(readFileSync(ttyS1, 'utf8')), 'idle', who);
  return {
    totalCpuMs: r.rusage.userMs + r.rusage.sysMs, wallMs: r.totalMs, maxRssMiB: r.rusage.maxRssKiB / 1024,
    window, windowUser, windowMs: windowEnd - windowStart, ticks: idle.fields.ticks!,
  };
}

const res = { unhalt: [] as Sample[], qemu: [] as Sample[] };
try {
  for (let i = 0; i < opts.runs; i++) {
    const order = i % 2 === 0 ? ['unhalt', 'qemu'] as const : ['qemu', 'unhalt'] as const;
    for (const who of order) {
      const s = await run(who, i);
      res[who].push(s);
      process.stderr.write(`run ${i + 1}/${opts.runs} ${who}: ${fmt(s.totalCpuMs, 0)} ms CPU in ${fmt(s.wallMs / 1000, 2)} s, ${s.ticks} guest ticks\n`);
    }
  }
} finally {
  removeDir(dir);
}

const pct = (s: Sample, keys?: string[]) => 100 * Object.entries(s.window).filter(([k]) => !keys || keys.includes(k)).reduce((a, [, v]) => a + v, 0) / s.windowMs;
const line = (name: string, xs: Sample[]) => {
  const cpu = summarize(xs.map((s) => s.totalCpuMs));
  const steady = summarize(xs.map((s) => pct(s)));
  return [name, cpu.n, fmt(cpu.median, 0), fmt(cpu.min, 0), fmt(cpu.max, 0), fmt(steady.median, 2), fmt(steady.min, 2),
    fmt(summarize(xs.map((s) => s.wallMs)).median / 1000, 2), fmt(summarize(xs.map((s) => s.ticks)).median, 0), fmt(summarize(xs.map((s) => s.maxRssMiB)).median, 1)];
};
const uCpu = res.unhalt.map((s) => s.totalCpuMs);
const qCpu = res.qemu.map((s) => s.totalCpuMs);
const uS = summarize(uCpu);
const qS = summarize(qCpu);
const uSteady = summarize(res.unhalt.map((s) => pct(s)));
const qSteady = summarize(res.qemu.map((s) => pct(s)));
const ratios = {
  wholeRun: { ofMedians: uS.median / qS.median, ofMins: uS.min / qS.min, pairedMedian: pairedRatio(uCpu, qCpu) },
  steady: { ofMedians: uSteady.median / qSteady.median, ofMins: uSteady.min / qSteady.min },
};

process.stdout.write(`\nIdle probe guest (\`${append}\`: 1 ms LAPIC timer + HLT on the BSP, the AP halted), ${CPUS} vCPUs, ${MEMORY_MIB} MiB, ` +
  `no telemetry sampling; ${opts.runs} runs each, alternating. Whole run = user+sys of the process (wait4 rusage, incl. start-up and exit); ` +
  `steady = all threads over ${WINDOW_MS / 1000} s of idle, % of one host CPU\n\n`);
process.stdout.write(markdownTable(
  ['VMM', 'runs', 'whole-run CPU ms median', 'min', 'max', 'steady % median', 'steady % min', 'wall s', 'guest ticks', 'max RSS MiB'],
  [line('Unhalt', res.unhalt), line('QEMU microvm', res.qemu)],
));
process.stdout.write(`\nratio Unhalt / QEMU: whole run ${fmt(ratios.wholeRun.ofMedians, 2)}x of medians, ${fmt(ratios.wholeRun.ofMins, 2)}x of minimums, ` +
  `${fmt(ratios.wholeRun.pairedMedian, 2)}x median of pairs; steady idle ${fmt(ratios.steady.ofMedians, 2)}x of medians (target: at most 1)\n`);

const roles = (xs: Sample[]) => [...new Set(xs.flatMap((s) => Object.keys(s.window)))].sort();
const rows: (string | number)[][] = [];
for (const [name, xs] of [['Unhalt', res.unhalt], ['QEMU microvm', res.qemu]] as const) {
  for (const k of roles(xs)) {
    const v = summarize(xs.map((s) => 100 * (s.window[k] ?? 0) / s.windowMs));
    const u = summarize(xs.map((s) => 100 * (s.windowUser[k] ?? 0) / s.windowMs));
    const sys = summarize(xs.map((s) => 100 * ((s.window[k] ?? 0) - (s.windowUser[k] ?? 0)) / s.windowMs));
    rows.push([name, k, fmt(v.median, 2), fmt(v.min, 2), fmt(v.max, 2), fmt(u.median, 2), fmt(sys.median, 2)]);
  }
}
process.stdout.write(`\nSteady idle by thread (% of one host CPU over the window; /proc ticks, 10 ms resolution)\n\n`);
process.stdout.write(markdownTable(['VMM', 'thread', 'median %', 'min %', 'max %', 'of which user % (median)', 'system % (median)'], rows));

finishReport(opts.json, {
  bench: 'idle-cpu', host, runs: opts.runs, seconds, cpus: CPUS, memoryMiB: MEMORY_MIB,
  unhalt: { wholeRunCpuMs: uS, steadyPercent: uSteady, samples: res.unhalt },
  qemu: { wholeRunCpuMs: qS, steadyPercent: qSteady, samples: res.qemu },
  ratios,
});

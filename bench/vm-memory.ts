// Memory of a running VM beyond the guest's own RAM, in the app vs under QEMU (issue 15, target
// 5). Ours: what a running 2-vCPU probe VM adds to host mode's service (`unhalt serve`, already
// running, its spares made): the service's RSS with the VM running minus without it, less the
// guest RAM pages the guest touched. QEMU: microvm's whole process RSS, less its touched guest
// RAM. Guest RAM is told apart in /proc/PID/smaps as the mappings of the guest's size (64 MiB,
// up to 4 MiB more for alignment); their Rss is what the guest touched. Runs alternate; each
// measures after the guest's first output and a settling time. Target: ours <= 2x QEMU's.
// Measured, not asserted.
//
//   node bench/vm-memory.ts [--runs 7] [--cpus 2] [--settle 1000] [--base DIR] [--json FILE]
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { baseUnhaltBin,
  QEMU, UNHALT_BIN, checkPrerequisites, describeHost, fail, finishReport, fmt, hostInfo, markdownTable, qemuArgs, summarize,
} from './lib.ts';
import { openHostMode, type HostMode } from './host-mode.ts';

const MEMORY_MIB = 64;
const { values } = parseArgs({
  options: {
    runs: { type: 'string', default: '7' }, cpus: { type: 'string', default: '2' }, settle: { type: 'string', default: '1000' },
    base: { type: 'string' }, json: { type: 'string' }, help: { type: 'boolean', short: 'h' },
  },
});
if (values.help) {
  process.stdout.write('usage: node bench/vm-memory.ts [--runs 7] [--cpus 2] [--settle 1000] [--base DIR] [--json FILE]\n');
  process.exit(0);
}
const runs = Number(values.runs);
const cpus = Number(values.cpus);
const settleMs = Number(values.settle);
if (!Number.isInteger(runs) || runs < 1) fail(`--runs must be a positive integer, got "${values.runs}"`);
const baseBin = baseUnhaltBin(values.base);
checkPrerequisites({ qemu: true });
const host = hostInfo();
process.stdout.write(describeHost(host));
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const KiB = 1024;

/** RSS of a process, and the Rss of its guest-RAM-sized anonymous mappings (KiB). */
function memoryOf(pid: number): { rssKiB: number; guestKiB: number } {
  const smaps = readFileSync(`/proc/${pid}/smaps`, 'utf8');
  let rss = 0;
  let guest = 0;
  let isGuest = false;
  for (const line of smaps.split('\n')) {
    const head = /^([0-9a-f]+)-([0-9a-f]+) \S+ \S+ \S+ (\d+)\s*(.*)$/.exec(line);
    if (head) {
      const size = (parseInt(head[2]!, 16) - parseInt(head[1]!, 16)) / KiB;
      const anonymous = head[3] === '0' && (head[4] === '' || head[4] === '[heap]');
      isGuest = anonymous && size >= MEMORY_MIB * KiB && size <= (MEMORY_MIB + 4) * KiB;
      continue;
    }
    const m = /^Rss:\s+(\d+) kB/.exec(line);
    if (m) {
      rss += Number(m[1]);
      if (isGuest) guest += Number(m[1]);
    }
  }
  return { rssKiB: rss, guestKiB: guest };
}

interface Sample { overheadMiB: number; guestMiB: number; rssMiB: number }

/** Host mode with one probe VM; each measure() starts it, measures, stops it. */
async function openService(bin: string): Promise<{ api: HostMode; measure(): Promise<Sample> }> {
  const api = await openHostMode(bin);
  const vm = await api.call('createVm', { name: 'vm-memory', guest: 'probe', cpus, memoryMiB: MEMORY_MIB, append: 'scenario=idle ms=600000' }) as { id: string };
  let onConsole: (() => void) | undefined;
  let onStopped: (() => void) | undefined;
  api.on((e) => {
    if (e.type === 'console' && e.vmId === vm.id) onConsole?.();
    if (e.type === 'status' && e.vmId === vm.id && e.status.state === 'stopped') onStopped?.();
  });
  await api.call('subscribe', vm.id);
  const cycle = async (sample: boolean): Promise<Sample | undefined> => {
    const before = memoryOf(api.proc.pid!);
    const first = new Promise<void>((r) => { onConsole = () => { onConsole = undefined; r(); }; });
    await api.call('startVm', vm.id);
    await first;
    await sleep(settleMs);
    const running = memoryOf(api.proc.pid!);
    const stopped = new Promise<void>((r) => { onStopped = () => { onStopped = undefined; r(); }; });
    await api.call('forceStopVm', vm.id);
    await stopped;
    // The spares (a vCPU worker, a KVM VM) are made again after a start: wait them out.
    await sleep(settleMs);
    if (!sample) return undefined;
    const guest = running.guestKiB - before.guestKiB;
    return { overheadMiB: (running.rssKiB - before.rssKiB - guest) / KiB, guestMiB: guest / KiB, rssMiB: running.rssKiB / KiB };
  };
  // Settle (spares load), then one cycle that is not counted (a first start reads files, compiles code).
  await sleep(1500);
  await cycle(false);
  return { api, measure: async () => (await cycle(true))! };
}

async function qemuSample(): Promise<Sample> {
  const proc = spawn(QEMU, qemuArgs({ smp: cpus, memoryMiB: MEMORY_MIB, append: 'scenario=idle ms=600000' }), { stdio: ['ignore', 'pipe', 'pipe'] });
  try {
    await new Promise<void>((resolveFirst, reject) => {
      proc.stdout!.once('data', () => resolveFirst());
      proc.once('exit', (code) => reject(new Error(`qemu exited with ${code} before its first output`)));
    });
    await sleep(settleMs);
    const m = memoryOf(proc.pid!);
    return { overheadMiB: (m.rssKiB - m.guestKiB) / KiB, guestMiB: m.guestKiB / KiB, rssMiB: m.rssKiB / KiB };
  } finally {
    proc.kill('SIGKILL');
    if (proc.exitCode === null && proc.signalCode === null) await new Promise((r) => proc.once('exit', r));
  }
}

const ours = await openService(UNHALT_BIN);
const base = baseBin ? await openService(baseBin) : undefined;
const oursSamples: Sample[] = [];
const baseSamples: Sample[] = [];
const qemuSamples: Sample[] = [];
try {
  const turns: (() => Promise<void>)[] = [
    async () => { oursSamples.push(await ours.measure()); },
    async () => { qemuSamples.push(await qemuSample()); },
    ...(base ? [async () => { baseSamples.push(await base.measure()); }] : []),
  ];
  for (let i = 0; i < runs; i++) {
    for (let k = 0; k < turns.length; k++) await turns[(i + k) % turns.length]!();
    const o = oursSamples.at(-1)!;
    const q = qemuSamples.at(-1)!;
    process.stderr.write(`run ${i + 1}/${runs}: ours +${fmt(o.overheadMiB, 1)} MiB beyond ${fmt(o.guestMiB, 1)} MiB of guest pages; ` +
      `${base ? `base +${fmt(baseSamples.at(-1)!.overheadMiB, 1)} MiB; ` : ''}QEMU ${fmt(q.overheadMiB, 1)} MiB beyond ${fmt(q.guestMiB, 1)} MiB\n`);
  }
} finally {
  await ours.api.close();
  await base?.api.close();
}

const row = (what: string, xs: Sample[]) => {
  const o = summarize(xs.map((s) => s.overheadMiB));
  return [what, fmt(o.median, 1), fmt(o.min, 1), fmt(o.max, 1), fmt(summarize(xs.map((s) => s.guestMiB)).median, 1)];
};
process.stdout.write(`\nA running ${cpus}-vCPU, ${MEMORY_MIB} MiB probe VM (\`scenario=idle\`), ${runs} runs alternating, measured ${settleMs} ms after its first output (MiB)\n\n`);
process.stdout.write(markdownTable(['memory beyond the guest\'s touched RAM', 'median', 'min', 'max', 'guest RAM touched'], [
  row('in the app: the service\'s RSS running minus stopped', oursSamples),
  ...(base ? [row(`same, ${values.base}`, baseSamples)] : []),
  row('QEMU microvm: the whole process', qemuSamples),
]));
const om = summarize(oursSamples.map((s) => s.overheadMiB)).median;
const qm = summarize(qemuSamples.map((s) => s.overheadMiB)).median;
process.stdout.write(`\nratio ours / QEMU: ${fmt(om / qm, 2)}x of medians (target <= 2)\n`);
finishReport(values.json, {
  bench: 'vm-memory', host, runs, cpus, memoryMiB: MEMORY_MIB, settleMs,
  ours: oursSamples, qemu: qemuSamples, ...(base ? { base: baseSamples } : {}), ratio: om / qm,
});

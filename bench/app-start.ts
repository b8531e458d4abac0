// In the app (host mode, the service already running): `startVm` to the probe guest's first ttyS0
// byte as a WebSocket client sees it, and `forceStopVm` to the VM reported stopped (its vCPUs out
// of KVM_RUN, its KVM fds closed, its guest RAM returned), for warm starts of one VM (1 vCPU,
// 64 MiB, `scenario=idle`), alternating with QEMU microvm's whole cold process to its first ttyS0
// line. Also the service's RSS before and after. Target (issue 15): first byte <= 15 ms median
// and <= 0.4x QEMU's whole process; stop -> stopped <= 20 ms. Measured, not asserted.
//
//   node bench/app-start.ts [--runs 11] [--cpus 1] [--base DIR] [--breakdown] [--json FILE]
//
// --base DIR: also a service of another checkout of this tree (its bin/unhalt.mjs, e.g. the
//   previous release), each run's three starts in a rotating order: before/after in one run.
// --breakdown: where each start's and stop's time goes, from the service's start-trace steps
//   (electron/vmm/start-trace.ts, UNHALT_TRACE_STARTS=1), as medians since the client's request.
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { WebSocket } from 'ws';
import type { ApiEvent, ServerMessage } from '../electron/service/api.ts';
import { TRACE_LINE_PREFIX } from '../electron/vmm/start-trace.ts';
import { baseUnhaltBin,
  QEMU, QEMU_CLEAN_EXIT, UNHALT_BIN, checkPrerequisites, describeHost, fail, finishReport, fmt, hostInfo, markdownTable,
  pairedRatio, qemuArgs, removeDir, runTimed, summarize, tempDir,
} from './lib.ts';

const USAGE = `usage: node bench/app-start.ts [--runs 11] [--cpus 1] [--base DIR] [--breakdown] [--json FILE]
startVm -> first ttyS0 byte and forceStopVm -> stopped over host mode's API, vs QEMU microvm's whole process.
`;
const { values } = parseArgs({
  options: {
    runs: { type: 'string', default: '11' }, cpus: { type: 'string', default: '1' }, base: { type: 'string' },
    breakdown: { type: 'boolean' }, json: { type: 'string' }, help: { type: 'boolean', short: 'h' },
  },
});
if (values.help) {
  process.stdout.write(USAGE);
  process.exit(0);
}
const runs = Number(values.runs);
const cpus = Number(values.cpus);
if (!Number.isInteger(runs) || runs < 1) fail(`--runs must be a positive integer, got "${values.runs}"`);
const baseBin = baseUnhaltBin(values.base);
checkPrerequisites({ qemu: true });
const host = hostInfo();
process.stdout.write(describeHost(host));

const QEMU_ARGS = qemuArgs({ smp: cpus, memoryMiB: 64, append: 'scenario=hello' });
const now = () => performance.timeOrigin + performance.now();

interface Sample { firstByteMs: number; startReplyMs: number; stopMs: number; steps: Record<string, number> }

/** One `unhalt serve` with one probe VM, and a client that starts and stops it. */
class Service {
  readonly samples: Sample[] = [];
  rssBefore = 0;
  rssAfter = 0;
  private readonly home = tempDir('app-start');
  private proc!: ChildProcess;
  private stderr = '';
  private trace: [string, number][] = [];
  private ws!: WebSocket;
  private readonly waiting = new Map<number, (m: ServerMessage) => void>();
  private nextId = 1;
  private vmId = '';
  private onConsole?: () => void;
  private onStopped?: () => void;

  readonly label: string;
  private readonly bin: string;

  constructor(label: string, bin: string) {
    this.label = label;
    this.bin = bin;
  }

  async open(): Promise<void> {
    this.proc = spawn(process.execPath, [this.bin, 'serve', '--no-open'], {
      env: { ...process.env, UNHALT_HOME: this.home, DISPLAY: '', WAYLAND_DISPLAY: '', ...(values.breakdown ? { UNHALT_TRACE_STARTS: '1' } : {}) },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let pending = '';
    this.proc.stderr!.on('data', (d) => {
      pending += d;
      let nl: number;
      while ((nl = pending.indexOf('\n')) >= 0) {
        const line = pending.slice(0, nl);
        pending = pending.slice(nl + 1);
        if (line.startsWith(TRACE_LINE_PREFIX)) {
          const at = line.lastIndexOf(' ');
          this.trace.push([line.slice(TRACE_LINE_PREFIX.length, at), Number(line.slice(at + 1))]);
        } else {
          this.stderr += `${line}\n`;
        }
      }
    });
    const url = await new Promise<URL>((resolveUrl, reject) => {
      let out = '';
      this.proc.stdout!.on('data', (d) => { out += d; if (out.includes('\n')) resolveUrl(new URL(out.trim())); });
      this.proc.once('exit', (code) => reject(new Error(`${this.label}: unhalt serve exited with ${code}: ${this.stderr}`)));
    });
    this.ws = new WebSocket(`ws://${url.host}/api?token=${url.searchParams.get('token')}`, { origin: url.origin });
    await new Promise((r, reject) => { this.ws.once('open', r); this.ws.once('error', reject); });
    this.ws.on('message', (d) => {
      const m = JSON.parse(d.toString()) as ServerMessage & { event?: ApiEvent };
      if ('id' in m && typeof m.id === 'number') { this.waiting.get(m.id)?.(m); this.waiting.delete(m.id); return; }
      const e = (m.event ?? m) as ApiEvent;
      if (e.type === 'console' && e.vmId === this.vmId) this.onConsole?.();
      if (e.type === 'status' && e.vmId === this.vmId && e.status.state === 'stopped') this.onStopped?.();
    });
    const vm = await this.call('createVm', { name: 'app-start', guest: 'probe', cpus, memoryMiB: 64, append: 'scenario=idle ms=600000' }) as { id: string };
    this.vmId = vm.id;
    await this.call('subscribe', vm.id);
    // Let the service settle (its spare vCPU workers load) before the first measured start.
    await new Promise((r) => setTimeout(r, 1000));
    this.rssBefore = this.rssMiB();
    await this.startStop(); // warm-up, not reported (the first start of a VM reads its files)
  }

  rssMiB(): number {
    return Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${this.proc.pid}/status`, 'utf8'))![1]) / 1024;
  }

  private call(method: string, ...params: unknown[]): Promise<unknown> {
    const id = this.nextId++;
    return new Promise((resolveCall, reject) => {
      this.waiting.set(id, (m) => ('error' in m && m.error ? reject(new Error(`${method}: ${JSON.stringify(m.error)}`)) : resolveCall((m as { result?: unknown }).result)));
      this.ws.send(JSON.stringify({ id, method, params }));
    });
  }

  async startStop(): Promise<Sample> {
    this.trace = [];
    const t0 = now();
    const first = new Promise<number>((r) => { this.onConsole = () => { this.onConsole = undefined; r(now()); }; });
    await this.call('startVm', this.vmId);
    const replyAt = now();
    const firstAt = await first;
    const t1 = now();
    const stopped = new Promise<number>((r) => { this.onStopped = () => { this.onStopped = undefined; r(now()); }; });
    await this.call('forceStopVm', this.vmId);
    const stoppedAt = await stopped;
    // A user does not click Start again within a millisecond; let the spares refill.
    await new Promise((r) => setTimeout(r, 300));
    const steps: Record<string, number> = { 'client: startVm sent': 0 };
    for (const [step, at] of this.trace) steps[step] ??= at - t0;
    Object.assign(steps, { 'client: startVm answered': replyAt - t0, 'client: first console byte': firstAt - t0, 'client: forceStopVm sent': t1 - t0, 'client: status stopped': stoppedAt - t0 });
    return { firstByteMs: firstAt - t0, startReplyMs: replyAt - t0, stopMs: stoppedAt - t1, steps };
  }

  async measure(): Promise<void> {
    this.samples.push(await this.startStop());
  }

  async close(): Promise<void> {
    this.rssAfter = this.rssMiB();
    this.ws.close();
    this.proc.kill('SIGTERM');
    await new Promise((r) => this.proc.once('exit', r));
    removeDir(this.home);
  }
}

const ours = new Service('this tree', UNHALT_BIN);
const base = baseBin ? new Service('base', baseBin) : undefined;
const qemuFirst: number[] = [];
const qemu = async () => {
  const r = await runTimed(QEMU, QEMU_ARGS, { timeoutMs: 60_000 });
  if (r.code !== QEMU_CLEAN_EXIT || r.firstLineMs === undefined) throw new Error(`qemu exited with ${r.code ?? r.signal}: ${r.stderr.slice(-300)}`);
  qemuFirst.push(r.firstLineMs);
};
try {
  await ours.open();
  await base?.open();
  const turns: (() => Promise<void>)[] = [() => ours.measure(), qemu, ...(base ? [() => base.measure()] : [])];
  for (let i = 0; i < runs; i++) {
    for (let k = 0; k < turns.length; k++) await turns[(i + k) % turns.length]!();
    const o = ours.samples.at(-1)!;
    const b = base?.samples.at(-1);
    process.stderr.write(`run ${i + 1}/${runs}: startVm -> first byte ${fmt(o.firstByteMs, 1)} ms, stop ${fmt(o.stopMs, 1)} ms` +
      `${b ? `; base ${fmt(b.firstByteMs, 1)} ms, stop ${fmt(b.stopMs, 1)} ms` : ''}; qemu to first line ${fmt(qemuFirst.at(-1)!, 0)} ms\n`);
  }
  await new Promise((r) => setTimeout(r, 1000));
} finally {
  await ours.close().catch(() => {});
  await base?.close().catch(() => {});
}

const q = summarize(qemuFirst);
const rows: string[][] = [];
for (const svc of [ours, ...(base ? [base] : [])]) {
  const f = summarize(svc.samples.map((s) => s.firstByteMs));
  const s = summarize(svc.samples.map((x) => x.startReplyMs));
  const st = summarize(svc.samples.map((x) => x.stopMs));
  const tag = base ? ` (${svc.label})` : '';
  rows.push(['startVm -> first ttyS0 byte (target <= 15)' + tag, fmt(f.median, 1), fmt(f.min, 1), fmt(f.max, 1)]);
  rows.push(['startVm -> its reply' + tag, fmt(s.median, 1), fmt(s.min, 1), fmt(s.max, 1)]);
  rows.push(['forceStopVm -> status stopped (target <= 20)' + tag, fmt(st.median, 1), fmt(st.min, 1), fmt(st.max, 1)]);
}
rows.push(['QEMU microvm, process start -> first ttyS0 line', fmt(q.median, 1), fmt(q.min, 1), fmt(q.max, 1)]);
process.stdout.write(`\nHost mode, one VM (${cpus} vCPU, 64 MiB, probe \`scenario=idle\`), ${runs} warm start/stop cycles over the WebSocket API, ` +
  `alternating with QEMU microvm cold processes${base ? ` and a service of ${values.base}` : ''} (ms)\n\n`);
process.stdout.write(markdownTable(['what', 'median', 'min', 'max'], rows));
const fo = summarize(ours.samples.map((s) => s.firstByteMs));
const ratio = pairedRatio(ours.samples.map((x) => x.firstByteMs), qemuFirst);
process.stdout.write(`\nratio first byte / QEMU's whole process: ${fmt(fo.median / q.median, 2)}x of medians, ${fmt(ratio, 2)}x median of pairs (target <= 0.4)`);
if (base) {
  const vsBase = pairedRatio(ours.samples.map((x) => x.firstByteMs), base.samples.map((x) => x.firstByteMs));
  const stopVsBase = pairedRatio(ours.samples.map((x) => x.stopMs), base.samples.map((x) => x.stopMs));
  process.stdout.write(`; vs base: first byte ${fmt(vsBase, 2)}x, stop ${fmt(stopVsBase, 2)}x (median of pairs)`);
}
process.stdout.write(`\nservice RSS ${fmt(ours.rssBefore, 1)} MiB before, ${fmt(ours.rssAfter, 1)} MiB after (${fmt(ours.rssAfter - ours.rssBefore, 1)})` +
  `${base ? `; base ${fmt(base.rssBefore, 1)} -> ${fmt(base.rssAfter, 1)} MiB` : ''} (no forced GC: bench/soak.ts measures growth after GC)\n`);

if (values.breakdown) {
  // Medians of each step's time since the request; a step absent from a tree (older) is blank.
  const med = (xs: number[]) => (xs.length ? summarize(xs).median : undefined);
  const stepsOf = (svc: Service) => {
    const all = new Map<string, number[]>();
    for (const s of svc.samples) for (const [k, v] of Object.entries(s.steps)) all.set(k, [...(all.get(k) ?? []), v]);
    return all;
  };
  const mine = stepsOf(ours);
  const theirs = base ? stepsOf(base) : undefined;
  const order = [...mine.keys()].sort((a, b) => med(mine.get(a)!)! - med(mine.get(b)!)!);
  let prev = 0;
  const table = order.map((k) => {
    const m = med(mine.get(k)!)!;
    const row = [k, fmt(m, 2), fmt(m - prev, 2)];
    prev = m;
    if (theirs) row.push(theirs.has(k) ? fmt(med(theirs.get(k)!)!, 2) : '');
    return row;
  });
  process.stdout.write(`\nWhere a warm start and stop go (medians of ${runs}, ms since startVm was sent)\n\n`);
  process.stdout.write(markdownTable(['step', 'at', 'since the previous', ...(theirs ? ['base: at'] : [])], table));
}
finishReport(values.json, {
  bench: 'app-start', host, runs, cpus,
  firstByte: fo, startReply: summarize(ours.samples.map((x) => x.startReplyMs)), stop: summarize(ours.samples.map((x) => x.stopMs)),
  qemuFirstLine: q, ratio: { ofMedians: fo.median / q.median, pairedMedian: ratio },
  rssMiB: { before: ours.rssBefore, after: ours.rssAfter }, samples: ours.samples, qemuSamples: qemuFirst,
  ...(base ? { base: { bin: baseBin, samples: base.samples, rssMiB: { before: base.rssBefore, after: base.rssAfter } } } : {}),
});

// In the app (host mode, the service already running): `startVm` to the probe guest's first ttyS0
// byte as a WebSocket client sees it, and `forceStopVm` to the VM reported stopped (its threads
// joined, its KVM fds and memory released), for warm starts of one VM (1 vCPU, 64 MiB,
// `scenario=idle`), alternating with QEMU microvm's whole cold process to its first ttyS0 line.
// Also the service's RSS before and after. Target (issue 15): first byte <= 15 ms median and
// <= 0.4x QEMU's whole process; stop -> stopped <= 20 ms. Measured, not asserted.
//
//   node bench/app-start.ts [--runs 11] [--cpus 1] [--json FILE]
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { WebSocket } from 'ws';
import type { ApiEvent, ServerMessage } from '../electron/service/api.ts';
import {
  QEMU, QEMU_CLEAN_EXIT, UNHALT_BIN, checkPrerequisites, describeHost, finishReport, fmt, hostInfo, markdownTable,
  pairedRatio, parseBenchArgs, qemuArgs, removeDir, runTimed, summarize, tempDir,
} from './lib.ts';

const USAGE = `usage: node bench/app-start.ts [--runs 11] [--cpus 1] [--json FILE]
startVm -> first ttyS0 byte and forceStopVm -> stopped over host mode's API, vs QEMU microvm's whole process.
`;
const opts = parseBenchArgs(USAGE, 11, { cpus: '1' });
const cpus = Number(opts.cpus);
checkPrerequisites({ qemu: true });
const host = hostInfo();
process.stdout.write(describeHost(host));

const home = tempDir('app-start');
const QEMU_ARGS = qemuArgs({ smp: cpus, memoryMiB: 64, append: 'scenario=hello' });
const serve = spawn(process.execPath, [UNHALT_BIN, 'serve', '--no-open'], {
  env: { ...process.env, UNHALT_HOME: home, DISPLAY: '', WAYLAND_DISPLAY: '' }, stdio: ['ignore', 'pipe', 'pipe'],
});
let serveErr = '';
serve.stderr!.on('data', (d) => { serveErr += d; });
const rssMiB = () => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${serve.pid}/status`, 'utf8'))![1]) / 1024;

interface Client {
  call(method: string, ...params: unknown[]): Promise<unknown>;
  on(f: (e: ApiEvent) => void): void;
  close(): void;
}
async function connect(url: URL): Promise<Client> {
  const ws = new WebSocket(`ws://${url.host}/api?token=${url.searchParams.get('token')}`, { origin: url.origin });
  await new Promise((resolve, reject) => { ws.once('open', resolve); ws.once('error', reject); });
  const waiting = new Map<number, (m: ServerMessage) => void>();
  const listeners: ((e: ApiEvent) => void)[] = [];
  ws.on('message', (d) => {
    const m = JSON.parse(d.toString()) as ServerMessage & { event?: ApiEvent };
    if ('id' in m && typeof m.id === 'number') { waiting.get(m.id)?.(m); waiting.delete(m.id); return; }
    const e = (m.event ?? m) as ApiEvent;
    for (const f of listeners) f(e);
  });
  let nextId = 1;
  return {
    call(method, ...params) {
      const id = nextId++;
      return new Promise((resolve, reject) => {
        waiting.set(id, (m) => ('error' in m && m.error ? reject(new Error(`${method}: ${JSON.stringify(m.error)}`)) : resolve((m as { result?: unknown }).result)));
        ws.send(JSON.stringify({ id, method, params }));
      });
    },
    on: (f) => { listeners.push(f); },
    close: () => ws.close(),
  };
}

interface Sample { firstByteMs: number; startReplyMs: number; stopMs: number }
const ours: Sample[] = [];
const qemuFirst: number[] = [];
let rssBefore = 0;
let rssAfter = 0;
try {
  const url = await new Promise<URL>((resolve, reject) => {
    let out = '';
    serve.stdout!.on('data', (d) => { out += d; if (out.includes('\n')) resolve(new URL(out.trim())); });
    serve.once('exit', (code) => reject(new Error(`unhalt serve exited with ${code}: ${serveErr}`)));
  });
  const api = await connect(url);
  const vm = await api.call('createVm', { name: 'app-start', guest: 'probe', cpus, memoryMiB: 64, append: 'scenario=idle ms=600000' }) as { id: string };
  let onConsole: (() => void) | undefined;
  let onStopped: (() => void) | undefined;
  api.on((e) => {
    if (e.type === 'console' && e.vmId === vm.id) onConsole?.();
    if (e.type === 'status' && e.vmId === vm.id && e.status.state === 'stopped') onStopped?.();
  });
  await api.call('subscribe', vm.id);
  // Let the service settle (its spare vCPU workers load) before the first measured start.
  await new Promise((r) => setTimeout(r, 1000));
  rssBefore = rssMiB();

  const startStop = async (): Promise<Sample> => {
    const t0 = performance.now();
    const first = new Promise<number>((resolve) => { onConsole = () => { onConsole = undefined; resolve(performance.now() - t0); }; });
    await api.call('startVm', vm.id);
    const startReplyMs = performance.now() - t0;
    const firstByteMs = await first;
    const t1 = performance.now();
    const stopped = new Promise<number>((resolve) => { onStopped = () => { onStopped = undefined; resolve(performance.now() - t1); }; });
    await api.call('forceStopVm', vm.id);
    const stopMs = await stopped;
    // A user does not click Start again within a millisecond; let the spares refill.
    await new Promise((r) => setTimeout(r, 300));
    return { firstByteMs, startReplyMs, stopMs };
  };
  const qemu = async () => {
    const r = await runTimed(QEMU, QEMU_ARGS, { timeoutMs: 60_000 });
    if (r.code !== QEMU_CLEAN_EXIT || r.firstLineMs === undefined) throw new Error(`qemu exited with ${r.code ?? r.signal}: ${r.stderr.slice(-300)}`);
    return r.firstLineMs;
  };

  await startStop(); // warm-up, not reported (the first start of a VM reads its files)
  for (let i = 0; i < opts.runs; i++) {
    if (i % 2) { qemuFirst.push(await qemu()); ours.push(await startStop()); } else { ours.push(await startStop()); qemuFirst.push(await qemu()); }
    process.stderr.write(`run ${i + 1}/${opts.runs}: startVm -> first byte ${fmt(ours.at(-1)!.firstByteMs, 1)} ms, stop ${fmt(ours.at(-1)!.stopMs, 1)} ms; qemu to first line ${fmt(qemuFirst.at(-1)!, 0)} ms\n`);
  }
  await new Promise((r) => setTimeout(r, 1000));
  rssAfter = rssMiB();
  api.close();
} finally {
  serve.kill('SIGTERM');
  await new Promise((r) => serve.once('exit', r));
  removeDir(home);
}

const f = summarize(ours.map((s) => s.firstByteMs));
const s = summarize(ours.map((x) => x.startReplyMs));
const st = summarize(ours.map((x) => x.stopMs));
const q = summarize(qemuFirst);
process.stdout.write(`\nHost mode, one VM (${cpus} vCPU, 64 MiB, probe \`scenario=idle\`), ${opts.runs} warm start/stop cycles over the WebSocket API, ` +
  'alternating with QEMU microvm cold processes (ms)\n\n');
process.stdout.write(markdownTable(['what', 'median', 'min', 'max'], [
  ['startVm -> first ttyS0 byte (target <= 15)', fmt(f.median, 1), fmt(f.min, 1), fmt(f.max, 1)],
  ['startVm -> its reply', fmt(s.median, 1), fmt(s.min, 1), fmt(s.max, 1)],
  ['forceStopVm -> status stopped (target <= 20)', fmt(st.median, 1), fmt(st.min, 1), fmt(st.max, 1)],
  ['QEMU microvm, process start -> first ttyS0 line', fmt(q.median, 1), fmt(q.min, 1), fmt(q.max, 1)],
]));
const ratio = pairedRatio(ours.map((x) => x.firstByteMs), qemuFirst);
process.stdout.write(`\nratio first byte / QEMU's whole process: ${fmt(f.median / q.median, 2)}x of medians, ${fmt(ratio, 2)}x median of pairs (target <= 0.4); ` +
  `service RSS ${fmt(rssBefore, 1)} MiB before, ${fmt(rssAfter, 1)} MiB after (${fmt(rssAfter - rssBefore, 1)}; no forced GC, so stopped VMs' ` +
  'guest RAM may still await the collector: bench/soak.ts measures growth after GC)\n');
finishReport(opts.json, {
  bench: 'app-start', host, runs: opts.runs, cpus,
  firstByte: f, startReply: s, stop: st, qemuFirstLine: q, ratio: { ofMedians: f.median / q.median, pairedMedian: ratio },
  rssMiB: { before: rssBefore, after: rssAfter }, samples: ours, qemuSamples: qemuFirst,
});


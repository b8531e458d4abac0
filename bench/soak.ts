// Soak: many start/stop cycles of a 2-vCPU probe guest in one process. After the run, open fds
// (/proc/self/fd) and threads (/proc/self/task) must be back at the baseline and RSS, measured
// after a forced GC (guest RAM is a SharedArrayBuffer that only GC frees), may not have grown by
// 20 MiB or more. Every fourth cycle the guest powers itself off (`poweroff` on its shell);
// the others are stopped from the host while the guest idles.
//
//   node --expose-gc bench/soak.ts [--cycles 200] [--cpus 2] [--memory 64] [--trim] [--json FILE]
//
// Exit code 0 when every limit holds, 1 otherwise.
import { readdirSync, writeFileSync } from 'node:fs';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { parseArgs } from 'node:util';
import { validateConfig } from '../electron/vmm/config/vm-config.ts';
import { resolveMachine } from '../electron/vmm/config/resolve.ts';
import { probeHost } from '../electron/vmm/machine/host-caps.ts';
import { VirtualMachine } from '../electron/vmm/vm.ts';
import type { VmEnd } from '../electron/vmm/runtime/vm-end.ts';
import { IDLE_WORKER_CLEANUP_MS } from '../electron/vmm/vcpu/worker-pool.ts';
import { returnFreedMallocMemory } from '../native/kvm/malloc-trim.ts';

const MiB = 1024 * 1024;
const RSS_LIMIT_MIB = 20;
const { values } = parseArgs({
  options: {
    cycles: { type: 'string', default: '200' },
    cpus: { type: 'string', default: '2' },
    memory: { type: 'string', default: '64' },
    json: { type: 'string' },
    // Also report RSS after glibc's malloc_trim(0): tells memory that is free but not yet returned
    // to the OS (allocator fragmentation) apart from memory still in use (a leak).
    trim: { type: 'boolean' },
    help: { type: 'boolean', short: 'h' },
  },
});
if (values.help) {
  process.stdout.write('usage: node --expose-gc bench/soak.ts [--cycles 200] [--cpus 2] [--memory 64] [--trim] [--json FILE]\n');
  process.exit(0);
}
const cycles = Number(values.cycles);
const cpus = Number(values.cpus);
const memoryMiB = Number(values.memory);
if (!Number.isInteger(cycles) || cycles < 1) throw new Error(`--cycles must be a positive integer, got ${values.cycles}`);

// --expose-gc is the documented way; without it, expose gc the same way V8 would.
let gc = (globalThis as { gc?: () => void }).gc;
if (!gc) {
  setFlagsFromString('--expose-gc');
  gc = runInNewContext('gc') as () => void;
}
const forceGc = gc;

const fds = () => readdirSync('/proc/self/fd').length;
const threads = () => readdirSync('/proc/self/task').length;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function measure(): Promise<{ fds: number; threads: number; rssMiB: number; heapMiB: number; externalMiB: number }> {
  // Let exited workers' threads be reaped, idle vCPU workers clean up (their isolates and malloc
  // arenas, IDLE_WORKER_CLEANUP_MS after they left a VM: vcpu-worker.ts) and finalizers run, then collect twice.
  await sleep(2 * IDLE_WORKER_CLEANUP_MS);
  for (let i = 0; i < 3; i++) {
    await sleep(30);
    forceGc();
  }
  await sleep(30);
  if (values.trim) returnFreedMallocMemory();
  const m = process.memoryUsage();
  return { fds: fds(), threads: threads(), rssMiB: m.rss / MiB, heapMiB: m.heapUsed / MiB, externalMiB: (m.external + m.arrayBuffers) / MiB };
}

const { spec: baseSpec } = resolveMachine(validateConfig({ guest: 'probe', cpus, memoryMiB, append: 'scenario=echo', name: 'soak' }), probeHost());

async function cycle(i: number): Promise<{ exit: VmEnd; ms: number }> {
  const t0 = performance.now();
  const vm = await VirtualMachine.start({ ...baseSpec });
  let text = '';
  let ready!: () => void;
  const prompt = new Promise<void>((r) => { ready = r; });
  vm.on('console', (b) => {
    text += Buffer.from(b).toString('latin1');
    if (text.includes('probe> ')) ready();
  });
  const timer = setTimeout(() => { process.stderr.write(`cycle ${i}: no prompt after 30 s; console ${JSON.stringify(text.slice(-200))}\n`); void vm.stop(); }, 30_000);
  await Promise.race([prompt, vm.ended]);
  clearTimeout(timer);
  const guestEnds = i % 4 === 3;
  if (guestEnds) vm.sendConsole('poweroff\r');
  const exit = guestEnds ? await vm.ended : await vm.stop();
  const want = guestEnds ? 'poweroff' : 'stopped';
  if (exit.kind !== want) throw new Error(`cycle ${i}: the VM ended as ${exit.kind} (${exit.message}), expected ${want}`);
  return { exit, ms: performance.now() - t0 };
}

// Warm-up: lazily created process-wide resources (worker module cache, koffi, libuv pool).
for (let i = 0; i < 3; i++) await cycle(i);
const base = await measure();
process.stdout.write(`soak: ${cycles} cycles of a ${cpus}-vCPU, ${memoryMiB} MiB probe guest (boot to prompt, then stop or guest power-off)${values.trim ? '; RSS measured after malloc_trim(0)' : ''}\n`);
process.stdout.write(`baseline after 3 warm-up cycles: fds ${base.fds}, threads ${base.threads}, RSS ${base.rssMiB.toFixed(1)} MiB, JS heap ${base.heapMiB.toFixed(1)} MiB, external+arrayBuffers ${base.externalMiB.toFixed(1)} MiB\n`);
process.stdout.write('cycle  fds  threads  RSS MiB  ΔRSS MiB  JS heap MiB  external MiB  cycle ms (median of the last block)\n');

const samples: { cycle: number; fds: number; threads: number; rssMiB: number; heapMiB: number; externalMiB: number; medianCycleMs: number }[] = [];
let block: number[] = [];
let peakRss = base.rssMiB;
const t0 = performance.now();
for (let i = 1; i <= cycles; i++) {
  const { ms } = await cycle(i);
  block.push(ms);
  peakRss = Math.max(peakRss, process.memoryUsage().rss / MiB);
  if (i % 25 === 0 || i === cycles) {
    const m = await measure();
    block.sort((a, b) => a - b);
    const median = block[Math.floor(block.length / 2)]!;
    block = [];
    samples.push({ cycle: i, ...m, medianCycleMs: median });
    process.stdout.write(`${String(i).padStart(5)}  ${String(m.fds).padStart(3)}  ${String(m.threads).padStart(7)}  ${m.rssMiB.toFixed(1).padStart(7)}  ${(m.rssMiB - base.rssMiB).toFixed(1).padStart(8)}  ${m.heapMiB.toFixed(1).padStart(11)}  ${m.externalMiB.toFixed(1).padStart(12)}  ${median.toFixed(0).padStart(8)}\n`);
  }
}
const end = samples[samples.length - 1]!;
const result = {
  cycles, cpus, memoryMiB,
  seconds: (performance.now() - t0) / 1000,
  baseline: base,
  end,
  rssGrowthMiB: end.rssMiB - base.rssMiB,
  peakRssMiB: peakRss,
  samples,
  ok: {
    fds: end.fds === base.fds,
    threads: end.threads === base.threads,
    rss: end.rssMiB - base.rssMiB < RSS_LIMIT_MIB,
  },
};
process.stdout.write(`\n${cycles} cycles in ${result.seconds.toFixed(1)} s: fds ${base.fds} -> ${end.fds} (${result.ok.fds ? 'back to baseline' : 'LEAK'}), ` +
  `threads ${base.threads} -> ${end.threads} (${result.ok.threads ? 'back to baseline' : 'LEAK'}), ` +
  `RSS after GC ${base.rssMiB.toFixed(1)} -> ${end.rssMiB.toFixed(1)} MiB (growth ${result.rssGrowthMiB.toFixed(1)} MiB, limit ${RSS_LIMIT_MIB}: ${result.ok.rss ? 'ok' : 'EXCEEDED'}), peak RSS ${peakRss.toFixed(1)} MiB\n`);
if (values.json) writeFileSync(values.json, `${JSON.stringify(result, null, 2)}\n`);
process.exit(result.ok.fds && result.ok.threads && result.ok.rss ? 0 : 1);

// The cost of one virtio queue notification, by ioeventfd (KVM signals the I/O thread's eventfd
// inside the kernel: no exit to userspace) against the fallback (the notify register's MMIO
// exit: KVM_EXIT_MMIO -> the vCPU worker -> an eventfd write -> KVM_RUN), on the probe guest's
// virtio-rng driver (scenario virtio-rng), and QEMU's virtio-rng-pci (q35, modern only, its
// ioeventfd on) with the same driver as the reference. The guest times each notify write and each whole
// request (notify -> the I/O thread fills the buffer -> used ring -> MSI-X taken) with rdtsc and
// reports the means (`notify_ns`, `request_ns`) and the fastest notify (`notify_min_ns`); the
// VMM's counters say how each notification arrived. The two alternate in one run. In-process
// (the VMM's own API), because the MMIO path is forced by a test hook no command line offers.
// Measured, not asserted.
//
//   node bench/virtio-notify.ts [--runs 5] [--rounds 2000] [--json FILE]
import type { AgentEvent } from '../electron/vmm/agent/line-protocol.ts';
import { resolveMachine } from '../electron/vmm/config/resolve.ts';
import { validateConfig } from '../electron/vmm/config/vm-config.ts';
import { probeHost } from '../electron/vmm/machine/host-caps.ts';
import { VirtualMachine } from '../electron/vmm/vm.ts';
import { join } from 'node:path';
import { readFileSync } from 'node:fs';
import {
  PROBE_ELF, QEMU, agentEvents, describeHost, finishReport, fmt, hostInfo, isPvmHost, markdownTable, pairedRatio, parseBenchArgs, removeDir,
  runTimed, summarize, tempDir,
} from './lib.ts';

const USAGE = `usage: node bench/virtio-notify.ts [--runs 5] [--rounds 2000] [--json FILE]
One virtio-rng notification: by ioeventfd vs by MMIO exit vs QEMU's device, timed by the probe guest.
`;
const opts = parseBenchArgs(USAGE, 5, { rounds: '2000' });
const rounds = Number(opts.rounds);
if (!Number.isInteger(rounds) || rounds < 1 || rounds > 1_000_000) throw new Error(`--rounds must be 1..1000000, got "${opts.rounds}"`);

const host = hostInfo();
process.stdout.write(describeHost(host));

type Path = 'ioeventfd' | 'mmio-exit' | 'qemu';
interface Sample { notifyNs: number; notifyP99Ns: number; notifyMinNs: number; requestNs: number; mmioNotifies: number; kicks: number }

const append = `scenario=virtio-rng bytes=16 rounds=${rounds}`;
const dir = tempDir('virtio-notify');

/** QEMU q35 (SeaBIOS assigns the BARs) with its virtio-rng-pci, modern only; its ioeventfd is on by default. */
async function runQemu(): Promise<Sample> {
  const ttyS1 = join(dir, 'qemu.ttyS1');
  const r = await runTimed(QEMU, [
    '-machine', 'q35', '-accel', 'kvm', '-cpu', 'host,-arch-capabilities', '-smp', '1', '-m', '128',
    '-nodefaults', '-no-user-config', '-display', 'none', '-no-reboot', '-device', 'isa-debug-exit,iobase=0xf4,iosize=4',
    '-kernel', PROBE_ELF, '-append', isPvmHost() ? `${append} unhalt.pvm=1` : append,
    '-device', 'virtio-rng-pci,disable-legacy=on', '-serial', 'null', '-serial', `file:${ttyS1}`,
  ], { timeoutMs: 300_000 });
  if (r.code !== 0 && r.code !== 1) throw new Error(`QEMU exited with ${r.code ?? r.signal}: ${r.stderr.trim()}`);
  const f = agentEvents(readFileSync(ttyS1, 'utf8')).find((e) => e.event === 'virtio_rng')?.fields;
  if (!f || f.ok !== 1 || f.rounds !== rounds) throw new Error(`qemu: the guest reported ${JSON.stringify(f)}`);
  return { notifyNs: f.notify_p50_ns!, notifyP99Ns: f.notify_p99_ns!, notifyMinNs: f.notify_min_ns!, requestNs: f.request_p50_ns!, mmioNotifies: NaN, kicks: NaN };
}

async function run(path: Path): Promise<Sample> {
  if (path === 'qemu') return runQemu();
  const { spec } = resolveMachine(validateConfig({
    guest: 'probe', cpus: 1, memoryMiB: 64, rng: true, name: 'notify', append,
  }), probeHost());
  if (path === 'mmio-exit') spec.testHooks = { noIoeventfd: true };
  const vm = await VirtualMachine.start(spec);
  const events: AgentEvent[] = [];
  vm.on('agent', (e) => events.push(e));
  const exit = await vm.ended;
  if (exit.kind !== 'poweroff') throw new Error(`${path}: the VM ended with ${exit.kind}: ${exit.message}`);
  const f = events.find((e) => e.event === 'virtio_rng')?.fields;
  if (!f || f.ok !== 1 || f.rounds !== rounds) throw new Error(`${path}: the guest reported ${JSON.stringify(f)}`);
  const c = vm.virtioCounters().rng!;
  return {
    notifyNs: f.notify_p50_ns!, notifyP99Ns: f.notify_p99_ns!, notifyMinNs: f.notify_min_ns!, requestNs: f.request_p50_ns!,
    mmioNotifies: c.mmioNotifies, kicks: c.kicks,
  };
}

const results: Record<Path, Sample[]> = { ioeventfd: [], 'mmio-exit': [], qemu: [] };
try {
  for (let i = 0; i < opts.runs; i++) {
    const order: Path[] = i % 2 === 0 ? ['ioeventfd', 'mmio-exit', 'qemu'] : ['qemu', 'mmio-exit', 'ioeventfd'];
    for (const p of order) {
      const s = await run(p);
      results[p].push(s);
      process.stderr.write(`run ${i + 1}/${opts.runs} ${p}: notify ${s.notifyNs} ns (min ${s.notifyMinNs}), request ${s.requestNs} ns` +
        `${p === 'qemu' ? '' : `, ${s.mmioNotifies} of ${s.kicks} notifications as MMIO exits`}\n`);
    }
  }
} finally {
  removeDir(dir);
}

const sum = (p: Path, k: 'notifyNs' | 'notifyP99Ns' | 'notifyMinNs' | 'requestNs') => summarize(results[p].map((s) => s[k]));
const row = (p: Path) => {
  const n = sum(p, 'notifyNs');
  const m = sum(p, 'notifyMinNs');
  const r = sum(p, 'requestNs');
  const last = results[p].at(-1)!;
  return [p === 'qemu' ? 'QEMU q35 virtio-rng-pci (its ioeventfd)' : `Unhalt, ${p}`, n.n, fmt(n.median, 0), fmt(n.min, 0), fmt(sum(p, 'notifyP99Ns').median, 0), fmt(m.min, 0),
    fmt(r.median, 0), fmt(r.min, 0), p === 'qemu' ? '—' : `${last.mmioNotifies} / ${last.kicks}`];
};
process.stdout.write(`\nvirtio-rng, ${rounds} requests of 16 bytes per run, 1 vCPU, ${opts.runs} runs each, alternating. notify = the guest's ` +
  'rdtsc around its 16-bit notify write (p50 of a run; medians and minimums over runs); request = notify to used buffer and MSI-X taken (p50 of a run)\n\n');
process.stdout.write(markdownTable(
  ['notification path', 'runs', 'notify p50 ns, median', 'min', 'notify p99 ns, median', 'fastest single notify ns', 'request p50 ns, median', 'min', 'MMIO-exit notifications / all (last run)'],
  [row('ioeventfd'), row('mmio-exit'), row('qemu')],
));
const a = sum('mmio-exit', 'notifyNs');
const b = sum('ioeventfd', 'notifyNs');
process.stdout.write(`\nMMIO exit / ioeventfd, notify write: ${fmt(a.median / b.median, 2)}x of medians, ${fmt(a.min / b.min, 2)}x of minimums, `
  + `${fmt(pairedRatio(results['mmio-exit'].map((s) => s.notifyNs), results.ioeventfd.map((s) => s.notifyNs)), 2)}x median of pairs\n`);
const q = sum('qemu', 'requestNs');
const u = sum('ioeventfd', 'requestNs');
process.stdout.write(`Unhalt (ioeventfd) / QEMU, whole request: ${fmt(u.median / q.median, 2)}x of medians, ${fmt(u.min / q.min, 2)}x of minimums; `
  + `notify write: ${fmt(b.median / sum('qemu', 'notifyNs').median, 2)}x of medians\n`);
finishReport(opts.json, { bench: 'virtio-notify', host, rounds, runs: opts.runs, samples: results });

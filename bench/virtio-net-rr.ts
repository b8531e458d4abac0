// virtio-net request-response round trips over user networking (libslirp), Unhalt against QEMU
// on the same guest: the probe's own virtio-net driver (scenario net-udp-rr: DHCP, ARP, then
// `rounds` UDP datagrams to the gateway 10.0.2.2:PORT, each waited for until it comes back)
// against a UDP echo server on the host's 127.0.0.1:PORT (its own process, the same for both).
// Every round trip crosses the guest's driver, the device (notify, queues, MSI-X), libslirp and a
// host socket each way; the guest times each with the TSC. Both VMMs run as child processes
// (`unhalt run --net user`, QEMU q35 `-netdev user -device virtio-net-pci,disable-legacy=on`),
// alternating. Measured, not asserted.
//
//   node bench/virtio-net-rr.ts [--runs 5] [--rounds 1000] [--bytes 32] [--json FILE]
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  PROBE_ELF, QEMU, UNHALT_BIN, agentEvents, checkPrerequisites, describeHost, finishReport, fmt, hostInfo, isPvmHost, markdownTable,
  pairedRatio, parseBenchArgs, removeDir, runTimed, summarize, tempDir,
} from './lib.ts';

const USAGE = `usage: node bench/virtio-net-rr.ts [--runs 5] [--rounds 1000] [--bytes 32] [--json FILE]
UDP request-response round trips through virtio-net and libslirp: Unhalt vs QEMU, timed by the probe guest.
`;
const opts = parseBenchArgs(USAGE, 5, { rounds: '1000', bytes: '32' });
const rounds = Number(opts.rounds);
const bytes = Number(opts.bytes);
if (!Number.isInteger(rounds) || rounds < 1 || rounds > 1_000_000) throw new Error(`--rounds must be 1..1000000, got "${opts.rounds}"`);
if (!Number.isInteger(bytes) || bytes < 4 || bytes > 1400) throw new Error(`--bytes must be 4..1400, got "${opts.bytes}"`);
checkPrerequisites({ qemu: true });

const host = hostInfo();
process.stdout.write(describeHost(host));

type Vmm = 'unhalt' | 'qemu';
interface Sample { p50Ns: number; p99Ns: number; minNs: number; meanNs: number; lost: number }

/** The echo server: a process of its own, so neither VMM's event loop serves it. */
async function startEcho(): Promise<{ port: number; stop(): void }> {
  const child = spawn(process.execPath, ['-e', [
    "const s = require('dgram').createSocket('udp4');",
    's.on(\'message\', (m, r) => s.send(m, r.port, r.address));',
    "s.bind(0, '127.0.0.1', () => console.log(s.address().port));",
  ].join('\n')], { stdio: ['ignore', 'pipe', 'inherit'] });
  const port = await new Promise<number>((resolve, reject) => {
    child.stdout.once('data', (d: Buffer) => resolve(Number(d.toString().trim())));
    child.once('exit', (code) => reject(new Error(`the echo server exited (${code})`)));
  });
  return { port, stop: () => child.kill('SIGKILL') };
}

const dir = tempDir('virtio-net-rr');

async function run(vmm: Vmm, port: number): Promise<Sample> {
  const append = `scenario=net-udp-rr port=${port} rounds=${rounds} bytes=${bytes}`;
  const ttyS1 = join(dir, `${vmm}.ttyS1`);
  const r = vmm === 'unhalt'
    ? await runTimed(process.execPath, [UNHALT_BIN, 'run', '--guest', 'probe', '--cpus', '1', '--memory', '128', '--net', 'user',
      '--append', append, '--agent-log', ttyS1], { timeoutMs: 600_000 })
    : await runTimed(QEMU, [
      '-machine', 'q35', '-accel', 'kvm', '-cpu', 'host,-arch-capabilities', '-smp', '1', '-m', '128',
      '-nodefaults', '-no-user-config', '-display', 'none', '-no-reboot', '-device', 'isa-debug-exit,iobase=0xf4,iosize=4',
      '-kernel', PROBE_ELF, '-append', isPvmHost() ? `${append} unhalt.pvm=1` : append,
      '-netdev', 'user,id=n0', '-device', 'virtio-net-pci,disable-legacy=on,netdev=n0',
      '-serial', 'null', '-serial', `file:${ttyS1}`,
    ], { timeoutMs: 600_000 });
  if (r.code !== 0 && !(vmm === 'qemu' && r.code === 1)) throw new Error(`${vmm} exited with ${r.code ?? r.signal}: ${r.stderr.trim().slice(-300)}`);
  const f = agentEvents(readFileSync(ttyS1, 'utf8')).find((e) => e.event === 'net_udp_rr')?.fields;
  if (!f || f.ok !== 1 || f.rounds !== rounds) throw new Error(`${vmm}: the guest reported ${JSON.stringify(f)}`);
  return { p50Ns: f.p50_ns!, p99Ns: f.p99_ns!, minNs: f.min_ns!, meanNs: f.mean_ns!, lost: f.lost! };
}

const results: Record<Vmm, Sample[]> = { unhalt: [], qemu: [] };
const echo = await startEcho();
try {
  for (let i = 0; i < opts.runs; i++) {
    for (const vmm of (i % 2 === 0 ? ['unhalt', 'qemu'] : ['qemu', 'unhalt']) as Vmm[]) {
      const s = await run(vmm, echo.port);
      results[vmm].push(s);
      process.stderr.write(`run ${i + 1}/${opts.runs} ${vmm}: p50 ${s.p50Ns} ns, p99 ${s.p99Ns} ns, min ${s.minNs} ns, ${s.lost} lost\n`);
    }
  }
} finally {
  echo.stop();
  removeDir(dir);
}

const sum = (v: Vmm, k: keyof Sample) => summarize(results[v].map((s) => s[k]));
const row = (v: Vmm) => [v === 'qemu' ? 'QEMU q35 virtio-net-pci, -netdev user' : 'Unhalt, --net user', results[v].length,
  fmt(sum(v, 'p50Ns').median / 1000, 0), fmt(sum(v, 'p50Ns').min / 1000, 0), fmt(sum(v, 'p99Ns').median / 1000, 0),
  fmt(sum(v, 'minNs').min / 1000, 0), fmt(sum(v, 'meanNs').median / 1000, 0), results[v].reduce((a, s) => a + s.lost, 0)];
process.stdout.write(`\nUDP request-response through virtio-net and libslirp: ${rounds} round trips of ${bytes} bytes per run, 1 vCPU, ` +
  `${opts.runs} runs each, alternating; per run the guest's p50 / p99 / min / mean (TSC), then the median (and min) over runs\n\n`);
process.stdout.write(markdownTable(
  ['VMM', 'runs', 'round trip p50 µs, median', 'min of runs', 'p99 µs, median', 'fastest single µs', 'mean µs, median', 'lost'],
  [row('unhalt'), row('qemu')],
));
const u = sum('unhalt', 'p50Ns');
const q = sum('qemu', 'p50Ns');
process.stdout.write(`\nUnhalt / QEMU, round trip p50: ${fmt(u.median / q.median, 2)}x of medians, ${fmt(u.min / q.min, 2)}x of minimums, `
  + `${fmt(pairedRatio(results.unhalt.map((s) => s.p50Ns), results.qemu.map((s) => s.p50Ns)), 2)}x median of pairs (target <= 1.25x)\n`);
finishReport(opts.json, { bench: 'virtio-net-rr', host, rounds, bytes, runs: opts.runs, samples: results });

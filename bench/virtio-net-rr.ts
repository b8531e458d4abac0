// virtio-net request-response round trips over user networking (libslirp), Unhalt against QEMU
// on the same guest: the probe's own virtio-net driver against an echo server on the host's
// 127.0.0.1:PORT (its own process, the same for both VMMs). UDP (scenario net-udp-rr: DHCP, ARP,
// then `rounds` datagrams to the gateway 10.0.2.2:PORT, each waited for until it comes back) and
// TCP (scenario net-tcp-rr: one connection — handshake, `rounds` requests each echoed and ACKed,
// FIN — the guest's own minimal TCP, sequence numbers tracked, loss reported). Every round trip
// crosses the guest's driver, the device (notify, queues, MSI-X), libslirp and a host socket
// each way; the guest times each with the TSC. Both VMMs run as child processes (`unhalt run
// --net user`, QEMU q35 `-netdev user -device virtio-net-pci,disable-legacy=on`), alternating
// within each run. Measured, not asserted.
//
//   node bench/virtio-net-rr.ts [--proto udp|tcp|both] [--runs 5] [--rounds 1000] [--bytes 32] [--json FILE]
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  PROBE_ELF, QEMU, UNHALT_BIN, agentEvents, checkPrerequisites, describeHost, finishReport, fmt, hostInfo, isPvmHost, markdownTable,
  pairedRatio, parseBenchArgs, removeDir, runTimed, summarize, tempDir,
} from './lib.ts';

const USAGE = `usage: node bench/virtio-net-rr.ts [--proto udp|tcp|both] [--runs 5] [--rounds 1000] [--bytes 32] [--json FILE]
UDP and TCP request-response round trips through virtio-net and libslirp: Unhalt vs QEMU, timed by the probe guest.
`;
const opts = parseBenchArgs(USAGE, 5, { rounds: '1000', bytes: '32', proto: 'both' });
type Proto = 'udp' | 'tcp';
if (!['udp', 'tcp', 'both'].includes(opts.proto)) throw new Error(`--proto must be udp, tcp or both, got "${opts.proto}"`);
const protos: Proto[] = opts.proto === 'both' ? ['udp', 'tcp'] : [opts.proto as Proto];
const rounds = Number(opts.rounds);
const bytes = Number(opts.bytes);
if (!Number.isInteger(rounds) || rounds < 1 || rounds > 1_000_000) throw new Error(`--rounds must be 1..1000000, got "${opts.rounds}"`);
if (!Number.isInteger(bytes) || bytes < 4 || bytes > 1400) throw new Error(`--bytes must be 4..1400, got "${opts.bytes}"`);
checkPrerequisites({ qemu: true });

const host = hostInfo();
process.stdout.write(describeHost(host));

type Vmm = 'unhalt' | 'qemu';
interface Sample { p50Ns: number; p99Ns: number; minNs: number; meanNs: number; lost: number }

/** The echo servers (UDP and TCP on one port number each): a process of their own, so neither VMM's event loop serves them. */
async function startEcho(): Promise<{ port: Record<Proto, number>; stop(): void }> {
  const child = spawn(process.execPath, ['-e', [
    "const u = require('dgram').createSocket('udp4');",
    'u.on(\'message\', (m, r) => u.send(m, r.port, r.address));',
    // TCP: every byte back as it comes, no Nagle delay; the connection ends when the guest's does.
    "const t = require('net').createServer((c) => { c.setNoDelay(true); c.on('data', (d) => c.write(d)); c.on('end', () => c.end()); c.on('error', () => {}); });",
    "u.bind(0, '127.0.0.1', () => t.listen(0, '127.0.0.1', () => console.log(u.address().port, t.address().port)));",
  ].join('\n')], { stdio: ['ignore', 'pipe', 'inherit'] });
  const port = await new Promise<Record<Proto, number>>((resolve, reject) => {
    child.stdout.once('data', (d: Buffer) => {
      const [udp, tcp] = d.toString().trim().split(' ').map(Number);
      resolve({ udp: udp!, tcp: tcp! });
    });
    child.once('exit', (code) => reject(new Error(`the echo server exited (${code})`)));
  });
  return { port, stop: () => child.kill('SIGKILL') };
}

const dir = tempDir('virtio-net-rr');

const EVENT: Record<Proto, string> = { udp: 'net_udp_rr', tcp: 'net_tcp_rr' };

async function run(vmm: Vmm, proto: Proto, port: number): Promise<Sample> {
  const append = `scenario=net-${proto}-rr port=${port} rounds=${rounds} bytes=${bytes}`;
  const ttyS1 = join(dir, `${vmm}-${proto}.ttyS1`);
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
  const f = agentEvents(readFileSync(ttyS1, 'utf8')).find((e) => e.event === EVENT[proto])?.fields;
  if (!f || f.ok !== 1 || f.rounds !== rounds) throw new Error(`${vmm} ${proto}: the guest reported ${JSON.stringify(f)}`);
  // TCP has no loss to count (one lost segment ends the run: nothing retransmits): what it may report is reordering.
  return { p50Ns: f.p50_ns!, p99Ns: f.p99_ns!, minNs: f.min_ns!, meanNs: f.mean_ns!, lost: proto === 'udp' ? f.lost! : f.ooo! };
}

const results: Record<Proto, Record<Vmm, Sample[]>> = { udp: { unhalt: [], qemu: [] }, tcp: { unhalt: [], qemu: [] } };
const echo = await startEcho();
try {
  for (let i = 0; i < opts.runs; i++) {
    for (const proto of protos) {
      for (const vmm of (i % 2 === 0 ? ['unhalt', 'qemu'] : ['qemu', 'unhalt']) as Vmm[]) {
        const s = await run(vmm, proto, echo.port[proto]);
        results[proto][vmm].push(s);
        process.stderr.write(`run ${i + 1}/${opts.runs} ${proto} ${vmm}: p50 ${s.p50Ns} ns, p99 ${s.p99Ns} ns, min ${s.minNs} ns, ${s.lost} ${proto === 'udp' ? 'lost' : 'out of order'}\n`);
      }
    }
  }
} finally {
  echo.stop();
  removeDir(dir);
}

for (const proto of protos) {
  const res = results[proto];
  const sum = (v: Vmm, k: keyof Sample) => summarize(res[v].map((s) => s[k]));
  const name = proto.toUpperCase();
  const row = (v: Vmm) => [v === 'qemu' ? 'QEMU q35 virtio-net-pci, -netdev user' : 'Unhalt, --net user', res[v].length,
    fmt(sum(v, 'p50Ns').median / 1000, 0), fmt(sum(v, 'p50Ns').min / 1000, 0), fmt(sum(v, 'p99Ns').median / 1000, 0),
    fmt(sum(v, 'minNs').min / 1000, 0), fmt(sum(v, 'meanNs').median / 1000, 0), res[v].reduce((a, s) => a + s.lost, 0)];
  process.stdout.write(`\n${name} request-response through virtio-net and libslirp: ${rounds} round trips of ${bytes} bytes per run`
    + `${proto === 'tcp' ? ' on one connection' : ''}, 1 vCPU, ${opts.runs} runs each, alternating; per run the guest's p50 / p99 / min / mean (TSC), `
    + 'then the median (and min) over runs\n\n');
  process.stdout.write(markdownTable(
    ['VMM', 'runs', 'round trip p50 µs, median', 'min of runs', 'p99 µs, median', 'fastest single µs', 'mean µs, median', proto === 'udp' ? 'lost' : 'out of order'],
    [row('unhalt'), row('qemu')],
  ));
  const u = sum('unhalt', 'p50Ns');
  const q = sum('qemu', 'p50Ns');
  const up99 = sum('unhalt', 'p99Ns');
  const qp99 = sum('qemu', 'p99Ns');
  process.stdout.write(`\n${name} Unhalt / QEMU, round trip p50: ${fmt(u.median / q.median, 2)}x of medians, ${fmt(u.min / q.min, 2)}x of minimums, `
    + `${fmt(pairedRatio(res.unhalt.map((s) => s.p50Ns), res.qemu.map((s) => s.p50Ns)), 2)}x median of pairs; p99 ${fmt(up99.median / qp99.median, 2)}x of medians (target <= 1.25x)\n`);
}
finishReport(opts.json, { bench: 'virtio-net-rr', host, rounds, bytes, runs: opts.runs, protos, samples: results });

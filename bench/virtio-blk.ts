// virtio-blk side by side: 4 KiB random reads (IOPS, one request in flight) and sequential 64 KiB
// reads (throughput), timed by the probe guest's own driver (scenario=virtio-blk bench=1) under
// Unhalt (`unhalt run --disk IMG`, a real process) and under QEMU q35 with virtio-blk-pci on the
// same raw image, given as our QEMU export writes it (modern only: the probe knows no legacy
// interface). Runs alternate (ABBA), each its own VM; medians, minimums and the ratio of medians
// are reported. The image is written in full first so every read hits the page cache in both
// (what is compared is the VMMs, not the disk). Measured, not asserted.
//
//   node bench/virtio-blk.ts [--runs 5] [--ops 2000] [--seq-kib 16384] [--json FILE]
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  PROBE_ELF, QEMU, UNHALT_BIN, agentEvents, describeHost, finishReport, fmt, hostInfo, isPvmHost, markdownTable, pairedRatio, parseBenchArgs,
  removeDir, runTimed, summarize, tempDir,
} from './lib.ts';

const USAGE = `usage: node bench/virtio-blk.ts [--runs 5] [--ops 2000] [--seq-kib 16384] [--json FILE]
virtio-blk 4 KiB random-read IOPS and sequential-read throughput: Unhalt vs QEMU q35, the probe guest's driver.
`;
const opts = parseBenchArgs(USAGE, 5, { ops: '2000', 'seq-kib': '16384' });
const ops = Number(opts.ops);
const seqKib = Number(opts['seq-kib']);
if (!Number.isInteger(ops) || ops < 1 || ops > 1_000_000) throw new Error(`--ops must be 1..1000000, got "${opts.ops}"`);
if (!Number.isInteger(seqKib) || seqKib < 64 || seqKib > 4_194_304) throw new Error(`--seq-kib must be 64..4194304, got "${opts['seq-kib']}"`);

const host = hostInfo();
process.stdout.write(describeHost(host));

type Who = 'unhalt' | 'qemu';
interface Sample { iops: number; seqKibPerS: number; randNs: number; seqNs: number }

const dir = tempDir('virtio-blk');
const image = join(dir, 'bench.img');
// 64 MiB of data (not a sparse file): reads copy real pages in both VMMs.
writeFileSync(image, Buffer.alloc(64 * 1024 * 1024, 0x5a));
const append = `scenario=virtio-blk bench=1 ops=${ops} seq_kib=${seqKib}${isPvmHost() ? ' unhalt.pvm=1' : ''}`;

function parse(who: Who, ttyS1: string): Sample {
  const f = agentEvents(ttyS1).find((e) => e.event === 'virtio_blk_bench')?.fields;
  if (!f || f.ops !== ops) throw new Error(`${who}: the guest reported ${JSON.stringify(f)} (${ttyS1.slice(-300)})`);
  return { iops: f.iops!, seqKibPerS: f.seq_kib_per_s!, randNs: f.rand_ns!, seqNs: f.seq_ns! };
}

async function run(who: Who): Promise<Sample> {
  const ttyS1 = join(dir, `${who}.ttyS1`);
  if (who === 'qemu') {
    const r = await runTimed(QEMU, [
      '-machine', 'q35', '-accel', 'kvm', '-cpu', 'host,-arch-capabilities', '-smp', '1', '-m', '128',
      '-nodefaults', '-no-user-config', '-display', 'none', '-no-reboot', '-device', 'isa-debug-exit,iobase=0xf4,iosize=4',
      '-kernel', PROBE_ELF, '-append', append,
      '-drive', `file=${image},if=none,id=disk0,format=raw`, '-device', 'virtio-blk-pci,drive=disk0,disable-legacy=on',
      '-serial', 'null', '-serial', `file:${ttyS1}`,
    ], { timeoutMs: 600_000 });
    if (r.code !== 0 && r.code !== 1) throw new Error(`QEMU exited with ${r.code ?? r.signal}: ${r.stderr.trim()}`);
  } else {
    const r = await runTimed(process.execPath, [UNHALT_BIN, 'run', '--guest', 'probe', '--memory', '128', '--append', append.replace(' unhalt.pvm=1', ''),
      '--disk', image, '--agent-log', ttyS1], { timeoutMs: 600_000 });
    if (r.code !== 0) throw new Error(`unhalt run exited with ${r.code ?? r.signal}: ${r.stderr.trim()}`);
  }
  return parse(who, readFileSync(ttyS1, 'utf8'));
}

const results: Record<Who, Sample[]> = { unhalt: [], qemu: [] };
try {
  for (let i = 0; i < opts.runs; i++) {
    for (const who of (i % 2 === 0 ? ['unhalt', 'qemu'] : ['qemu', 'unhalt']) as Who[]) {
      const s = await run(who);
      results[who].push(s);
      process.stderr.write(`run ${i + 1}/${opts.runs} ${who}: ${s.iops} IOPS (4 KiB random), ${fmt(s.seqKibPerS / 1024, 1)} MiB/s (64 KiB sequential)\n`);
    }
  }
} finally {
  removeDir(dir);
}

const sum = (w: Who, k: keyof Sample) => summarize(results[w].map((s) => s[k]));
const row = (w: Who) => {
  const i = sum(w, 'iops');
  const t = sum(w, 'seqKibPerS');
  return [w === 'qemu' ? 'QEMU q35, virtio-blk-pci (raw, its ioeventfd)' : 'Unhalt (unhalt run --disk)', i.n, fmt(i.median, 0), fmt(i.max, 0),
    fmt(1e6 / i.median, 0), fmt(t.median / 1024, 1), fmt(t.max / 1024, 1)];
};
process.stdout.write(`\nvirtio-blk, probe guest driver, 1 vCPU, one request in flight; ${ops} random 4 KiB reads and ${seqKib} KiB of sequential 64 KiB reads per run, ` +
  `${opts.runs} runs each, alternating; a 64 MiB raw image in the page cache\n\n`);
process.stdout.write(markdownTable(
  ['VMM', 'runs', '4 KiB random-read IOPS, median', 'best', 'µs per request (median)', 'sequential MiB/s, median', 'best'],
  [row('unhalt'), row('qemu')],
));
const ratio = (k: 'iops' | 'seqKibPerS') => `${fmt(sum('unhalt', k).median / sum('qemu', k).median, 2)}x of medians, `
  + `${fmt(pairedRatio(results.unhalt.map((s) => s[k]), results.qemu.map((s) => s[k])), 2)}x median of pairs`;
process.stdout.write(`\nUnhalt / QEMU: IOPS ${ratio('iops')}; sequential throughput ${ratio('seqKibPerS')}\n`);
finishReport(opts.json, { bench: 'virtio-blk', host, ops, seqKib, runs: opts.runs, samples: results });

// How long `unhalt import` takes on a distribution cloud image (native/guest/linux/
// build-cloud-image.mjs: Debian's systemd, cloud-init, kernel; ~860 MiB raw, ~480 MiB used), as
// raw and as qcow2, against what a user would do by hand for the same result: `qemu-img convert`
// (the qcow2's floor) and two debugfs dumps of /boot's kernel and initrd. Alternating in one run;
// medians (minimum in brackets). Measured, not asserted.
//
//   node bench/import.ts [--runs 5] [--json FILE]
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { UNHALT_BIN, describeHost, finishReport, fmt, hostInfo, markdownTable, parseBenchArgs, removeDir, summarize, tempDir } from './lib.ts';

const USAGE = `usage: node bench/import.ts [--runs 5] [--json FILE]
unhalt import of a cloud image (raw and qcow2) against qemu-img convert and debugfs dumps by hand.
`;
const opts = parseBenchArgs(USAGE, 5, {});
const runs = Number(opts.runs);
const image = join(import.meta.dirname, '..', 'assets', 'guests', 'linux', 'cloud-image.raw');
const stamp = JSON.parse(readFileSync(image.replace(/\.raw$/, '.json'), 'utf8')) as { vmlinuz: string; initrd: string };
const host = hostInfo();
process.stdout.write(describeHost(host));
const dir = tempDir('import');
const qcow2 = join(dir, 'cloud.qcow2');
const must = (cmd: string, args: string[], env?: NodeJS.ProcessEnv) => {
  const t = performance.now();
  const r = spawnSync(cmd, args, { encoding: 'utf8', env: { ...process.env, ...env } });
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(' ')}: ${r.stderr}`);
  return performance.now() - t;
};
must('qemu-img', ['convert', '-f', 'raw', '-O', 'qcow2', image, qcow2]);
const key = join(dir, 'key.pub');
spawnSync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-f', key.replace(/\.pub$/, '')]);
// The root partition's offset, as the import finds it (sfdisk's view of partition 1).
const table = JSON.parse(spawnSync('sfdisk', ['--json', image], { encoding: 'utf8' }).stdout) as { partitiontable: { partitions: { node: string; start: number }[] } };
const offset = table.partitiontable.partitions.find((p) => /1$/.test(p.node) && !/1[45]$/.test(p.node))!.start * 512;

const times: Record<string, number[]> = { 'import raw': [], 'import qcow2': [], 'by hand: debugfs dump kernel + initrd': [], 'by hand: qemu-img convert + dumps': [] };
for (let i = 0; i < runs; i++) {
  const home = join(dir, `home-${i}`);
  times['import raw']!.push(must(process.execPath, [UNHALT_BIN, 'import', image, '--ssh-key', key, '--name', `raw-${i}`], { UNHALT_HOME: home }));
  const dumps = () => must('debugfs', ['-R', `dump ${stamp.vmlinuz} ${join(dir, 'k')}`, `${image}?offset=${offset}`])
    + must('debugfs', ['-R', `dump ${stamp.initrd} ${join(dir, 'i')}`, `${image}?offset=${offset}`]);
  times['by hand: debugfs dump kernel + initrd']!.push(dumps());
  times['import qcow2']!.push(must(process.execPath, [UNHALT_BIN, 'import', qcow2, '--ssh-key', key, '--name', `q-${i}`], { UNHALT_HOME: home }));
  const raw = join(dir, `by-hand-${i}.raw`);
  times['by hand: qemu-img convert + dumps']!.push(must('qemu-img', ['convert', '-f', 'qcow2', '-O', 'raw', qcow2, raw]) + dumps());
  removeDir(raw);
  removeDir(home);
}
process.stdout.write(`\n${markdownTable(['what', 'median ms', 'min ms', 'runs'], Object.entries(times).map(([k, v]) => { const s = summarize(v); return [k, fmt(s.median, 0), fmt(s.min, 0), s.n]; }))}`);
const ratio = (a: string, b: string) => summarize(times[a]!).median / summarize(times[b]!).median;
process.stdout.write(`\nimport raw / by hand ${fmt(ratio('import raw', 'by hand: debugfs dump kernel + initrd'), 2)}x; import qcow2 / by hand ${fmt(ratio('import qcow2', 'by hand: qemu-img convert + dumps'), 2)}x\n`);
removeDir(dir);
finishReport(opts.json, { host, times });

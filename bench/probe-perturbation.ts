// How much the Linux agent's live context-switch probe (`probe on`, default duty cycle: a burst
// of 100 pipe round trips every second) perturbs a workload. Target: under 2%.
//
// On a PVM host no Linux guest boots, so this runs the agent and the workload as host
// processes (the same C sources as in the guest, built by `npm run build:linux`): pipe
// (perf-bench-like) alone vs with the probe running, alternating, at least 10 runs each.
//   node bench/probe-perturbation.ts [--runs N] [--loops N]
import { spawn, spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const { values } = parseArgs({ options: { runs: { type: 'string', default: '10' }, loops: { type: 'string', default: '300000' } } });
const runs = Number(values.runs);
const loops = Number(values.loops);
const host = fileURLToPath(new URL('../assets/guests/linux/host/', import.meta.url));
const workload = `${host}unhalt-workload`;
const agent = `${host}unhalt-agent`;
if (!existsSync(workload) || !existsSync(agent)) {
  console.error('build the host workloads first: npm run build:linux');
  process.exit(1);
}

function pipeMs(): number {
  const r = spawnSync(workload, ['pipe', `loops=${loops}`], { encoding: 'utf8' });
  const m = /@u1 pipe .*total_ns=(\d+)/.exec(r.stdout);
  if (!m) throw new Error(`pipe workload failed: ${r.stderr || r.stdout}`);
  return Number(m[1]) / 1e6;
}

async function withProbe<T>(fn: () => T): Promise<{ value: T; bursts: number }> {
  const p = spawn(agent, ['--stdio'], { stdio: ['pipe', 'pipe', 'ignore'] });
  let out = '';
  p.stdout.on('data', (d) => { out += d; });
  p.stdin.write('probe on\n');
  await new Promise((r) => setTimeout(r, 1200)); // let the probe settle into its cycle
  const value = fn();
  p.stdin.end('probe off\n');
  p.kill('SIGTERM');
  await new Promise((r) => p.once('close', r));
  return { value, bursts: (out.match(/@u1 ctxprobe/g) ?? []).length };
}

const median = (xs: number[]) => { const s = [...xs].sort((a, b) => a - b); const m = s.length >> 1; return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2; };
const plain: number[] = [];
const probed: number[] = [];
let bursts = 0;
for (let i = 0; i < runs; i++) {
  // Alternate the order every round so drift in the machine's load cancels out.
  if (i % 2 === 0) { plain.push(pipeMs()); const r = await withProbe(pipeMs); probed.push(r.value); bursts += r.bursts; }
  else { const r = await withProbe(pipeMs); probed.push(r.value); bursts += r.bursts; plain.push(pipeMs()); }
  process.stderr.write(`\rrun ${i + 1}/${runs}`);
}
process.stderr.write('\n');
const a = median(plain);
const b = median(probed);
console.log(`| pipe ${loops} loops (host) | median ms | min ms | max ms |`);
console.log('| --- | ---: | ---: | ---: |');
console.log(`| alone | ${a.toFixed(1)} | ${Math.min(...plain).toFixed(1)} | ${Math.max(...plain).toFixed(1)} |`);
console.log(`| with the live probe (1 burst of 100 round trips per s) | ${b.toFixed(1)} | ${Math.min(...probed).toFixed(1)} | ${Math.max(...probed).toFixed(1)} |`);
console.log(`\nperturbation: ${(((b / a) - 1) * 100).toFixed(2)}% (target < 2%), probe bursts seen: ${bursts}`);

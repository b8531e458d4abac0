// Host contention's busy processes (experiments/contention.ts), as real processes: pinned where
// asked, their CPU counted, ended by stop(), and ending by themselves when the process that
// started them dies without stopping them (a killed service or CLI leaves no loop spinning).
import { spawn, spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { Contention, busyLoop } from '../../electron/experiments/contention.ts';
import { allowedHostCpus } from '../../native/kvm/affinity.ts';
import { scaled } from '../support/time-scale.ts';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const loopsOf = (parent: number) => spawnSync('pgrep', ['-f', '-x', `/bin/sh -c ${busyLoop(parent)}`], { encoding: 'utf8' }).stdout.trim().split('\n').filter(Boolean).map(Number);

describe('host contention', () => {
  it('starts busy processes pinned to the CPUs given, counts their CPU, and stop() ends them (twice is once)', async () => {
    const cpu = allowedHostCpus()[0]!;
    const c = Contention.start(2, [cpu]);
    const pids = loopsOf(process.pid);
    expect(pids).toHaveLength(2);
    for (const pid of pids) expect(readFileSync(`/proc/${pid}/status`, 'utf8')).toMatch(new RegExp(`^Cpus_allowed_list:\\s+${cpu}$`, 'm'));
    await sleep(300);
    const cpuNs = await c.stop();
    expect(cpuNs).toBeGreaterThan(0);
    expect(await c.stop()).toBe(cpuNs);
    expect(loopsOf(process.pid)).toEqual([]);
  });

  it('leaves nothing spinning when the process that started it is killed', async () => {
    const script = `const { Contention } = await import(${JSON.stringify(new URL('../../electron/experiments/contention.ts', import.meta.url).href)});
Contention.start(1, [${allowedHostCpus()[0]}]); console.log('started'); setInterval(() => {}, 1000);`;
    const child = spawn(process.execPath, ['--input-type=module', '-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
    await new Promise<void>((resolve, reject) => {
      child.stdout!.on('data', (d: Buffer) => { if (String(d).includes('started')) resolve(); });
      child.on('exit', (code) => reject(new Error(`the child exited (${code}) before it started contention`)));
    });
    expect(loopsOf(child.pid!)).toHaveLength(1);
    child.kill('SIGKILL');
    const deadline = performance.now() + scaled(10_000);
    while (loopsOf(child.pid!).length && performance.now() < deadline) await sleep(50);
    expect(loopsOf(child.pid!)).toEqual([]);
  });
});

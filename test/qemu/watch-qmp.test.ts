// `unhalt watch qmp:PATH` against a real QEMU (microvm, KVM) running the probe guest's `timer
// live=1` on 2 vCPUs with a QMP socket: the NDJSON records per vCPU agree with the test's own
// query-stats read over a raw socket (not the client under test), a socket the test holds is
// refused in one line, a QEMU killed mid-watch ends the watch with exit 0, a missing socket is one
// line with exit 1, and the client refuses a command that is not read-only without sending it.
// `unhalt watch --list` finds the QEMU, watchable, and held while the test holds its socket.
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { QmpClient } from '../../electron/watch/qmp-client.ts';
import { UNHALT_BIN, runCli } from '../support/cli.ts';
import { type Qemu, qemuSkipReason, startQemu } from '../support/qemu-probe.ts';
import { scaled } from '../support/time-scale.ts';

const skip = qemuSkipReason();
if (skip) console.warn(`skipping the QMP watch tests: ${skip}`);
const APPEND = 'scenario=timer live=1 unhalt.pvm=1';

/** A raw QMP session of the test's own: greeting, capabilities, one command at a time. */
async function rawSession(path: string): Promise<{ socket: Socket; execute(cmd: string, args?: object): Promise<any> }> {
  const socket = connect(path);
  let buf = '';
  const waiting: ((msg: any) => void)[] = [];
  socket.on('data', (d) => {
    buf += d.toString();
    for (let nl = buf.indexOf('\n'); nl >= 0; nl = buf.indexOf('\n')) {
      const msg = JSON.parse(buf.slice(0, nl));
      buf = buf.slice(nl + 1);
      if (!('event' in msg)) waiting.shift()?.(msg);
    }
  });
  const next = () => new Promise<any>((resolve) => waiting.push(resolve));
  await new Promise<void>((resolve, reject) => {
    socket.once('error', reject);
    void next().then(() => { socket.off('error', reject); resolve(); }); // the greeting
  });
  socket.on('error', () => {});
  const execute = async (cmd: string, args?: object) => {
    const reply = next();
    socket.write(`${JSON.stringify({ execute: cmd, ...(args ? { arguments: args } : {}) })}\n`);
    const msg = await reply;
    if (msg.error) throw new Error(msg.error.desc);
    return msg.return;
  };
  await execute('qmp_capabilities');
  return { socket, execute };
}

/** halt_exits per cpu-index, straight from QEMU. */
async function directHaltExits(path: string): Promise<number[]> {
  const s = await rawSession(path);
  try {
    const cpus: { 'qom-path': string; 'cpu-index': number }[] = await s.execute('query-cpus-fast');
    const stats: { 'qom-path': string; stats: { name: string; value: number }[] }[] =
      await s.execute('query-stats', { target: 'vcpu', providers: [{ provider: 'kvm', names: ['halt_exits'] }] });
    const out: number[] = [];
    for (const r of stats) out[cpus.find((c) => c['qom-path'] === r['qom-path'])!['cpu-index']] = r.stats[0]!.value;
    return out;
  } finally {
    s.socket.destroy();
  }
}

async function waitForSocket(path: string): Promise<void> {
  const deadline = performance.now() + scaled(15_000);
  for (;;) {
    try { (await rawSession(path)).socket.destroy(); return; } catch (e) {
      if (performance.now() > deadline) throw e;
      await new Promise((r) => setTimeout(r, 100));
    }
  }
}

function records(file: string): Record<string, any>[] {
  return readFileSync(file, 'utf8').trim().split('\n').filter(Boolean).map((l) => JSON.parse(l));
}

describe.skipIf(!!skip)('unhalt watch qmp:PATH against a real QEMU', () => {
  let dir: string;
  let sock: string;
  let qemu: Qemu;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'unhalt-watch-'));
    sock = join(dir, 'qmp.sock');
    qemu = startQemu(2, APPEND, scaled(120_000), { args: ['-qmp', `unix:${sock},server=on,wait=off`, '-name', 'watched'] });
    await waitForSocket(sock);
  });

  afterAll(async () => {
    qemu?.kill();
    await qemu?.done.catch(() => {});
    rmSync(dir, { recursive: true, force: true });
  });

  it('writes per-vCPU records as run --stats does, agreeing with QEMU own query-stats', async () => {
    const file = join(dir, 'watch.ndjson');
    const before = await directHaltExits(sock);
    const r = await runCli(['watch', `qmp:${sock}`, '--stats', file, '--interval', '200', '--duration', '3']);
    const after = await directHaltExits(sock);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toContain(`through ${sock}`);
    expect(r.stderr).toContain('watched for 3 s');
    const lines = records(file);
    for (const vcpu of [0, 1]) {
      const mine = lines.filter((l) => l.vcpu === vcpu);
      // 3 s at 200 ms: about 15 intervals; a loaded host may stretch a few.
      expect(mine.length).toBeGreaterThanOrEqual(5);
      expect(mine.length).toBeLessThanOrEqual(16);
      for (const l of mine) {
        expect(l).toHaveProperty('interval_ms');
        expect(l.interval_ms).toBeGreaterThanOrEqual(190);
        expect(l).toHaveProperty('halt_exits_per_s');
        expect(l).toHaveProperty('halt_wait_ns_delta');
        expect(l).toHaveProperty('poll_hit_rate');
        for (const h of ['halt_wait_hist', 'halt_poll_success_hist', 'halt_poll_fail_hist']) {
          expect(Array.isArray(l[h])).toBe(true);
          expect(l[h].every((n: number) => Number.isInteger(n) && n >= 0)).toBe(true);
        }
      }
      // Cumulative, monotonic, inside the test's two direct reads.
      for (let i = 1; i < mine.length; i++) {
        expect(mine[i]!.t).toBeGreaterThan(mine[i - 1]!.t);
        expect(mine[i]!.halt_exits).toBeGreaterThanOrEqual(mine[i - 1]!.halt_exits);
      }
      expect(mine[0]!.halt_exits).toBeGreaterThanOrEqual(before[vcpu]!);
      expect(mine.at(-1)!.halt_exits).toBeLessThanOrEqual(after[vcpu]!);
      // The rates add up to the counter's movement between the first and the last record.
      const moved = mine.at(-1)!.halt_exits - mine[0]!.halt_exits;
      const fromRates = mine.slice(1).reduce((s, l) => s + (l.halt_exits_per_s * l.interval_ms) / 1000, 0);
      expect(fromRates).toBeCloseTo(moved, 0);
    }
    // The guest halts all along: the watched movement is real and of the direct reads' magnitude.
    const watched = [0, 1].reduce((s, v) => { const m = lines.filter((l) => l.vcpu === v); return s + m.at(-1)!.halt_exits - m[0]!.halt_exits; }, 0);
    const direct = after[0]! + after[1]! - before[0]! - before[1]!;
    expect(watched).toBeGreaterThan(0);
    expect(watched).toBeLessThanOrEqual(direct);
    expect(watched).toBeGreaterThanOrEqual(direct / 10);
    const waits = lines.flatMap((l) => l.halt_wait_hist as number[]).reduce((a, b) => a + b, 0);
    expect(waits).toBeGreaterThan(0);
  });

  it('refuses a socket another client holds, in one line naming it, exit 1', async () => {
    const holder = await rawSession(sock);
    try {
      const r = await runCli(['watch', `qmp:${sock}`, '--interval', '200', '--duration', '1']);
      expect(r.code).toBe(1);
      const lines = r.stderr.trim().split('\n');
      expect(lines, r.stderr).toHaveLength(1);
      expect(lines[0]).toContain(sock);
      expect(lines[0]).toContain('another client holds the socket');
    } finally {
      holder.socket.destroy();
    }
    // Held only while the test held it: QEMU serves the next client again.
    await waitForSocket(sock);
  });

  it('--list names this QEMU with its socket to watch, and as held while a client holds it', async () => {
    const listed = async () => {
      const r = await runCli(['watch', '--list', '--json']);
      expect(r.code, r.stderr).toBe(0);
      return (JSON.parse(r.stdout) as { pid: number; sockets: object[] }[]).find((p) => p.pid === qemu.pid);
    };
    const free = await listed();
    expect(free).toMatchObject({ name: 'watched', accel: 'kvm', kvm: true });
    expect(free!.sockets).toEqual([{ path: sock, boundAs: sock, via: '-qmp', libvirtMonitor: false, watchable: true, target: `qmp:${sock}` }]);
    const holder = await rawSession(sock);
    try {
      expect((await listed())!.sockets[0]).toMatchObject({ watchable: false, why: expect.stringContaining('another client holds the socket') });
    } finally {
      holder.socket.destroy();
    }
    await waitForSocket(sock);
  });

  it('the client refuses a command that is not read-only, and QEMU runs on', async () => {
    const qmp = await QmpClient.connect(sock);
    try {
      await expect(qmp.execute('quit')).rejects.toThrow('"quit" is not a read-only QMP command');
      await expect(qmp.execute('stop')).rejects.toThrow('not a read-only QMP command');
      expect(await qmp.execute('query-status')).toMatchObject({ status: 'running' });
    } finally {
      qmp.close();
    }
  });

  it('SIGINT stops the watch with exit 130, the stats file complete and QEMU running on', async () => {
    const file = join(dir, 'sigint.ndjson');
    const child = spawn(process.execPath, [UNHALT_BIN, 'watch', `qmp:${sock}`, '--stats', file, '--interval', '200'], { stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    const code = new Promise<number | null>((resolve) => child.on('close', resolve));
    await new Promise<void>((resolve, reject) => {
      const killer = setTimeout(() => { child.kill('SIGKILL'); reject(new Error(`no start line: ${stderr}`)); }, scaled(30_000));
      child.stderr.on('data', (d) => { stderr += d; if (stderr.includes('read-only')) { clearTimeout(killer); resolve(); } });
    });
    // Two samples of vCPU 0 written, however slow the host (a fixed wait is a race in L1).
    const deadline = performance.now() + scaled(30_000);
    const sampledTwice = () => {
      try {
        return records(file).filter((l) => l.vcpu === 0).length >= 2;
      } catch {
        return false;
      }
    };
    while (!sampledTwice() && performance.now() < deadline) await new Promise((r) => setTimeout(r, 100));
    child.kill('SIGINT');
    expect(await code, stderr).toBe(130);
    expect(stderr).toContain('SIGINT: stopped watching; the VM runs on');
    const lines = records(file);
    expect(lines.filter((l) => l.vcpu === 0).length).toBeGreaterThanOrEqual(2);
    const s = await rawSession(sock);
    try { expect(await s.execute('query-status')).toMatchObject({ status: 'running' }); } finally { s.socket.destroy(); }
  });

  it('a non-existent socket path is one line, exit 1', async () => {
    const missing = join(dir, 'none.sock');
    const r = await runCli(['watch', `qmp:${missing}`]);
    expect(r.code).toBe(1);
    expect(r.stderr.trim().split('\n'), r.stderr).toHaveLength(1);
    expect(r.stderr).toContain(`no QMP socket at ${missing}`);
  });

  it('ends cleanly, exit 0, when the watched QEMU is killed mid-watch', async () => {
    const sock2 = join(dir, 'qmp2.sock');
    const file = join(dir, 'vanish.ndjson');
    const q2 = startQemu(2, APPEND, scaled(60_000), { args: ['-qmp', `unix:${sock2},server=on,wait=off`] });
    try {
      await waitForSocket(sock2);
      const watch = runCli(['watch', `qmp:${sock2}`, '--stats', file, '--interval', '200']);
      // Killed once the watch has sampled both vCPUs (a fixed wait lost the race in a slow L1,
      // where the CLI's own start took longer: QEMU was gone before the watch connected).
      const sampledBoth = () => {
        try {
          const l = records(file);
          return l.some((x) => x.vcpu === 0) && l.some((x) => x.vcpu === 1);
        } catch {
          return false;
        }
      };
      const deadline = performance.now() + scaled(60_000);
      while (!sampledBoth() && performance.now() < deadline) await new Promise((r) => setTimeout(r, 100));
      q2.kill();
      const r = await watch;
      expect(r.code, r.stderr).toBe(0);
      expect(r.stderr).toContain(`QEMU closed its QMP socket ${sock2} (the VM exited); the watch ended`);
      const lines = records(file);
      expect(lines.some((l) => l.vcpu === 0)).toBe(true);
      expect(lines.some((l) => l.vcpu === 1)).toBe(true);
    } finally {
      q2.kill();
      await q2.done.catch(() => {});
    }
  });
});

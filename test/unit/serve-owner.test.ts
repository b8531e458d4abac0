// One owner per UNHALT_HOME (finding 5 of issue 13): two `unhalt serve` racing on one home — exactly
// one wins, the other exits 1 naming it; the owner lock dies with its process (SIGKILL leaves no
// stale owner); in-process, a second service on the same home is refused until the first shuts down.
import { spawn, spawnSync } from 'node:child_process';
import { mkdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { HomeBusyError, ownerLockPath, ownPidNamespace } from '../../electron/service/home-owner.ts';
import { createService } from '../../electron/service/service.ts';
import { UNHALT_BIN } from '../support/cli.ts';
import { kvmAvailable } from '../support/probe.ts';
import { serveEnv, startServe, type ServeChild } from '../support/serve-child.ts';
import { removeTempHomes, tempHome } from '../support/temp-home.ts';

afterAll(removeTempHomes);

async function stop(s: ServeChild, signal: NodeJS.Signals = 'SIGTERM') {
  s.child.kill(signal);
  return s.exited;
}

describe('one owner per UNHALT_HOME', () => {
  it('two serves racing: exactly one wins, the other exits 1 naming it; after the winner is SIGKILLed a new serve starts', async () => {
    const rounds = 3;
    for (let round = 0; round < rounds; round++) {
      const home = tempHome('owner');
      const racers = [startServe(home), startServe(home)];
      const urls = await Promise.all(racers.map((r) => r.url));
      const winners = racers.filter((_, i) => urls[i] !== undefined);
      expect(winners, racers.map((r) => r.stderr()).join('\n')).toHaveLength(1);
      const winner = winners[0]!;
      const loser = racers.find((r) => r !== winner)!;
      expect((await loser.exited).code).toBe(1);
      const refusal = loser.stderr().trim();
      expect(refusal).toMatch(new RegExp(`^unhalt: ${home.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')} is in use by another Unhalt process \\(pid ${winner.child.pid}, unhalt serve, since \\S+`));
      expect(refusal.split('\n')).toHaveLength(1);

      // Once the winner listens, a latecomer is also told where: its host-mode origin, never the token.
      const url = urls.find((u) => u !== undefined)!;
      const late = startServe(home);
      expect(await late.url).toBeUndefined();
      expect((await late.exited).code).toBe(1);
      expect(late.stderr()).toContain(`host mode at ${url.origin}`);
      expect(late.stderr()).not.toContain(url.searchParams.get('token')!);
      const lockText = readFileSync(join(home, 'owner.lock'), 'utf8');
      expect(JSON.parse(lockText)).toMatchObject({ pid: winner.child.pid, command: 'unhalt serve', address: url.origin });

      // SIGKILL: no clean-up ran, and still no stale owner.
      expect((await stop(winner, 'SIGKILL')).signal).toBe('SIGKILL');
      const next = startServe(home);
      expect(await next.url, next.stderr()).toBeInstanceOf(URL);
      expect((await stop(next)).code).toBe(0);
    }
  }, 120_000);

  // A dry run resolves the VM against the host's KVM: where there is none it ends at that, before the library matters.
  it.skipIf(!kvmAvailable)('`unhalt run` does not own the library and is not refused beside a serve', async () => {
    const home = tempHome('owner-run');
    const serve = startServe(home);
    expect(await serve.url).toBeInstanceOf(URL);
    const r = spawnSync(process.execPath, [UNHALT_BIN, 'run', '--guest', 'probe', '--dry-run'], { env: serveEnv(home), encoding: 'utf8' });
    expect(r.stderr).not.toMatch(/in use/);
    expect(r.status).toBe(0);
    expect((await stop(serve)).code).toBe(0);
  }, 60_000);

  it('in one process: a second service on the same home is refused until the first shuts down', async () => {
    const home = tempHome('owner-svc');
    const first = await createService({ home, ownerCommand: 'first' });
    const refused = await createService({ home }).then(() => undefined, (e: unknown) => e);
    expect(refused).toBeInstanceOf(HomeBusyError);
    expect((refused as HomeBusyError).owner).toMatchObject({ pid: process.pid, command: 'first' });
    await first.shutdown();
    const second = await createService({ home });
    await second.shutdown();
  });

  // CI runs as root, where unshare(1) makes a PID namespace; elsewhere the check needs root.
  it.skipIf(process.getuid?.() !== 0)('an owner in another PID namespace (a container) is named as such, not as this namespace\'s pid 1 (issue 30 #15)', async () => {
    const home = tempHome('owner-ns');
    const child = spawn('unshare', ['--pid', '--fork', '--kill-child=SIGTERM', '--mount-proc', process.execPath, UNHALT_BIN, 'serve', '--no-open'], { env: serveEnv(home), stdio: ['ignore', 'pipe', 'pipe'] });
    const exited = new Promise((resolve) => child.on('close', resolve));
    try {
      await new Promise<void>((resolve, reject) => {
        let out = '';
        child.stdout!.on('data', (d) => { out += d; if (out.includes('\n')) resolve(); });
        child.on('close', () => reject(new Error(`serve in a PID namespace ended before it listened: ${out}`)));
      });
      const refused = await createService({ home }).then(() => undefined, (e: unknown) => e);
      expect(refused).toBeInstanceOf(HomeBusyError);
      const owner = (refused as HomeBusyError).owner!;
      expect(owner.pid).toBe(1);
      expect(owner.pidNs).toMatch(/^pid:\[\d+\]$/);
      expect(owner.pidNs).not.toBe(ownPidNamespace());
      expect((refused as Error).message).toContain(`(pid 1 in another PID namespace (${owner.pidNs}: a container or sandbox; this process is in ${ownPidNamespace()}), unhalt serve, since `);
    } finally {
      // unshare(1) waits out SIGTERM for its child; killed, it has the child sent SIGTERM (--kill-child).
      child.kill('SIGKILL');
      await exited;
    }
  }, 60_000);

  it('a directory, symbolic link or FIFO where owner.lock goes is named with its fix, never followed or blocked on', async () => {
    const dir = tempHome('owner-dir');
    mkdirSync(ownerLockPath(dir));
    await expect(createService({ home: dir })).rejects.toThrow(`${ownerLockPath(dir)} is a directory, which Unhalt never makes there: remove it (rmdir ${ownerLockPath(dir)}) and start again`);
    const link = tempHome('owner-link');
    writeFileSync(join(link, 'elsewhere'), '');
    symlinkSync(join(link, 'elsewhere'), ownerLockPath(link));
    await expect(createService({ home: link })).rejects.toThrow(`${ownerLockPath(link)} is a symbolic link, which Unhalt never makes there`);
    const fifo = tempHome('owner-fifo');
    expect(spawnSync('mkfifo', [ownerLockPath(fifo)]).status).toBe(0);
    await expect(createService({ home: fifo })).rejects.toThrow(`${ownerLockPath(fifo)} is no regular file (a FIFO or a device)`);
  });
});

// One owner per UNHALT_HOME (finding 5 of issue 13): two `unhalt serve` racing on one home — exactly
// one wins, the other exits 1 naming it; the owner lock dies with its process (SIGKILL leaves no
// stale owner); in-process, a second service on the same home is refused until the first shuts down.
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { HomeBusyError } from '../../electron/service/home-owner.ts';
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
});

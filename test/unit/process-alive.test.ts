// pidAlive, the one question the lock files, the conversions' temporary files and the experiment
// records ask of a pid they name: a live process is alive, an exited one is not, and a number
// that cannot be a pid names no process (kill(2) would read 0 and negatives as process groups,
// and Node refuses fractions and numbers past a pid_t, which once counted as "alive").
import { spawnSync } from 'node:child_process';
import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { FileLock } from '../../electron/service/file-lock.ts';
import { pidAlive } from '../../electron/vmm/process-alive.ts';
import { removeTempHomes, tempHome } from '../support/temp-home.ts';

afterAll(removeTempHomes);

describe('pidAlive', () => {
  it('is true for this process and pid 1, false for one that has exited', () => {
    expect(pidAlive(process.pid)).toBe(true);
    expect(pidAlive(1)).toBe(true);
    const dead = Number(spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))'], { encoding: 'utf8' }).stdout);
    expect(pidAlive(dead)).toBe(false);
  });

  it('is false for what cannot be a pid', () => {
    for (const n of [0, -1, -process.pid, 1.5, Number.NaN, Infinity, 2 ** 31, 2 ** 53]) expect(pidAlive(n), String(n)).toBe(false);
  });

  it('a lock naming a pid past pid_t is damage and broken; debris of pid 0 is removed', () => {
    const path = join(tempHome('pid-alive'), 'x.lock');
    writeFileSync(path, '4294967296 5\n');
    const lock = FileLock.tryAcquire(path);
    expect(lock).not.toBeNull();
    lock!.release();
    const debris = `${path}.0-0123abcd`;
    writeFileSync(debris, '');
    expect(FileLock.removeDebris(path)).toBe(1);
    expect(existsSync(debris)).toBe(false);
  });
});

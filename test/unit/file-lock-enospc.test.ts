// A lock taken on a full disk (issue 13, finding 8): writing the lock's temp file fails after
// the file was created; that file must not be left behind, save after failed save.
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { removeTempHomes, tempHome } from '../support/temp-home.ts';

vi.mock('node:fs', async (importOriginal) => {
  const real = await importOriginal<typeof import('node:fs')>();
  return {
    ...real,
    // Like a full disk: the file is created, its content does not fit.
    writeFileSync: (path: string, data: unknown, options?: unknown) => {
      if (typeof path === 'string' && path.includes('.lock.') && process.env.UNHALT_TEST_DISK_FULL === '1') {
        real.writeFileSync(path, '');
        throw Object.assign(new Error(`ENOSPC: no space left on device, write`), { code: 'ENOSPC' });
      }
      return real.writeFileSync(path, data as string, options as never);
    },
  };
});

afterAll(removeTempHomes);

describe('file lock on a full disk', () => {
  it('leaves no lock file behind and says "disk full" through the API mapping', async () => {
    const { FileLock } = await import('../../electron/service/file-lock.ts');
    const { toApiError } = await import('../../electron/service/errors.ts');
    const home = tempHome('enospc');
    const lockPath = join(home, 'vms.json.lock');
    process.env.UNHALT_TEST_DISK_FULL = '1';
    try {
      for (let i = 0; i < 3; i++) {
        let caught: unknown;
        try { FileLock.tryAcquire(lockPath); } catch (e) { caught = e; }
        expect(toApiError(caught).message).toMatch(/^disk full: /);
      }
    } finally {
      delete process.env.UNHALT_TEST_DISK_FULL;
    }
    expect(readdirSync(home)).toEqual([]);
  });
});

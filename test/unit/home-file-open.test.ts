// openRegularFile / openRegularHandle (home-file.ts), the one way the lock files, the owner lock,
// the console logs and every read home file are opened: a regular file opens; a symbolic link is
// refused by open (ELOOP) unless links are followed on purpose; a FIFO (no writer: it would block)
// and a directory are named, with nothing left open.
import { spawnSync } from 'node:child_process';
import { closeSync, constants, mkdirSync, readdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { NotRegularFileError, openRegularFile, openRegularHandle } from '../../electron/service/home-file.ts';
import { removeTempHomes, tempHome } from '../support/temp-home.ts';

afterAll(removeTempHomes);

const openFds = () => readdirSync('/proc/self/fd').length;

function fixtures() {
  const dir = tempHome('home-file-open');
  const file = join(dir, 'file');
  writeFileSync(file, 'hello');
  const link = join(dir, 'link');
  symlinkSync(file, link);
  const fifo = join(dir, 'fifo');
  expect(spawnSync('mkfifo', [fifo]).status).toBe(0);
  const folder = join(dir, 'folder');
  mkdirSync(folder);
  return { file, link, fifo, folder, missing: join(dir, 'missing') };
}

describe('opening a regular file of UNHALT_HOME', () => {
  it('opens a regular file; refuses a link unless followed, a FIFO and a directory, leaving nothing open', () => {
    const f = fixtures();
    const { fd, stats } = openRegularFile(f.file, constants.O_RDONLY);
    expect(stats.size).toBe(5);
    closeSync(fd);
    const before = openFds();
    expect(() => openRegularFile(f.link, constants.O_RDONLY)).toThrow(expect.objectContaining({ code: 'ELOOP' }));
    closeSync(openRegularFile(f.link, constants.O_RDONLY, { followLinks: true }).fd);
    expect(() => openRegularFile(f.missing, constants.O_RDONLY)).toThrow(expect.objectContaining({ code: 'ENOENT' }));
    for (const [path, kind] of [[f.fifo, 'a FIFO'], [f.folder, 'a directory']] as const) {
      let err: unknown;
      try { openRegularFile(path, constants.O_RDONLY); } catch (e) { err = e; }
      expect(err).toBeInstanceOf(NotRegularFileError);
      expect((err as NotRegularFileError).kind).toBe(kind);
    }
    expect(openFds()).toBe(before);
  });

  it('the FileHandle twin answers the same', async () => {
    const f = fixtures();
    const { handle, stats } = await openRegularHandle(f.file, constants.O_WRONLY | constants.O_APPEND | constants.O_CREAT, { mode: 0o600 });
    expect(stats.isFile()).toBe(true);
    await handle.close();
    const before = openFds();
    await expect(openRegularHandle(f.link, constants.O_RDONLY)).rejects.toMatchObject({ code: 'ELOOP' });
    await expect(openRegularHandle(f.fifo, constants.O_RDONLY)).rejects.toMatchObject({ name: 'NotRegularFileError', kind: 'a FIFO' });
    await expect(openRegularHandle(f.folder, constants.O_RDONLY)).rejects.toMatchObject({ name: 'NotRegularFileError', kind: 'a directory' });
    expect(openFds()).toBe(before);
  });
});

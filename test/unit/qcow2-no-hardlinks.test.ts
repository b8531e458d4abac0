// A conversion onto a file system without hard links (vfat, exFAT, SMB, some FUSE mounts: link(2)
// answers EPERM there): the finished image still arrives under its name, claimed with O_EXCL and
// renamed onto, and no temporary file stays. link(2) is made to fail as such a file system's does
// (this kernel has no vfat to mount); qemu-img and the rest are real.
import { spawnSync } from 'node:child_process';
import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { removeTempHomes, tempHome } from '../support/temp-home.ts';

vi.mock('node:fs', async (importOriginal) => {
  const real = await importOriginal<typeof import('node:fs')>();
  return {
    ...real,
    linkSync: (from: string, to: string) => {
      if (String(to).endsWith('.raw')) throw Object.assign(new Error(`EPERM: operation not permitted, link '${from}' -> '${to}'`), { code: 'EPERM' });
      return real.linkSync(from, to);
    },
  };
});

afterAll(removeTempHomes);

describe('a conversion where hard links are not allowed', () => {
  it('arrives under its name by O_EXCL claim and rename, no temporary file left; never over a file', async () => {
    const { convertQcow2ToRaw } = await import('../../electron/vmm/image/qcow2-convert.ts');
    const dir = tempHome('qcow2-nolink');
    const image = join(dir, 'disk.qcow2');
    expect(spawnSync('qemu-img', ['create', '-q', '-f', 'qcow2', image, '4M']).status).toBe(0);
    const target = join(dir, 'disk.raw');
    await convertQcow2ToRaw(image, target).done;
    expect(statSync(target).size).toBe(4 << 20);
    expect(readdirSync(dir).filter((n) => n.includes('.converting-'))).toEqual([]);
    const again = await convertQcow2ToRaw(image, target).done.then(() => null, (e: unknown) => e);
    expect((again as Error).message).toBe(`${target} already exists; move it away to convert again`);
  });
});

// A qcow2 that points at other files is never converted (vmm/image/qcow2-convert.ts): qemu-img
// would read a backing file or an external data file — anywhere on the host, such as a secret
// outside the allowed folders — into the raw copy the app then hands a guest. Refused before
// anything is written, on both roads to a conversion (the import, and "Convert to raw" through
// the service), with the reason in one line; a plain qcow2 still converts, with its progress.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { convertQcow2ToRaw, Qcow2ConvertError } from '../../electron/vmm/image/qcow2-convert.ts';
import { createService } from '../../electron/service/service.ts';
import type { DiskConversionDto } from '../../electron/service/api.ts';
import { runCli } from '../support/cli.ts';

const dir = mkdtempSync(join(tmpdir(), 'unhalt-qcow2-refs-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const qemuImg = (...args: string[]) => {
  const r = spawnSync('qemu-img', args, { encoding: 'utf8' });
  expect(r.status, r.stderr).toBe(0);
};

/** The hostile images: each refers to the secret outside. */
function hostileImages(): { name: string; path: string; why: RegExp }[] {
  const secret = join(dir, 'secret.raw');
  writeFileSync(secret, Buffer.alloc(1 << 20, 'S'));
  const backing = join(dir, 'backing.qcow2');
  qemuImg('create', '-q', '-f', 'qcow2', '-b', secret, '-F', 'raw', backing, '1M');
  const json = join(dir, 'json.qcow2');
  qemuImg('create', '-q', '-u', '-f', 'qcow2', '-b', `json:{"driver":"raw","file":{"driver":"file","filename":"${secret}"}}`, '-F', 'raw', json, '1M');
  const data = join(dir, 'data.qcow2');
  qemuImg('create', '-q', '-f', 'qcow2', '-o', `data_file=${join(dir, 'data-file.raw')}`, data, '1M');
  writeFileSync(join(dir, 'data-file.raw'), Buffer.alloc(1 << 20, 'S'));
  return [
    { name: 'a backing file', path: backing, why: /a qcow2 with a backing file \(.*secret\.raw\)/ },
    { name: 'a json: backing file', path: json, why: /a qcow2 with a backing file \(json:/ },
    { name: 'an external data file', path: data, why: /a qcow2 with an external data file \(.*data-file\.raw\)/ },
  ];
}

describe('a qcow2 referring to other files', () => {
  const images = hostileImages();

  it('is refused by the conversion itself, nothing written', async () => {
    for (const img of images) {
      const target = join(dir, `${img.name.replace(/\W+/g, '-')}.raw`);
      const run = convertQcow2ToRaw(img.path, target);
      const e = await run.done.then(() => null, (x: unknown) => x);
      expect(e, img.name).toBeInstanceOf(Qcow2ConvertError);
      expect((e as Error).message, img.name).toMatch(img.why);
      expect(existsSync(target), img.name).toBe(false);
    }
  });

  it('is refused by unhalt import in one line, nothing left in UNHALT_HOME', async () => {
    const unhalt = join(dir, 'home-import');
    const pw = join(dir, 'password');
    writeFileSync(pw, 'x-secret-1\n');
    for (const img of images) {
      const r = await runCli(['import', img.path, '--password-file', pw], { env: { HOME: dir, UNHALT_HOME: unhalt } });
      expect(r.code, img.name).toBe(1);
      // Its progress, then the refusal in one line.
      expect(r.stderr.trim().split('\n').at(-1), img.name).toMatch(new RegExp(`^unhalt: ${img.path}: it is ${img.why.source}`));
      expect(existsSync(join(unhalt, 'imports')) ? readdirSync(join(unhalt, 'imports')) : [], img.name).toEqual([]);
    }
  });

  it('fails the app\'s "Convert to raw" with the reason; a plain qcow2 converts, its progress reported', async () => {
    const home = join(dir, 'home-service');
    const events: DiskConversionDto[] = [];
    const svc = await createService({ home });
    try {
      await svc.addAllowedFolder(dir);
      svc.on((e) => { if (e.type === 'disk-conversion') events.push(e.conversion); });
      const s = svc;
      const ended = (id: string) => new Promise<DiskConversionDto>((resolve) => {
        const t = setInterval(() => {
          const last = events.filter((c) => c.id === id).at(-1);
          if (last && last.state !== 'running') { clearInterval(t); resolve(last); }
        }, 20);
      });
      const bad = await s.convertDiskImage(images[0]!.path);
      const end = await ended(bad.id);
      expect(end).toMatchObject({ state: 'failed', message: expect.stringMatching(images[0]!.why) });
      expect(existsSync(bad.target)).toBe(false);
      const plain = join(dir, 'plain.qcow2');
      qemuImg('create', '-q', '-f', 'qcow2', plain, '4M');
      const good = await s.convertDiskImage(plain);
      expect(await ended(good.id)).toMatchObject({ state: 'done', percent: 100 });
      expect(readFileSync(good.target).length).toBe(4 << 20);
    } finally {
      await svc.shutdown();
    }
  });
});

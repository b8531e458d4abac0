// A conversion cut short never leaves a half image under the target's name (issue 30 item 7):
// qemu-img writes a temporary file beside it, linked to the target's name only once it succeeded.
// Here a process converting is SIGKILLed mid-way (its qemu-img a stand-in that writes part of the
// image, then waits): nothing is at the target, the stand-in died with it (setpriv --pdeathsig),
// and the next conversion to that target removes the dead process's temporary file and succeeds
// with the real qemu-img.
import { spawn, spawnSync } from 'node:child_process';
import { chmodSync, existsSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { convertQcow2ToRaw } from '../../electron/vmm/image/qcow2-convert.ts';
import { removeTempHomes, tempHome } from '../support/temp-home.ts';

afterAll(removeTempHomes);

const ROOT = new URL('../../', import.meta.url).pathname;
const until = async (what: string, f: () => boolean, ms = 20_000) => {
  const end = Date.now() + ms;
  while (!f()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
};
const alive = (pid: number) => {
  try { process.kill(pid, 0); return true; } catch { return false; }
};

describe('a conversion cut short', () => {
  it('leaves nothing under the target\'s name, no qemu-img writing, and the next one succeeds', async () => {
    const dir = tempHome('qcow2-cut');
    const image = join(dir, 'disk.qcow2');
    expect(spawnSync('qemu-img', ['create', '-q', '-f', 'qcow2', image, '8M']).status).toBe(0);
    const target = join(dir, 'disk.raw');
    // The stand-in: `info` is the real qemu-img's; `convert` writes 1 MiB of the image, says its
    // pid, and waits (a long conversion).
    const fake = join(dir, 'qemu-img');
    writeFileSync(fake, [
      '#!/bin/sh',
      'if [ "$1" = info ]; then exec qemu-img "$@"; fi',
      'for a; do out="$a"; done',
      'head -c 1048576 /dev/zero > "$out"',
      `echo $$ > ${join(dir, 'fake.pid')}`,
      'exec sleep 600',
    ].join('\n'));
    chmodSync(fake, 0o755);
    const child = spawn(process.execPath, ['--input-type=module', '-e',
      `const m = await import(${JSON.stringify(join(ROOT, 'electron/vmm/image/qcow2-convert.ts'))}); await m.convertQcow2ToRaw(${JSON.stringify(image)}, ${JSON.stringify(target)}).done;`],
    { env: { ...process.env, UNHALT_QEMU_IMG: fake }, stdio: 'ignore' });
    const exited = new Promise((resolve) => child.on('close', resolve));
    await until('the stand-in converting', () => existsSync(join(dir, 'fake.pid')));
    const fakePid = Number(readFileSync(join(dir, 'fake.pid'), 'utf8'));
    const temps = () => readdirSync(dir).filter((n) => /^\.disk\.raw\.converting-[0-9a-f]{8}-\d+-[0-9a-f]{8}$/.test(n));
    expect(temps()).toHaveLength(1);
    expect(existsSync(target)).toBe(false);
    child.kill('SIGKILL');
    await exited;
    // qemu-img (here its stand-in) died with the process that ran it.
    await until('the stand-in to die with its parent', () => !alive(fakePid));
    expect(existsSync(target)).toBe(false);
    expect(temps()).toHaveLength(1);

    // A temporary file of another host or PID namespace (another scope) is never judged by its pid.
    const foreign = join(dir, '.disk.raw.converting-00000000-999999-0123abcd');
    writeFileSync(foreign, 'theirs');
    // The next conversion to that target: the dead process's file goes, the image arrives whole.
    const run = convertQcow2ToRaw(image, target);
    await run.done;
    expect(statSync(target).size).toBe(8 << 20);
    expect(temps()).toEqual(['.disk.raw.converting-00000000-999999-0123abcd']);
    // And never over a file.
    const again = await convertQcow2ToRaw(image, target).done.then(() => null, (e: unknown) => e);
    expect((again as Error).message).toBe(`${target} already exists; move it away to convert again`);
  }, 60_000);
});

// A disk image the user may not read, or may read and not write, is refused by the one disk-image
// check (`unhalt run`, `--dry-run`, the API and the wizard all call it) with a line that says
// which, and the way out only where there is one: readonly=on helps a file that may be read, and
// so does snapshot=on (the image is only read; the guest's writes go to an overlay).
// The check runs in a child process without the capabilities that let root ignore file modes
// (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH), so the file modes mean here what they mean for a user.
import { spawnSync } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';

const dir = mkdtempSync(join(tmpdir(), 'unhalt-disk-access-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const MODULE = new URL('../../electron/vmm/devices/virtio/disk-image.ts', import.meta.url).href;
const isRoot = process.getuid?.() === 0;
const DROP_DAC = ['setpriv', '--inh-caps=-dac_override,-dac_read_search', '--bounding-set=-dac_override,-dac_read_search'];

/** What checkDiskImage says of the disk, as a user without root's file-mode override: its error line, or "ok". */
function check(path: string, readonly: boolean, snapshot = false): string {
  const code = `import { checkDiskImage } from ${JSON.stringify(MODULE)};
    try { checkDiskImage({ path: ${JSON.stringify(path)}, readonly: ${readonly}, snapshot: ${snapshot} }); console.log('ok'); }
    catch (e) { console.log(e.message); }`;
  return asUser(code);
}

function asUser(code: string, env: NodeJS.ProcessEnv = process.env): string {
  const argv = [...(isRoot ? DROP_DAC : []), process.execPath, '--input-type=module', '-e', code];
  const r = spawnSync(argv[0]!, argv.slice(1), { encoding: 'utf8', env });
  expect(r.status, r.stderr).toBe(0);
  return r.stdout.trim();
}

function image(name: string, mode: number): string {
  const p = join(dir, name);
  writeFileSync(p, Buffer.alloc(4096));
  chmodSync(p, mode);
  return p;
}

describe('disk images the user may not open', () => {
  it('an image that may not be read: refused as unreadable, read-write or not (readonly=on would not help)', () => {
    const p = image('secret.img', 0o000);
    expect(check(p, false)).toBe(`disk ${p}: cannot be read (EACCES)`);
    expect(check(p, true)).toBe(`disk ${p}: cannot be read (EACCES)`);
  });

  it('an image that may be read and not written: read-write refused with readonly=on as the way out, which works', () => {
    const p = image('shared.img', 0o444);
    expect(check(p, false)).toBe(`disk ${p}: may not be written (EACCES); add readonly=on to use it read-only, or snapshot=on to throw the guest's writes away`);
    expect(check(p, true)).toBe('ok');
  });

  it('snapshot=on on an image that may be read and not written: opened O_RDONLY, its writes go to an overlay that can be written', () => {
    const p = image('base.img', 0o444);
    expect(check(p, false, true)).toBe('ok');
    const overlays = join(dir, 'overlays');
    spawnSync('mkdir', ['-m', '0777', overlays]);
    const code = `import { OpenDisk } from ${JSON.stringify(MODULE)};
      import { readFileSync, writeSync } from 'node:fs';
      const d = OpenDisk.open({ path: ${JSON.stringify(p)}, readonly: false, snapshot: true }, 'vm');
      const mode = (fd) => parseInt(/^flags:\\s+([0-7]+)$/m.exec(readFileSync('/proc/self/fdinfo/' + fd, 'utf8'))[1], 8) & 3;
      const wrote = writeSync(d.backend.overlay.fd, Buffer.alloc(512, 7), 0, 512, 0);
      console.log(JSON.stringify({ image: mode(d.backend.fd), overlay: mode(d.backend.overlay.fd), wrote, readonly: d.backend.readonly, discard: d.backend.discard }));
      d.close();`;
    expect(JSON.parse(asUser(code, { ...process.env, TMPDIR: overlays }))).toEqual({ image: 0, overlay: 2, wrote: 512, readonly: false, discard: false });
    expect(spawnSync('ls', ['-A', overlays], { encoding: 'utf8' }).stdout).toBe(''); // nothing named, nothing left
  });

  it('an image in a folder that may not be searched: refused as unreadable, naming the path', () => {
    const folder = join(dir, 'closed');
    const p = join(folder, 'disk.img');
    spawnSync('mkdir', [folder]);
    writeFileSync(p, Buffer.alloc(4096));
    chmodSync(folder, 0o000);
    try {
      expect(check(p, true)).toBe(`disk ${p}: cannot be read (permission denied on the path)`);
    } finally {
      chmodSync(folder, 0o755);
    }
  });

  it('the same images are fine for a user who may read and write them', () => {
    const p = image('mine.img', 0o644);
    expect(check(p, false)).toBe('ok');
  });
});

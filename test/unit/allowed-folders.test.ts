// Boot files only from allowed folders (issue 13, finding 10): with the host-mode token, any file
// the service can read used to be accepted as a kernel or initrd (say /etc/shadow) and handed to
// a guest. Now only files inside UNHALT_HOME, the guest kits, the user's home and folders added
// in the settings are, compared by real path (symlinks cannot lead out).
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { homedir, tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { createService } from '../../electron/service/service.ts';
import { PROBE_KERNEL } from '../../electron/vmm/guests.ts';
import { rejection } from '../support/api-errors.ts';
import { removeTempHomes, tempHome } from '../support/temp-home.ts';

afterAll(removeTempHomes);


describe('boot files come only from allowed folders', () => {
  it('refuses /etc/shadow, a symlink out of the library and a foreign folder, until that folder is added', async () => {
    const home = tempHome('allowed');
    const outside = mkdtempSync(join(tmpdir(), 'unhalt-outside-'));
    const svc = await createService({ home });
    try {
      const kernel = join(home, 'probe.elf');
      copyFileSync(PROBE_KERNEL, kernel);
      const vm = (over: object) => ({ name: 'c', guest: 'custom', kernel, memoryMiB: 64, ...over });

      const shadow = await rejection(svc.createVm(vm({ initrd: '/etc/shadow' })));
      expect(shadow.code).toBe('invalid');
      expect(shadow.message).toBe(`initrd /etc/shadow is outside the folders Unhalt may give to a guest (${home}, ${join(PROBE_KERNEL, '..')}, ${homedir()}); `
        + 'move it into one of them or allow its folder (library view: Folders for boot files)');

      // A symlink inside the library's folder that points outside it stays outside.
      symlinkSync('/etc/passwd', join(home, 'innocent.cpio'));
      expect((await rejection(svc.createVm(vm({ initrd: join(home, 'innocent.cpio') })))).message).toMatch(/^initrd .*innocent\.cpio is outside the folders/);

      const foreign = join(outside, 'probe.elf');
      copyFileSync(PROBE_KERNEL, foreign);
      expect((await rejection(svc.createVm(vm({ kernel: foreign })))).message).toMatch(/^kernel .*probe\.elf is outside the folders/);

      const folders = await svc.addAllowedFolder(outside);
      expect(folders.map((f) => f.source)).toEqual(['library', 'guests', 'home', 'settings']);
      expect(JSON.parse(readFileSync(join(home, 'settings.json'), 'utf8')).allowedFolders).toHaveLength(1);
      const created = await svc.createVm(vm({ kernel: foreign }));
      expect(created.config.kernel).toBe(foreign);
      expect(await svc.listAllowedFolders()).toEqual(folders);

      // Removing the folder again: the saved VM's start is refused before anything is read.
      await svc.removeAllowedFolder(folders[3]!.path);
      expect((await rejection(svc.startVm(created.id))).message).toMatch(/^kernel .*probe\.elf is outside the folders/);

      expect((await rejection(svc.addAllowedFolder('/'))).message).toMatch(/root folder "\/" cannot be allowed/);
      // Adding folders is an API call too: a token holder cannot allow /etc (or what holds it) either.
      expect((await rejection(svc.addAllowedFolder('/etc'))).message).toBe('/etc cannot be allowed: it is or holds the system folder /etc; copy the files you need into a folder of your own');
      expect((await rejection(svc.addAllowedFolder('/etc/ssh'))).message).toMatch(/system folder \/etc/);
      expect((await rejection(svc.addAllowedFolder('relative/dir'))).message).toMatch(/must be an absolute path/);
      expect((await rejection(svc.addAllowedFolder(join(outside, 'missing')))).message).toMatch(/is not an existing folder/);
      expect((await rejection(svc.removeAllowedFolder(home))).code).toBe('not-found');
      // The built-in guests need no folder at all.
      expect((await svc.createVm({ name: 'builtin', guest: 'probe', memoryMiB: 64 })).config.guest).toBe('probe');
    } finally {
      await svc.shutdown();
      rmSync(outside, { recursive: true, force: true });
    }
  });

  it('outside the folders, a file that exists and one that does not get the same answer: nothing outside can be probed (issue 30 #4)', async () => {
    const home = tempHome('probing');
    const svc = await createService({ home });
    try {
      const kernel = join(home, 'probe.elf');
      copyFileSync(PROBE_KERNEL, kernel);
      const vm = (over: object) => ({ name: 'c', guest: 'custom', kernel, memoryMiB: 64, ...over });
      const answer = async (over: object, path: string) => (await rejection(svc.createVm(vm(over)))).message.replace(path, 'PATH');
      // Kernels, initrds and disks alike: existing, missing, in a missing folder, a folder, a device.
      for (const what of ['kernel', 'initrd'] as const) {
        const seen = new Set<string>();
        for (const p of ['/etc/shadow', '/etc/nope', '/etc/nope/deeper', '/etc', '/dev/zero']) seen.add(await answer({ [what]: p }, p));
        expect([...seen], what).toEqual([expect.stringMatching(new RegExp(`^${what} PATH is outside the folders Unhalt may give to a guest`))]);
      }
      const disks = new Set<string>();
      for (const p of ['/etc/shadow', '/etc/nope', '/dev/zero']) disks.add(await answer({ disks: [{ path: p }] }, p));
      expect([...disks]).toHaveLength(1);
      expect([...disks][0]).toMatch(/^disk PATH is outside the folders/);
      // Inside them, a missing file is said to be missing.
      expect((await rejection(svc.createVm(vm({ initrd: join(home, 'nope.cpio') })))).message).toBe(`initrd not found: ${join(home, 'nope.cpio')}`);
      // A dangling symbolic link inside points nowhere provable: outside, like any other.
      symlinkSync('/etc/nope', join(home, 'dangling.cpio'));
      expect(await answer({ initrd: join(home, 'dangling.cpio') }, join(home, 'dangling.cpio'))).toMatch(/^initrd PATH is outside the folders/);
      // "link/.." is where the link leads, then up: a link inside to /etc/ssh, then "../shadow", is /etc/shadow.
      symlinkSync('/etc/ssh', join(home, 'lnk'));
      for (const over of [{ initrd: `${home}/lnk/../shadow` }, { initrd: `${home}/lnk/../nope` }, { disks: [{ path: `${home}/lnk/../../dev/zero` }] }]) {
        const given = Object.values(over)[0] as string | { path: string }[];
        const path = typeof given === 'string' ? given : given[0]!.path;
        expect(await answer(over, path), path).toMatch(/^(initrd|disk) PATH is outside the folders/);
      }
    } finally {
      await svc.shutdown();
    }
  });

  it('an added folder is pinned: replaced by a symbolic link to /etc or by another folder, it counts for nothing until added again (issue 30 #5)', async () => {
    const home = tempHome('pinned');
    const svc = await createService({ home });
    const mine = mkdtempSync(join(tmpdir(), 'unhalt-pinned-'));
    try {
      const kernel = join(home, 'probe.elf');
      copyFileSync(PROBE_KERNEL, kernel);
      const vm = (over: object) => ({ name: 'c', guest: 'custom', kernel, memoryMiB: 64, ...over });
      const added = join(mine, 'boot');
      mkdirSync(added);
      writeFileSync(join(added, 'initrd.cpio'), 'x');
      await svc.addAllowedFolder(added);
      expect((await svc.createVm(vm({ initrd: join(added, 'initrd.cpio') }))).config.initrd).toBe(join(added, 'initrd.cpio'));
      // Swapped for a symbolic link to /etc: /etc/hostname through it is refused, and the list says why.
      renameSync(added, `${added}.old`);
      symlinkSync('/etc', added);
      expect((await rejection(svc.createVm(vm({ initrd: join(added, 'hostname') })))).message).toMatch(/^initrd .*boot\/hostname is outside the folders/);
      const listed = (await svc.listAllowedFolders()).find((f) => f.path === added)!;
      expect(listed.refused).toBe('it now leads to /etc (it was replaced by a symbolic link): remove it and add it again if you trust it');
      expect((await rejection(svc.addAllowedFolder(added))).message).toMatch(/system folder \/etc/);
      // Swapped for another directory of the same name: refused too, until it is added again.
      rmSync(added);
      mkdirSync(added);
      writeFileSync(join(added, 'initrd.cpio'), 'y');
      expect((await rejection(svc.createVm(vm({ initrd: join(added, 'initrd.cpio') })))).message).toMatch(/is outside the folders/);
      expect((await svc.listAllowedFolders()).find((f) => f.path === added)!.refused).toBe('it is another folder than the one added (replaced or mounted over since): remove it and add it again if you trust it');
      const again = await svc.addAllowedFolder(added);
      expect(again.find((f) => f.path === added)!.refused).toBeUndefined();
      expect((await svc.createVm(vm({ name: 'd', initrd: join(added, 'initrd.cpio') }))).config.initrd).toBe(join(added, 'initrd.cpio'));
    } finally {
      await svc.shutdown();
      rmSync(mine, { recursive: true, force: true });
    }
  });

  it('"/" written into settings.json by hand counts for nothing, and the list says why', async () => {
    const home = tempHome('root-folder');
    writeFileSync(join(home, 'settings.json'), JSON.stringify({ allowedFolders: ['/'] }));
    const svc = await createService({ home });
    try {
      const kernel = join(home, 'probe.elf');
      copyFileSync(PROBE_KERNEL, kernel);
      expect((await rejection(svc.createVm({ name: 'c', guest: 'custom', kernel, initrd: '/etc/shadow', memoryMiB: 64 }))).message).toMatch(/^initrd \/etc\/shadow is outside the folders/);
      expect((await svc.listAllowedFolders()).find((f) => f.path === '/')!.refused).toBe('it is the root folder "/", which would let a guest read every file: remove it and add it again if you trust it');
    } finally {
      await svc.shutdown();
    }
  });

  it('a broad folder is allowed with what it exposes said; as root, another user\'s home is refused', async () => {
    const home = tempHome('broad');
    const svc = await createService({ home });
    const fake = mkdtempSync(join(tmpdir(), 'unhalt-users-'));
    try {
      const tmp = (await svc.addAllowedFolder('/tmp')).find((f) => f.path === '/tmp')!;
      expect(tmp.note).toBe('any local user can put files there: a guest may be given what another user left');
      if (process.getuid?.() === 0) {
        // Another user (a passwd file of the test's own) whose home is a folder here.
        const theirs = join(fake, 'alice');
        mkdirSync(join(theirs, 'vms'), { recursive: true });
        writeFileSync(join(fake, 'passwd'), `root:x:0:0:root:/root:/bin/sh\nalice:x:1000:1000::${theirs}:/bin/sh\n`);
        process.env.UNHALT_PASSWD_FILE = join(fake, 'passwd');
        try {
          expect((await rejection(svc.addAllowedFolder(join(theirs, 'vms')))).message)
            .toBe(`${join(theirs, 'vms')} cannot be allowed while Unhalt runs as root: it is or holds ${theirs}, the home folder of user alice; allow a folder of root's own`);
          expect((await rejection(svc.addAllowedFolder(fake))).message).toMatch(/it is or holds .*alice, the home folder of user alice/);
        } finally {
          delete process.env.UNHALT_PASSWD_FILE;
        }
      }
    } finally {
      await svc.shutdown();
      rmSync(fake, { recursive: true, force: true });
    }
  });

  it('a hand-edited settings.json with a syntax error is never written over: a change is refused, the file kept byte for byte (issue 30 #8)', async () => {
    const home = tempHome('settings-damaged');
    const outside = mkdtempSync(join(tmpdir(), 'unhalt-settings-'));
    const svc = await createService({ home });
    try {
      await svc.addAllowedFolder(outside);
      const file = join(home, 'settings.json');
      const edited = readFileSync(file, 'utf8').replace(/\]/, ',]'); // a trailing comma: no longer JSON
      writeFileSync(file, edited);
      for (const change of [() => svc.addAllowedFolder(tmpdir()), () => svc.removeAllowedFolder(outside)]) {
        const e = await rejection(change());
        expect(e.code).toBe('conflict');
        expect(e.message).toMatch(new RegExp(`^${file.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}: it is not valid JSON \\(.*\\); fix it or move it away, then try again \\(nothing was changed\\)$`));
      }
      expect(readFileSync(file, 'utf8')).toBe(edited);
      // Fixed by hand, it is read again.
      writeFileSync(file, edited.replace(',]', ']'));
      expect((await svc.listAllowedFolders()).some((f) => f.path === outside)).toBe(true);
    } finally {
      await svc.shutdown();
      rmSync(outside, { recursive: true, force: true });
    }
  });
});

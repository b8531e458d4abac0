// Editing a stopped VM through the service: the whole configuration (updateVm) and the name alone
// (renameVm), with the library's name rules, and the host-mode token a restarted server keeps.
// Runs without KVM; editing and resetting a running VM is in test/kvm/vm-manage.test.ts.
import { chmodSync, lstatSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hostTokenPath, persistentHostToken } from '../../electron/service/host-token.ts';
import { createService, type UnhaltService } from '../../electron/service/service.ts';
import { rejection } from '../support/api-errors.ts';
import { removeTempHomes, tempHome } from '../support/temp-home.ts';

afterAll(removeTempHomes);

const probe = { name: 'edit-me', guest: 'probe', cpus: 1, memoryMiB: 64, append: 'scenario=echo' };

describe('editing a stopped VM', () => {
  let home: string;
  let svc: UnhaltService;

  beforeAll(async () => {
    home = tempHome('edit');
    svc = await createService({ home, lockTimeoutMs: 500 });
  });
  afterAll(() => svc.shutdown());

  it('replaces every setting at once and keeps the id, the creation time and the file', async () => {
    const vm = await svc.createVm(probe);
    const edited = await svc.updateVm(vm.id, {
      ...probe, name: 'edited', cpus: 2, memoryMiB: 96, machine: 'unhalt-1.0', cpuFeatures: { 'kvm-steal-time': false },
      memLock: true, haltPollNs: 0, append: 'scenario=timer live=1',
    });
    expect(edited.id).toBe(vm.id);
    expect(edited.createdAt).toBe(vm.createdAt);
    expect(edited.updatedAt).toBeGreaterThanOrEqual(vm.updatedAt);
    expect(edited.config).toMatchObject({ name: 'edited', cpus: 2, memoryMiB: 96, machine: 'unhalt-1.0', memLock: true, haltPollNs: 0, append: 'scenario=timer live=1' });
    const saved = JSON.parse(readFileSync(join(home, 'vms.json'), 'utf8')).vms.find((v: { id: string }) => v.id === vm.id);
    expect(saved.config).toEqual(edited.config);
    // A setting left out is gone (the edit is the whole configuration, not a patch).
    const back = await svc.updateVm(vm.id, { ...probe, name: 'edited' });
    expect(back.config.haltPollNs).toBeUndefined();
    expect(back.config.memLock).toBe(false);
  });

  it('refuses a bad edit with the validator\'s reason and keeps the old configuration', async () => {
    const vm = await svc.createVm({ ...probe, name: 'keep-me' });
    const r = await rejection(svc.updateVm(vm.id, { ...probe, name: 'keep-me', cpus: 0 }));
    expect(r).toEqual({ code: 'invalid', message: 'cpus must be between 1 and 254, got 0' });
    expect((await svc.getVm(vm.id)).config).toEqual(vm.config);
  });

  it('renames with the same name rules as a create, and refuses a taken name', async () => {
    const a = await svc.createVm({ ...probe, name: 'alpha' });
    await svc.createVm({ ...probe, name: 'beta' });
    const renamed = await svc.renameVm(a.id, '  gamma   one ');
    expect(renamed.config.name).toBe('gamma one');
    expect({ ...renamed.config, name: a.config.name }).toEqual(a.config);
    expect(await rejection(svc.renameVm(a.id, 'BETA'))).toEqual({ code: 'conflict', message: 'a VM named "beta" already exists; choose another name' });
    expect((await rejection(svc.renameVm(a.id, 'a/b'))).message).toMatch(/may use letters, digits, space, dot, dash and underscore/);
    expect((await rejection(svc.renameVm(a.id, ''))).code).toBe('invalid');
    expect((await rejection(svc.renameVm(a.id, 7 as unknown as string))).message).toBe('name must be text, got 7');
    expect((await rejection(svc.renameVm('00000000-0000-4000-8000-000000000000', 'x'))).code).toBe('not-found');
    // Its own name, in another case, is not a clash.
    expect((await svc.renameVm(a.id, 'GAMMA one')).config.name).toBe('GAMMA one');
    expect((await svc.getVm(a.id)).config.name).toBe('GAMMA one');
  });

  it('refuses to reset a VM that is not running, and says what to do instead', async () => {
    const vm = await svc.createVm({ ...probe, name: 'not-running' });
    expect(await rejection(svc.resetVm(vm.id))).toEqual({
      code: 'conflict', message: 'the VM is stopped: only a running or paused VM can be reset (start it instead)',
    });
  });
});

describe('the host-mode token', () => {
  it('is kept per home, private to its user, and replaced when the file is damaged', () => {
    const home = tempHome('token');
    const first = persistentHostToken(home);
    expect(first).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(statSync(hostTokenPath(home)).mode & 0o777).toBe(0o600);
    expect(persistentHostToken(home)).toBe(first);
    expect(persistentHostToken(tempHome('token'))).not.toBe(first);
    writeFileSync(hostTokenPath(home), 'short\n');
    const next = persistentHostToken(home);
    expect(next).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(next).not.toBe(first);
    expect(persistentHostToken(home)).toBe(next);
  });

  it('is replaced when others could have read it (0644, a symlink): the mode 0600 is enforced', () => {
    const home = tempHome('token-mode');
    const first = persistentHostToken(home);
    chmodSync(hostTokenPath(home), 0o644);
    const next = persistentHostToken(home);
    expect(next).not.toBe(first);
    expect(statSync(hostTokenPath(home)).mode & 0o777).toBe(0o600);
    expect(persistentHostToken(home)).toBe(next);
    // A symlink to a token-shaped file elsewhere is not this home's token.
    const elsewhere = join(home, 'planted');
    writeFileSync(elsewhere, `${'A'.repeat(43)}\n`, { mode: 0o600 });
    rmSync(hostTokenPath(home));
    symlinkSync(elsewhere, hostTokenPath(home));
    const third = persistentHostToken(home);
    expect(third).not.toBe('A'.repeat(43));
    expect(lstatSync(hostTokenPath(home)).isFile()).toBe(true);
  });
});

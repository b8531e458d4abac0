// checkBootFiles: the wizard asks at the kernel field what createVm would say of the same files,
// and gets exactly that; keepLiveKnobs has nothing to keep for a VM that was never changed live.
import { mkdirSync, truncateSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createService, type UnhaltService } from '../../electron/service/service.ts';
import { PROBE_KERNEL } from '../../electron/vmm/guests.ts';
import { rejection } from '../support/api-errors.ts';
import { removeTempHomes, tempHome } from '../support/temp-home.ts';

afterAll(removeTempHomes);

describe('checkBootFiles gives the files\' verdict of createVm, alone', () => {
  let home: string;
  let svc: UnhaltService;
  let text = '';
  let big = '';

  beforeAll(async () => {
    home = tempHome('bootfiles');
    svc = await createService({ home, lockTimeoutMs: 500 });
    mkdirSync(join(home, 'k'), { recursive: true });
    text = join(home, 'k', 'notes.txt');
    writeFileSync(text, 'not a kernel\n');
    big = join(home, 'k', 'big.img');
    writeFileSync(big, '');
    truncateSync(big, 20 * 1024 * 1024); // sparse: its size is what the rule judges
  });
  afterAll(() => svc.shutdown());

  it.each([
    ['a relative path', { kernel: './vmlinux' }],
    ['a text file', { kernel: '<text>' }],
    ['a missing file', { kernel: '/nonexistent/vmlinux' }],
    ['a file outside the allowed folders', { kernel: '/etc/hostname' }],
    ['an initrd too large for the memory', { initrd: '<big>', memoryMiB: 16 }],
  ])('%s', async (_what, raw) => {
    const files = JSON.parse(JSON.stringify(raw).replace('<text>', text).replace('<big>', big)) as Record<string, unknown>;
    const alone = await rejection(svc.checkBootFiles(files));
    const viaCreate = await rejection(svc.createVm({ name: 'x', guest: files.kernel ? 'custom' : 'probe', ...files }));
    expect(alone).toEqual(viaCreate);
  });

  it('passes files createVm would take, and refuses fields it does not know', async () => {
    await expect(svc.checkBootFiles({ kernel: PROBE_KERNEL })).resolves.toBeUndefined();
    expect((await rejection(svc.checkBootFiles({ kernel: PROBE_KERNEL, cpus: 2 } as never))).message).toBe('unknown field "cpus" (valid: kernel, initrd, memoryMiB, disks)');
  });

  it('keepLiveKnobs refuses when nothing was changed live', async () => {
    const vm = await svc.createVm({ name: 'kept', guest: 'probe' });
    expect(await rejection(svc.keepLiveKnobs(vm.id))).toEqual({
      code: 'conflict', message: 'nothing to keep: halt polling and pinning were not changed while the VM runs',
    });
  });
});

// A start that fails is kept in the VM's record (when and why) across restarts of the service,
// on every host: the service is pointed at a KVM device that does not exist.
import { describe, expect, it } from 'vitest';
import { parseLibrary } from '../../electron/service/library-schema.ts';
import { createService } from '../../electron/service/service.ts';
import { rejection } from '../support/api-errors.ts';
import { tempHome } from '../support/temp-home.ts';
import { withoutKvm } from '../support/no-kvm.ts';

withoutKvm();

describe('a failed start', () => {
  it('is kept with its reason and time, across a restart of the service', async () => {
    const home = tempHome('start-failure');
    const svc = await createService({ home });
    let id = '';
    let at = 0;
    try {
      const vm = await svc.createVm({ name: 'no-kvm', guest: 'probe', cpus: 1 });
      id = vm.id;
      expect(vm.lastStartFailure).toBeUndefined();
      const before = Date.now();
      const e = await rejection(svc.startVm(vm.id));
      expect(e.code).toBe('host');
      expect(e.message).toMatch(/^KVM is not usable on this host: UNHALT_KVM_DEVICE names \/nonexistent\/kvm, a path that does not exist\. To fix: /);
      const rec = await svc.getVm(vm.id);
      expect(rec.lastStartFailure).toEqual({ at: expect.any(Number), reason: e.message });
      at = rec.lastStartFailure!.at;
      expect(at).toBeGreaterThanOrEqual(before);
      expect(at).toBeLessThanOrEqual(Date.now());
      expect(rec.lastStartedAt).toBeUndefined();
      // An unknown id is no failed start of anything.
      expect((await rejection(svc.startVm('not-a-vm'))).code).toBe('not-found');
    } finally {
      await svc.shutdown();
    }
    const again = await createService({ home });
    try {
      expect((await again.getVm(id)).lastStartFailure).toEqual({ at, reason: expect.stringMatching(/^KVM is not usable on this host: /) });
    } finally {
      await again.shutdown();
    }
  });

  it('a record with a malformed lastStartFailure is kept aside, the others load', () => {
    const good = { id: 'a1', config: { name: 'a' }, createdAt: 1, updatedAt: 1, lastStartFailure: { at: 5, reason: 'no KVM' } };
    const bad = { id: 'b1', config: { name: 'b' }, createdAt: 1, updatedAt: 1, lastStartFailure: { at: 'soon', reason: 7 } };
    const parsed = parseLibrary(JSON.stringify({ schema: 1, vms: [good, bad] }));
    expect(parsed.file.vms.map((v) => [v.id, v.lastStartFailure])).toEqual([['a1', { at: 5, reason: 'no KVM' }]]);
    expect(parsed.quarantined).toEqual([{ record: bad, reason: expect.stringMatching(/b1|invalid/) }]);
  });
});

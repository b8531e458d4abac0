// Managing a running probe VM through the service on real KVM: its settings cannot be edited
// while it runs (with the reason), it can be renamed, its start is kept as the library's "last
// run", and a reset boots the same configuration again (the echo shell's banner and prompt come
// back, the console and the charts continue with a marker).
import { afterAll, describe, expect, it } from 'vitest';
import type { ApiEvent } from '../../electron/service/api.ts';
import { createService } from '../../electron/service/service.ts';
import { rejection } from '../support/api-errors.ts';
import { kvmAvailable } from '../support/probe.ts';
import { scaled } from '../support/time-scale.ts';
import { removeTempHomes, tempHome } from '../support/temp-home.ts';

afterAll(removeTempHomes);

async function until<T>(what: string, f: () => T | undefined | false | Promise<T | undefined | false>, timeoutMs = scaled(20_000)): Promise<T> {
  const end = performance.now() + timeoutMs;
  for (;;) {
    const v = await f();
    if (v) return v;
    if (performance.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe.skipIf(!kvmAvailable)('managing a running VM', () => {
  it('refuses edits while it runs, renames it, and resets it into a fresh boot', async () => {
    const home = tempHome('kvm-manage');
    const svc = await createService({ home });
    let vmId = '';
    let lastStartedAt: number | undefined;
    const events: ApiEvent[] = [];
    svc.on((e) => events.push(e));
    try {
      const vm = await svc.createVm({ name: 'manage', guest: 'probe', cpus: 2, memoryMiB: 64, append: 'scenario=echo' });
      expect(vm.lastStartedAt).toBeUndefined();
      let text = '';
      const sub = await svc.subscribe(vm.id);
      text += sub.backfill.console;
      svc.on((e) => { if (e.type === 'console' && e.vmId === vm.id) text += e.data; });
      const before = Date.now();
      const first = await svc.startVm(vm.id);
      await until('the first prompt', () => text.includes('probe> '));
      const startedAt = await until('the start kept in the library', async () => (await svc.getVm(vm.id)).lastStartedAt);
      expect(startedAt).toBeGreaterThanOrEqual(before);

      // Settings: refused while it runs, with why and what can change live.
      const r = await rejection(svc.updateVm(vm.id, { ...vm.config, cpus: 1 }));
      expect(r.code).toBe('conflict');
      expect(r.message).toMatch(/^the VM is running: its settings are the guest's hardware, fixed at boot; stop it to edit them \(halt polling and pinning can be changed live/);
      expect((await svc.getVm(vm.id)).config.cpus).toBe(2);
      // The name is the library's: it changes at any time.
      expect((await svc.renameVm(vm.id, 'managed')).config.name).toBe('managed');
      expect((await svc.getVm(vm.id)).status.state).toBe('running');

      // Reset: the guest boots again (a second banner and prompt), with a new run.
      const banners = (text.match(/probe> /g) ?? []).length;
      const reset = await svc.resetVm(vm.id);
      expect(reset.state).toBe('running');
      expect(reset.startedAt).toBeGreaterThan(first.startedAt!);
      expect(reset.lastEnd).toMatchObject({ kind: 'stopped', message: 'reset by the user: stopped and booted again with the same configuration' });
      await until('the prompt of the new boot', () => (text.match(/probe> /g) ?? []).length > banners);
      const states = events.filter((e): e is Extract<ApiEvent, { type: 'status' }> => e.type === 'status' && e.vmId === vm.id).map((e) => e.status.state);
      expect(states.slice(-4)).toEqual(['stopping', 'stopped', 'starting', 'running']);
      // The echo shell answers in the new boot.
      await svc.sendConsole(vm.id, 'cpus\r');
      await until('an answer from the new boot', () => /cpus\r?\n[^\n]*2/.test(text.slice(text.lastIndexOf('probe> cpus'))));

      // A paused VM resets too; a stopped one is refused.
      await svc.pauseVm(vm.id);
      expect((await svc.resetVm(vm.id)).state).toBe('running');
      await svc.forceStopVm(vm.id);
      expect((await rejection(svc.resetVm(vm.id))).message).toBe('the VM is stopped: only a running or paused VM can be reset (start it instead)');
      // Stopped: the edit goes through.
      expect((await svc.updateVm(vm.id, { ...vm.config, name: 'managed', cpus: 1 })).config.cpus).toBe(1);
      vmId = vm.id;
      lastStartedAt = (await svc.getVm(vm.id)).lastStartedAt;
      expect(lastStartedAt).toBeGreaterThan(startedAt);
    } finally {
      await svc.shutdown();
    }
    // The last start is the library's, not the process's: it is there after a restart.
    const again = await createService({ home });
    try {
      expect((await again.getVm(vmId)).lastStartedAt).toBe(lastStartedAt);
    } finally {
      await again.shutdown();
    }
  });
});

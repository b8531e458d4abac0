// Test support: a file whose service and CLI calls meet a host without KVM on every host.
import { afterAll, beforeAll } from 'vitest';
import { removeTempHomes } from './temp-home.ts';

/** For the calling file: UNHALT_KVM_DEVICE names nothing from beforeAll on; restored, and the temporary homes removed, after all. */
export function withoutKvm(): void {
  const saved = process.env.UNHALT_KVM_DEVICE;
  beforeAll(() => { process.env.UNHALT_KVM_DEVICE = '/nonexistent/kvm'; });
  afterAll(() => {
    if (saved === undefined) delete process.env.UNHALT_KVM_DEVICE;
    else process.env.UNHALT_KVM_DEVICE = saved;
    removeTempHomes();
  });
}

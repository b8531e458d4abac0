// The wizard's draft: what the fields hold (text as typed) round-trips to the stored
// configuration, and its field checks are the schema's and the host rules' own.
import { describe, expect, it } from 'vitest';
import { validateConfig } from '../../electron/vmm/config/vm-config.ts';
import { draftToConfig } from '../../renderer/src/views/wizard/draft.ts';
import { configToDraft } from '../../renderer/src/views/wizard/from-config.ts';
import { draftProblems } from '../../renderer/src/views/wizard/validate.ts';
import type { HostInfo } from '../../electron/service/api.ts';

const host = { maxVcpus: 8, memoryMiB: 2048, hostCpus: [0, 1] } as unknown as HostInfo;

describe('the wizard draft', () => {
  it.each([
    { name: 'p', guest: 'probe', append: 'scenario=idle ms=500', cpus: 4, memoryMiB: 512, haltPollNs: 1000000, pin: [1, 0] },
    { name: 'e', guest: 'probe', append: 'foo=1', cpuPm: true },
    { name: 'r', guest: 'probe', append: 'scenario=virtio-rng bytes=64 rounds=4', rng: true },
    { name: 'n', guest: 'probe', append: 'scenario=net-dhcp', net: { mode: 'user', hostfwd: [{ protocol: 'tcp', hostAddress: '127.0.0.1', hostPort: 2222, guestAddress: '10.0.2.15', guestPort: 22 }] } },
    { name: 't', guest: 'probe', net: { mode: 'tap', tap: 'tap0' } },
    { name: 'k', guest: 'custom', kernel: '/boot/vmlinux', initrd: '/boot/initrd', append: 'console=ttyS0', pvmProfile: false, cpuFeatures: { 'kvm-pv-unhalt': false } },
  ])('edits %j without changing what it means', (raw) => {
    const c = validateConfig(raw);
    const again = validateConfig(draftToConfig(configToDraft(c, null, new Set())));
    expect({ ...again, append: again.append?.replace(/^scenario=echo /, '') }).toEqual(c);
  });

  it('keeps typed numbers as text and judges them by the API\'s rules', () => {
    const d = configToDraft(validateConfig({ name: 'x' }), null, new Set());
    expect(draftProblems({ ...d, cpus: '', memoryMiB: '512' }, host, [], null)).toEqual({ cpus: 'cpus is empty: give a whole number from 1 to 254' });
    expect(draftProblems({ ...d, cpus: '14', memoryMiB: '16512' }, host, [], null)).toEqual({
      cpus: "cpus=14 is more than this host's KVM allows (8)", memoryMiB: 'memory 16512 MiB is more than this host has (2048 MiB)',
    });
    expect(draftProblems({ ...d, pin: 'abc' }, host, [], null)).toEqual({ pin: 'pin: "abc" is not a host CPU number or range (e.g. 0,1 or 0-3)' });
    expect(draftProblems({ ...d, name: 'X' }, host, ['x'], null)).toEqual({ name: 'a VM named "x" already exists; choose another name' });
    expect(draftProblems({ ...d, cpus: '4', memoryMiB: '512' }, host, [], null)).toEqual({});
  });
});

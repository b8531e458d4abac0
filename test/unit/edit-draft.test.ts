// The wizard's edit mode starts from a saved configuration (configToDraft); saving the untouched
// draft (draftToConfig) must store the same configuration, for every kind of guest and knob.
import { describe, expect, it } from 'vitest';
import { validateConfig } from '../../electron/vmm/config/vm-config.ts';
import { draftToConfig } from '../../renderer/src/views/wizard/draft.ts';
import { configToDraft } from '../../renderer/src/views/wizard/from-config.ts';

const configs: Record<string, unknown>[] = [
  { name: 'probe-timer', guest: 'probe', cpus: 2, memoryMiB: 64, append: 'scenario=timer live=1', haltPollNs: 1_000_000 },
  { name: 'probe-plain', guest: 'probe', cpus: 1, memoryMiB: 32, machine: 'unhalt-1.0', cpuFeatures: { 'kvm-steal-time': false }, pin: [1, 0] },
  { name: 'probe-pm', guest: 'probe', cpus: 4, memoryMiB: 128, cpuPm: true, memLock: true, haltPollNs: 0 },
  { name: 'linux box', guest: 'linux', cpus: 2, memoryMiB: 512, append: 'quiet loglevel=3', pvmProfile: false },
  { name: 'own', guest: 'custom', kernel: '/boot/vmlinux', initrd: '/boot/initrd.img', cpus: 1, memoryMiB: 256, append: 'console=ttyS0' },
  // Disks in each mode, read-only and snapshot together kept as given (read-only wins when it runs).
  // A device no wizard field edits: kept as saved.
  { name: 'kut', guest: 'custom', kernel: '/srv/kvm-unit-tests/x86/msr.flat', cpus: 1, memoryMiB: 64, devices: [{ type: 'isa-debug-exit', iobase: 0xf4, iosize: 4 }] },
  { name: 'disks', guest: 'probe', cpus: 1, memoryMiB: 64, disks: [{ path: '/srv/a.img' }, { path: '/srv/b.img', readonly: true }, { path: '/srv/c.img', snapshot: true }, { path: '/srv/d.img', readonly: true, snapshot: true }] },
];

describe('edit mode: saved configuration -> draft -> configuration', () => {
  for (const raw of configs) {
    it(`keeps ${String(raw.name)} as it was`, () => {
      const saved = validateConfig(raw);
      const again = validateConfig(draftToConfig(configToDraft(saved, null, new Set())));
      expect(again).toEqual(saved);
    });
  }

  it('a probe with the default scenario spelled out comes back meaning the same', () => {
    const saved = validateConfig({ name: 'echo', guest: 'probe', cpus: 1, memoryMiB: 64, append: 'scenario=echo' });
    const again = validateConfig(draftToConfig(configToDraft(saved, null, new Set())));
    expect({ ...again, append: again.append ?? 'scenario=echo' }).toEqual(saved);
  });
});

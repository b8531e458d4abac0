// What the nested lane sends into L1 (files, lanes, a test-name pattern) and the module load order
// both the Linux kit and L1's initramfs use (dependencies first, from each module's depends=).
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { innerSelection, NESTED_FILES } from '../nested/inner-report.ts';
// @ts-expect-error plain ESM build script without types
import { moduleLoadOrder } from '../../native/guest/linux/kernel-modules.mjs';

describe('innerSelection', () => {
  it('defaults to every nested file, the kvm and linux lanes, and no test pattern', () => {
    const s = innerSelection({});
    expect(s.files).toEqual(NESTED_FILES);
    expect(s.lanes).toEqual(['kvm', 'linux']);
    expect(s.tests).toBeUndefined();
    expect(s.append).not.toMatch(/unhalt\.tests=/);
  });

  it('narrows to named files and a one-word test pattern, carried as kernel command-line words', () => {
    const s = innerSelection({ UNHALT_NESTED_FILES: ' test/linux/linux-hw.test.ts ', UNHALT_NESTED_TESTS: 'PCI' });
    expect(s.lanes).toEqual(['linux']);
    expect(s.append).toBe('unhalt.lanes=linux unhalt.filter=test/linux/linux-hw.test.ts unhalt.tests=PCI');
  });

  it('refuses a pattern with spaces (it would split into several kernel words)', () => {
    expect(() => innerSelection({ UNHALT_NESTED_TESTS: 'PCI bus' })).toThrow(/one word/);
  });
});

describe('moduleLoadOrder', () => {
  const dir = mkdtempSync(join(tmpdir(), 'unhalt-modules-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  const ko = (path: string, depends: string) => {
    mkdirSync(join(dir, path, '..'), { recursive: true });
    writeFileSync(join(dir, path), Buffer.from(`\x7fELF junk\0license=GPL\0depends=${depends}\0vermagic=6.1\0`, 'latin1'));
  };
  ko('drivers/virtio/virtio.ko', '');
  ko('drivers/virtio/virtio_ring.ko', '');
  ko('drivers/virtio/virtio_pci.ko', 'virtio_ring,virtio');
  ko('drivers/char/hw_random/virtio-rng.ko', 'virtio_ring,virtio');
  ko('net/loop-a.ko', 'loop_b');
  ko('net/loop-b.ko', 'loop_a');

  it('puts every dependency before its user, once, and maps file names with dashes', () => {
    const order = moduleLoadOrder(dir, ['virtio_pci', 'virtio_rng']).map((m: { name: string }) => m.name);
    expect(order).toEqual(['virtio_ring', 'virtio', 'virtio_pci', 'virtio_rng']);
  });

  it('names a missing module and a dependency loop', () => {
    expect(() => moduleLoadOrder(dir, ['virtio_blk'], 'linux-image-x')).toThrow(/linux-image-x has no module virtio_blk/);
    expect(() => moduleLoadOrder(dir, ['loop_a'])).toThrow(/loop: loop_a -> loop_b -> loop_a/);
  });
});

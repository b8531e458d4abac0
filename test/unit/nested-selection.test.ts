// What the nested lane sends into L1 (files, lanes, a test-name pattern) and the module load order
// both the Linux kit and L1's initramfs use (dependencies first, from each module's depends=).
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { E2E_VM_FILES, LINUX_E2E_FILES, OWN_GUEST_FILES } from '../support/e2e-files.ts';
import { checksMinutes, EXPECTED_MINUTES, filesWithoutResults, innerSelection, l1Append, NESTED_FILES, NESTED_PROBE_FILES, splitFiles } from '../nested/inner-report.ts';
// @ts-expect-error plain ESM build script without types
import { moduleLoadOrder } from '../../native/guest/linux/kernel-modules.mjs';

const ROOT = new URL('../../', import.meta.url).pathname;

describe('innerSelection', () => {
  it('defaults to every nested file, the kvm and linux lanes and the Linux UI file\'s e2e, with no test pattern, where the host has KVM; the full own-guest set is not among them', () => {
    const s = innerSelection({ UNHALT_KVM_DEVICE: '/dev/null' });
    expect(s.files).toEqual(NESTED_FILES);
    for (const f of OWN_GUEST_FILES) expect(NESTED_FILES).not.toContain(f);
    for (const f of LINUX_E2E_FILES) expect(NESTED_FILES).toContain(f);
    expect(s.lanes).toEqual(['kvm', 'linux', 'e2e']);
    expect(s.tests).toBeUndefined();
    expect(s.append).not.toMatch(/unhalt\.tests=/);
  });

  it('adds the UI files that start VMs, as the e2e lane, where the host has no KVM (the e2e lane then leaves them out)', () => {
    const s = innerSelection({ UNHALT_KVM_DEVICE: '/nonexistent/kvm' });
    expect(s.files).toEqual([...NESTED_FILES, ...E2E_VM_FILES]);
    expect(s.lanes).toEqual(['kvm', 'linux', 'e2e']);
    expect(s.append).toContain(`unhalt.lanes=kvm,linux,e2e unhalt.filter=${[...NESTED_FILES, ...E2E_VM_FILES].join(',')}`);
    expect(innerSelection({ UNHALT_KVM_DEVICE: '/nonexistent/kvm', UNHALT_NESTED_E2E: '0' }).files).toEqual(NESTED_FILES);
    expect(innerSelection({ UNHALT_KVM_DEVICE: '/dev/null', UNHALT_NESTED_E2E: '1' }).lanes).toEqual(['kvm', 'linux', 'e2e']);
    for (const f of E2E_VM_FILES) expect(existsSync(join(ROOT, f)), f).toBe(true);
    // Everything rides on L1's kernel command line (x86's limit: 2048 bytes), with the e2e network's word.
    const longest = `${s.append} unhalt.e2e=65535:65535:16:/${'f'.repeat(32)}`;
    expect(longest.length).toBeLessThan(1500);
  });

  it('an e2e file that may skip for want of KVM is on the list of files that start VMs (which run in L1 there); the others never skip', () => {
    const files = readdirSync(join(ROOT, 'test/e2e')).filter((f) => f.endsWith('.test.ts')).map((f) => `test/e2e/${f}`);
    const mayskip = files.filter((f) => /skipReason\(\)/.test(readFileSync(join(ROOT, f), 'utf8')));
    expect(mayskip.sort()).toEqual([...E2E_VM_FILES, ...LINUX_E2E_FILES, ...OWN_GUEST_FILES.filter((f) => f.startsWith('test/e2e/'))].sort());
  });

  it('gives the L1s a checks deadline that follows the selection: 1.5x the busiest L1 + 5 min, at least 45', () => {
    expect(checksMinutes([['test/kvm/boot.test.ts']])).toBe(45);
    // 40 expected minutes on one L1 (five 8-minute files): 65.
    expect(checksMinutes([Array(5).fill('test/linux/linux-workloads.test.ts')])).toBe(65);
    expect(checksMinutes([Array(5).fill('test/linux/linux-workloads.test.ts')], '30')).toBe(30);
  });

  it('leaves the Linux files out on request', () => {
    const s = innerSelection({ UNHALT_NESTED_LINUX: '0', UNHALT_KVM_DEVICE: '/dev/null' });
    expect(s.files).toEqual(NESTED_PROBE_FILES);
    expect(s.lanes).toEqual(['kvm']);
  });

  it('narrows to named files and a one-word test pattern, carried as kernel command-line words', () => {
    const s = innerSelection({ UNHALT_NESTED_FILES: ' test/linux/linux-hw.test.ts ', UNHALT_NESTED_TESTS: 'PCI' });
    expect(s.lanes).toEqual(['linux']);
    expect(s.append).toBe('unhalt.lanes=linux unhalt.filter=test/linux/linux-hw.test.ts unhalt.tests=PCI');
  });

  it('refuses a pattern with spaces (it would split into several kernel words)', () => {
    expect(() => innerSelection({ UNHALT_NESTED_TESTS: 'PCI bus' })).toThrow(/one word/);
    expect(() => innerSelection({ UNHALT_NESTED_TESTS: 'agree|pause' })).toThrow(/letters, digits/);
  });
});

describe('splitFiles: the checks shared by several L1s', () => {
  const minutesOf = (files: string[]) => files.reduce((t, f) => t + EXPECTED_MINUTES[f]!, 0);

  it('gives every file to exactly one L1, keeping the list\'s order within each', () => {
    const parts = splitFiles(NESTED_FILES, 2);
    expect(parts).toHaveLength(2);
    expect(parts.flat().sort()).toEqual([...NESTED_FILES].sort());
    for (const p of parts) expect(p).toEqual(NESTED_FILES.filter((f) => p.includes(f)));
  });

  it('balances the expected time: no L1 waits on another for longer than the longest file', () => {
    const longest = Math.max(...NESTED_FILES.map((f) => EXPECTED_MINUTES[f]!));
    for (const n of [2, 3]) {
      const times = splitFiles(NESTED_FILES, n).map(minutesOf);
      expect(Math.max(...times) - Math.min(...times), `${n} L1s: ${times}`).toBeLessThanOrEqual(longest);
    }
  });

  it('one L1 runs everything; more L1s than files leave some empty; an unknown file counts as the longest', () => {
    expect(splitFiles(NESTED_FILES, 1)).toEqual([NESTED_FILES]);
    expect(splitFiles(['test/kvm/boot.test.ts'], 3).filter((p) => p.length)).toEqual([['test/kvm/boot.test.ts']]);
    const parts = splitFiles(['test/kvm/new.test.ts', 'test/kvm/boot.test.ts', 'test/kvm/stats.test.ts'], 2);
    expect(parts).toEqual([['test/kvm/new.test.ts'], ['test/kvm/boot.test.ts', 'test/kvm/stats.test.ts']]);
  });

  it('every file the lane knows has an expected time', () => {
    expect([...NESTED_FILES, ...E2E_VM_FILES].filter((f) => EXPECTED_MINUTES[f] === undefined)).toEqual([]);
  });

  it('carries one L1\'s part as kernel words, with only its own lanes', () => {
    expect(l1Append(['test/kvm/boot.test.ts', 'test/kvm/stats.test.ts'], 'SMP'))
      .toBe('unhalt.lanes=kvm unhalt.filter=test/kvm/boot.test.ts,test/kvm/stats.test.ts unhalt.tests=SMP');
  });
});

describe('filesWithoutResults', () => {
  it('names the selected files that no lane report has results for', () => {
    const reports = [{ testResults: [{ name: '/project/test/kvm/boot.test.ts', assertionResults: [] }] }];
    expect(filesWithoutResults(['test/kvm/boot.test.ts', 'test/kvm/knobs.test.ts'], reports)).toEqual(['test/kvm/knobs.test.ts']);
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

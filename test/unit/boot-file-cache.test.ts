// The boot files a long-lived service keeps between starts (boot-file-cache.ts): an unchanged
// file comes from memory; a file rewritten in place, replaced by another, or removed is read (or
// refused) again; big files are never kept.
import { copyFileSync, readFileSync, renameSync, rmSync, truncateSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { MAX_CACHED_BOOT_BYTES, clearBootFileCache, readBootFilesCached } from '../../electron/vmm/boot/boot-file-cache.ts';
import { PROBE_KERNEL } from '../../electron/vmm/guests.ts';
import { removeTempHomes, tempHome } from '../support/temp-home.ts';

afterAll(removeTempHomes);
afterEach(clearBootFileCache);

/** A copy of the probe guest. */
function probeCopy(dir: string, name = 'probe.elf'): string {
  const path = join(dir, name);
  copyFileSync(PROBE_KERNEL, path);
  return path;
}

/** Past the cache's window for files changed "just now" (their times may not tell a change). */
const settle = () => new Promise((r) => setTimeout(r, 80));

describe('boot files kept between starts', () => {
  it('an unchanged kernel comes from memory; one rewritten in place is read again', async () => {
    const path = probeCopy(tempHome('boot-cache'));
    const spec = { kernelPath: path, memoryMiB: 64 };
    // Changed just now: read each time (its times could not tell the next change apart).
    expect((await readBootFilesCached(spec)).kernel.bytes === (await readBootFilesCached(spec)).kernel.bytes).toBe(false);
    await settle();
    const first = await readBootFilesCached(spec);
    expect(Buffer.from(first.kernel.bytes).equals(readFileSync(path).subarray(0, first.kernel.bytes.length))).toBe(true);
    // The same file: the same bytes, not read again.
    expect((await readBootFilesCached(spec)).kernel.bytes).toBe(first.kernel.bytes);

    // Rewritten in place, same size, one byte different (a rebuilt kernel): read again.
    const bytes = readFileSync(path);
    const at = first.kernel.bytes.length - 1;
    bytes[at] = bytes[at]! ^ 0xff;
    writeFileSync(path, bytes);
    const second = await readBootFilesCached(spec);
    expect(second.kernel.bytes === first.kernel.bytes).toBe(false);
    expect(second.kernel.bytes[at]).toBe(bytes[at]);
    await settle();
    const third = await readBootFilesCached(spec);
    expect(third.kernel.bytes[at]).toBe(bytes[at]);
    expect((await readBootFilesCached(spec)).kernel.bytes).toBe(third.kernel.bytes);
  });

  it('a kernel replaced by another file (a rename over it) is read again; a removed one is refused', async () => {
    const dir = tempHome('boot-cache-replace');
    const path = probeCopy(dir);
    const spec = { kernelPath: path, memoryMiB: 64 };
    await settle();
    const first = await readBootFilesCached(spec);
    expect((await readBootFilesCached(spec)).kernel.bytes).toBe(first.kernel.bytes);
    const other = probeCopy(dir, 'other.elf');
    const bytes = readFileSync(other);
    bytes[bytes.length - 1] = bytes[bytes.length - 1]! ^ 0xff;
    writeFileSync(other, bytes);
    renameSync(other, path);
    const second = await readBootFilesCached(spec);
    expect(second.kernel.bytes === first.kernel.bytes).toBe(false);
    rmSync(path);
    await expect(readBootFilesCached(spec)).rejects.toThrow(`kernel not found: ${path}`);
  });

  it('an initrd is part of the identity: changing it alone reads both again', async () => {
    const dir = tempHome('boot-cache-initrd');
    const path = probeCopy(dir);
    const initrd = join(dir, 'initrd');
    writeFileSync(initrd, 'first');
    const spec = { kernelPath: path, initrdPath: initrd, memoryMiB: 64 };
    await settle();
    const first = await readBootFilesCached(spec);
    expect(Buffer.from(first.initrd!).toString()).toBe('first');
    expect((await readBootFilesCached(spec)).initrd).toBe(first.initrd);
    writeFileSync(initrd, 'second');
    expect(Buffer.from((await readBootFilesCached(spec)).initrd!).toString()).toBe('second');
  });

  it('files bigger than the limit are read each time, and the fit rule still refuses what cannot fit', async () => {
    const dir = tempHome('boot-cache-big');
    const path = probeCopy(dir);
    const initrd = join(dir, 'big-initrd');
    writeFileSync(initrd, '');
    truncateSync(initrd, MAX_CACHED_BOOT_BYTES + 1);
    const spec = { kernelPath: path, initrdPath: initrd, memoryMiB: 64 };
    await settle();
    const first = await readBootFilesCached(spec);
    // Identity, not contents (comparing 4 MiB buffers' contents is what a matcher would do).
    expect((await readBootFilesCached(spec)).initrd === first.initrd).toBe(false);
    await expect(readBootFilesCached({ ...spec, memoryMiB: 4 })).rejects.toThrow(/does not fit in the guest's memory/);
  });
});

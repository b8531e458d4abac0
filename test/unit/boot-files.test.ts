// Huge boot files (issue 13, finding 7): sizes are checked with stat before anything is read, only
// what a loader loads is read, and reading never blocks the thread that answers clients. Sparse
// files (truncate) make a gigabyte cost nothing on disk; reading one whole would cost RSS and
// seconds, which is what the RSS and elapsed figures below would show.
import { copyFileSync, truncateSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { readBootFiles, readKernelImage } from '../../electron/vmm/boot/boot-files.ts';
import { PROBE_KERNEL } from '../../electron/vmm/guests.ts';
import { createService } from '../../electron/service/service.ts';
import { removeTempHomes, tempHome } from '../support/temp-home.ts';

afterAll(removeTempHomes);

const GiB = 1024 ** 3;
const MiB = 1024 ** 2;

/** Runs `fn` while a 5 ms timer measures how late this thread gets to it (the worst gap). */
async function withLag<T>(fn: () => Promise<T>): Promise<{ value?: T; error?: Error; maxLagMs: number; elapsedMs: number; rssMiB: number }> {
  let last = performance.now();
  let maxLag = 0;
  const timer = setInterval(() => { const now = performance.now(); maxLag = Math.max(maxLag, now - last - 5); last = now; }, 5);
  const rss = process.memoryUsage().rss;
  const t0 = performance.now();
  try {
    const value = await fn();
    return { value, maxLagMs: maxLag, elapsedMs: performance.now() - t0, rssMiB: (process.memoryUsage().rss - rss) / MiB };
  } catch (e) {
    return { error: e as Error, maxLagMs: maxLag, elapsedMs: performance.now() - t0, rssMiB: (process.memoryUsage().rss - rss) / MiB };
  } finally {
    clearInterval(timer);
  }
}

function fakeBzImage(path: string, size: number): void {
  const head = Buffer.alloc(0x400);
  head.write('HdrS', 0x202, 'latin1');
  head.writeUInt16LE(0xaa55, 0x1fe);
  writeFileSync(path, head);
  truncateSync(path, size);
}

const report: string[] = [];
afterAll(() => { process.stdout.write(`${report.join('\n')}\n`); });

describe('boot files are sized before they are read', () => {
  const dir = tempHome('boot-files');

  it('reads only the loaded part of a 1 GiB ELF kernel', async () => {
    const kernel = join(dir, 'huge.elf');
    copyFileSync(PROBE_KERNEL, kernel);
    truncateSync(kernel, GiB);
    const r = await withLag(() => readKernelImage(kernel, 64));
    expect(r.error).toBeUndefined();
    expect(r.value!.fileSize).toBe(GiB);
    expect(r.value!.bytes.length).toBeLessThan(4 * MiB);
    expect(r.rssMiB).toBeLessThan(64);
    report.push(`1 GiB ELF kernel: read ${(r.value!.bytes.length / 1024).toFixed(0)} KiB in ${r.elapsedMs.toFixed(1)} ms, RSS ${r.rssMiB.toFixed(1)} MiB`);
  });

  it('refuses a 900 MiB initrd for a 64 MiB guest without reading it', async () => {
    const initrd = join(dir, 'huge.cpio');
    writeFileSync(initrd, '070701');
    truncateSync(initrd, 900 * MiB);
    const r = await withLag(() => readBootFiles({ kernelPath: PROBE_KERNEL, initrdPath: initrd, memoryMiB: 64 }));
    expect(r.error?.message).toMatch(/^initrd .*huge\.cpio is 900\.0 MiB and does not fit in the guest's memory \(\d+\.\d MiB left for it\): give the VM more memory or use a smaller initrd$/);
    expect(r.rssMiB).toBeLessThan(32);
    expect(r.elapsedMs).toBeLessThan(2000); // liveness only: reading 900 MiB would take far longer and show in RSS
    report.push(`900 MiB initrd, 64 MiB guest: refused in ${r.elapsedMs.toFixed(1)} ms, RSS ${r.rssMiB.toFixed(1)} MiB`);
  });

  it('refuses a 1 GiB bzImage for a 64 MiB guest without reading it, and judges junk by its head', async () => {
    const bz = join(dir, 'huge.bzImage');
    fakeBzImage(bz, GiB);
    const r = await withLag(() => readKernelImage(bz, 64));
    expect(r.error?.message).toMatch(/^kernel .*huge\.bzImage is 1024\.0 MiB and does not fit in the guest's memory/);
    expect(r.rssMiB).toBeLessThan(32);
    const junk = join(dir, 'zeros.bin');
    writeFileSync(junk, '');
    truncateSync(junk, GiB);
    const j = await readKernelImage(junk, 64);
    expect(j.bytes.length).toBe(64 * 1024);
    expect(j.fileSize).toBe(GiB);
  });

  it('keeps this thread answering while a large initrd that fits is read', async () => {
    const initrd = join(dir, 'big.cpio');
    writeFileSync(initrd, '070701');
    truncateSync(initrd, 96 * MiB);
    const r = await withLag(() => readBootFiles({ kernelPath: PROBE_KERNEL, initrdPath: initrd, memoryMiB: 256 }));
    expect(r.error).toBeUndefined();
    expect(r.value!.initrd!.length).toBe(96 * MiB);
    // A synchronous read of 96 MiB holds the thread for its whole duration; chunks of async reads do not.
    expect(r.maxLagMs).toBeLessThan(Math.max(250, r.elapsedMs / 2));
    report.push(`96 MiB initrd read async in ${r.elapsedMs.toFixed(0)} ms, worst timer lag ${r.maxLagMs.toFixed(1)} ms`);
  });
});

describe('the service sizes boot files before it reads them', () => {
  it('createVm and startVm refuse what cannot fit, quickly, and keep answering meanwhile', async () => {
    const home = tempHome('boot-svc');
    const svc = await createService({ home });
    try {
      const initrd = join(home, 'huge.cpio');
      writeFileSync(initrd, '070701');
      truncateSync(initrd, 900 * MiB);
      const custom = { name: 'big', guest: 'custom', kernel: join(home, 'probe.elf'), memoryMiB: 64 };
      copyFileSync(PROBE_KERNEL, custom.kernel);
      const c = await withLag(() => svc.createVm({ ...custom, initrd }));
      expect(c.error?.message).toMatch(/^initrd .*huge\.cpio is 900\.0 MiB and does not fit in the guest's memory/);
      expect(c.rssMiB).toBeLessThan(32);

      // A VM whose kernel grows to 1 GiB after it was saved: the start attempt reads no more
      // than before, and a cheap call made meanwhile is answered at once.
      const vm = await svc.createVm(custom);
      fakeBzImage(custom.kernel, GiB);
      const pings: number[] = [];
      const ping = (async () => { for (let i = 0; i < 5; i++) { const t = performance.now(); await svc.listVms(); pings.push(performance.now() - t); } })();
      const s = await withLag(() => svc.startVm(vm.id));
      await ping;
      expect(s.error?.message).toMatch(/^kernel .*probe\.elf is 1024\.0 MiB and does not fit in the guest's memory/);
      expect(s.rssMiB).toBeLessThan(32);
      expect(Math.max(...pings)).toBeLessThan(1000); // liveness bound, not a timing target
      report.push(`service: 900 MiB initrd refused in ${c.elapsedMs.toFixed(1)} ms (RSS ${c.rssMiB.toFixed(1)} MiB); 1 GiB kernel start refused in ${s.elapsedMs.toFixed(1)} ms, slowest ping ${Math.max(...pings).toFixed(1)} ms`);
    } finally {
      await svc.shutdown();
    }
  });
});

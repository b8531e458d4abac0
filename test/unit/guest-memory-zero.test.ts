// Zeroing guest RAM while an image loads (GuestMemory.fill with 0): bytes never written since the
// allocation are already zero and are left alone (no page faulted in); bytes written before are
// zeroed; once the image is loaded (endLoading) or a writable view was handed out (slice, the
// RAM handle for another thread), zeroing always writes.
import { describe, expect, it } from 'vitest';
import { GuestMemory, MiB } from '../../electron/vmm/memory/guest-memory.ts';

const HIGH = 0x100000;

describe('zeroing fresh guest RAM', () => {
  it('zeroes what the loader wrote, in part or whole, and leaves the rest as allocated (zero)', () => {
    const m = new GuestMemory(4 * MiB);
    m.write(HIGH, new Uint8Array(4096).fill(0xaa));
    m.writeU32(HIGH + 8192, 0xdeadbeef);
    m.fill(HIGH + 1024, 8192); // overlaps both writes
    expect(m.read(HIGH, 1024).every((b) => b === 0xaa)).toBe(true);
    expect(m.read(HIGH + 1024, 8192).every((b) => b === 0)).toBe(true);
    expect(m.readU32(HIGH + 8192)).toBe(0);
    m.fill(2 * MiB, MiB); // never written: zero either way
    expect(m.read(2 * MiB, MiB).every((b) => b === 0)).toBe(true);
    // A non-zero fill always writes, and counts as written.
    m.fill(3 * MiB, 16, 0x55);
    m.fill(3 * MiB, 8);
    expect([...m.read(3 * MiB, 16)]).toEqual([...new Array(8).fill(0), ...new Array(8).fill(0x55)]);
  });

  it('after endLoading, after a view was handed out, and after the RAM handle, zeroing always writes', () => {
    for (const seal of [(m: GuestMemory) => m.endLoading(), (m: GuestMemory) => void m.slice(0, 1), (m: GuestMemory) => void m.ramHandle()]) {
      const m = new GuestMemory(4 * MiB);
      seal(m);
      // Written behind the tracking's back (as a guest or another thread would).
      new Uint8Array(m.sab).fill(0x77, 0, m.sab.byteLength);
      m.fill(HIGH, 4096);
      expect(m.read(HIGH, 4096).every((b) => b === 0)).toBe(true);
      expect(m.read(HIGH + 4096, 1)[0]).toBe(0x77);
    }
  });
});

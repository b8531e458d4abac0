// virtio-rng's request side: each device-writable buffer filled by getrandom(2) straight into
// guest RAM (the real call, through the same binding the I/O thread uses), at most
// MAX_BYTES_PER_REQUEST per chain; a getrandom that comes up short is called again for the rest,
// one that fails ends the chain with what was written (the used length), never an exception;
// read-only buffers are left alone.
import { describe, expect, it } from 'vitest';
import { GuestRam } from '../../electron/vmm/devices/virtio/guest-ram.ts';
import { Chain } from '../../electron/vmm/devices/virtio/virtqueue.ts';
import { MAX_BYTES_PER_REQUEST, virtioRngType, type EntropyIo } from '../../electron/vmm/devices/virtio/virtio-rng.ts';
import { getrandomIo } from '../../native/kvm/libc.ts';

const RAM_BYTES = 1 << 20;

function rig() {
  const bytes = new Uint8Array(new SharedArrayBuffer(RAM_BYTES));
  const ram = new GuestRam(bytes, [{ guestPhysAddr: 0, size: RAM_BYTES, offset: 0 }]);
  const chain = new Chain(8);
  const add = (offset: number, length: number, writable: boolean) => {
    chain.offset[chain.count] = offset;
    chain.length[chain.count] = length;
    chain.writable[chain.count] = writable ? 1 : 0;
    chain.count++;
  };
  return { bytes, ram, chain, add };
}

describe('virtio-rng serves from getrandom', () => {
  it('fills every device-writable buffer in place and says how much; read-only buffers untouched', () => {
    const { bytes, ram, chain, add } = rig();
    add(0x1000, 16, false); // a driver's read-only header: not the device's to write
    add(0x2000, 4096, true);
    add(0x4000, 100, true);
    const written = virtioRngType(getrandomIo).serve(0, chain, ram);
    expect(written).toBe(4196);
    expect(bytes.subarray(0x1000, 0x1010).every((b) => b === 0)).toBe(true);
    expect(new Set(bytes.subarray(0x2000, 0x3000)).size).toBeGreaterThan(200); // 4 KiB of random bytes hold nearly every value
    expect(bytes.subarray(0x4000, 0x4064).some((b) => b !== 0)).toBe(true);
    expect(bytes.subarray(0x4064, 0x5000).every((b) => b === 0)).toBe(true); // nothing past the buffer
    // Two requests never see the same bytes.
    const first = bytes.slice(0x2000, 0x3000);
    virtioRngType(getrandomIo).serve(0, chain, ram);
    expect(Buffer.from(bytes.subarray(0x2000, 0x3000)).equals(Buffer.from(first))).toBe(false);
  });

  it(`writes at most ${MAX_BYTES_PER_REQUEST} bytes per chain`, () => {
    const { bytes, ram, chain, add } = rig();
    add(0, 48 * 1024, true);
    add(0x20000, 48 * 1024, true);
    expect(virtioRngType(getrandomIo).serve(0, chain, ram)).toBe(MAX_BYTES_PER_REQUEST);
    const past = 0x20000 + (MAX_BYTES_PER_REQUEST - 48 * 1024);
    expect(bytes.subarray(past, 0x20000 + 48 * 1024).every((b) => b === 0)).toBe(true);
  });

  it('a getrandom that comes up short is called again; one that fails ends the chain with what was written', () => {
    const { ram, chain, add } = rig();
    add(0x1000, 1000, true);
    add(0x3000, 1000, true);
    const calls: number[] = [];
    let budget = 1300;
    // At most 300 bytes a call (as a signal may cut a large request short), then -1 once 1300 are out.
    const stingy: EntropyIo = {
      ramAddress: getrandomIo.ramAddress,
      getrandomAddress: (address, length) => {
        calls.push(length);
        if (budget <= 0) return -1;
        const n = Math.min(length, 300, budget);
        budget -= n;
        return getrandomIo.getrandomAddress(address, n);
      },
    };
    expect(virtioRngType(stingy).serve(0, chain, ram)).toBe(1300);
    expect(calls).toEqual([1000, 700, 400, 100, 1000, 700]);
  });

  it('is served only where its host calls were given (the I/O thread)', () => {
    const { ram, chain, add } = rig();
    add(0, 16, true);
    expect(() => virtioRngType().serve(0, chain, ram)).toThrow('virtio-rng is served on the I/O thread only');
  });
});

// A hostile driver's virtio-net chains, without KVM: random descriptor layouts (empty,
// one-byte, readable and writable buffers mixed, overlapping ones, headers split anywhere,
// lengths up to past the frame limit) against readTxFrame / writeRxFrame and an independent
// reference written here from the spec (virtio 1.2, 5.1.6). Named invariants after every case:
// nothing throws; transmit returns exactly the reference's frame, or -1 exactly when the reference
// finds no whole header + Ethernet header or too long a frame, and never writes guest RAM; receive
// writes -1 and nothing exactly when the writable buffers are too small, else header (zeros,
// num_buffers 1) then frame across the writable buffers in order, and not one byte elsewhere.
//
// FUZZ_SEED=<n> replays a run; FUZZ_SCALE=<x> scales the number of runs (default 1).
import fc from 'fast-check';
import { afterAll, describe, expect, it } from 'vitest';
import { GuestRam } from '../../electron/vmm/devices/virtio/guest-ram.ts';
import { Chain } from '../../electron/vmm/devices/virtio/virtqueue.ts';
import { MAX_FRAME_BYTES, MIN_FRAME_BYTES, NET_HDR_BYTES, readTxFrame, writeRxFrame } from '../../electron/vmm/devices/virtio/virtio-net.ts';

const SCALE = Number(process.env.FUZZ_SCALE ?? 1) || 1;
const SEED = process.env.FUZZ_SEED === undefined ? undefined : Number(process.env.FUZZ_SEED);
const fcOptions = (numRuns: number) => ({ numRuns: Math.max(1, Math.round(numRuns * SCALE)), ...(SEED === undefined ? {} : { seed: SEED }) });

const RAM_SIZE = 0x30000; // room for a chain past MAX_FRAME_BYTES
const BACKGROUND = Buffer.from(Uint8Array.from({ length: RAM_SIZE }, (_, i) => (i * 131 + 7) & 0xff));
const checks: Record<string, number> = {};
// Frame contents: a window of this, so no case builds a 64 KiB frame byte by byte.
const PATTERN = Uint8Array.from({ length: MAX_FRAME_BYTES + 256 }, (_, i) => (i * 7 + 3) & 0xff);

function inv(name: string, ok: boolean, detail?: () => string): void {
  checks[name] = (checks[name] ?? 0) + 1;
  if (!ok) throw new Error(`invariant "${name}" violated${detail ? `: ${detail()}` : ''}`);
}

interface Buf { offset: number; length: number; writable: boolean }

const small = fc.record({ offset: fc.integer({ min: 0, max: 0x1000 }), length: fc.oneof(fc.constantFrom(0, 1, 2, 11, 12, 13, 14), fc.integer({ min: 0, max: 3000 })), writable: fc.boolean() });
const huge = fc.record({ offset: fc.integer({ min: 0, max: 0x2000 }), length: fc.integer({ min: MAX_FRAME_BYTES - 100, max: MAX_FRAME_BYTES + NET_HDR_BYTES + 100 }), writable: fc.boolean() });
const chainArb = fc.array(fc.oneof({ weight: 12, arbitrary: small }, { weight: 1, arbitrary: huge }), { minLength: 0, maxLength: 12 });

function toChain(bufs: Buf[]): Chain {
  const c = new Chain(16);
  c.count = bufs.length;
  bufs.forEach((b, i) => { c.offset[i] = b.offset; c.length[i] = b.length; c.writable[i] = b.writable ? 1 : 0; });
  return c;
}

/** The spec's transmit rule: the readable bytes in order, the first 12 the header, the rest the frame. */
function referenceTx(ram: Uint8Array, bufs: Buf[]): Uint8Array | undefined {
  const readable = bufs.filter((b) => !b.writable);
  const total = readable.reduce((a, b) => a + b.length, 0);
  if (total > NET_HDR_BYTES + MAX_FRAME_BYTES || total < NET_HDR_BYTES + MIN_FRAME_BYTES) return undefined;
  const bytes = new Uint8Array(total);
  let at = 0;
  for (const b of readable) {
    bytes.set(ram.subarray(b.offset, b.offset + b.length), at);
    at += b.length;
  }
  return bytes.subarray(NET_HDR_BYTES);
}

describe('virtio-net headers against random hostile chains (reference model)', () => {
  const ram = new GuestRam(new Uint8Array(new SharedArrayBuffer(RAM_SIZE)), [{ guestPhysAddr: 0, size: RAM_SIZE, offset: 0 }]);
  // Whole-RAM comparisons in native code (a case looks at all of it).
  const ramBuf = Buffer.from(ram.bytes.buffer, ram.bytes.byteOffset, RAM_SIZE);
  const out = new Uint8Array(MAX_FRAME_BYTES);

  it('transmit: the frame is exactly the reference\'s, or refused exactly when the reference refuses it; RAM untouched', () => {
    fc.assert(fc.property(chainArb, (bufs) => {
      ram.bytes.set(BACKGROUND);
      let n = -2;
      let threw: unknown;
      try { n = readTxFrame(toChain(bufs), ram, out); } catch (e) { threw = e; }
      inv('tx never throws', threw === undefined, () => String(threw));
      const want = referenceTx(ram.bytes, bufs);
      inv('tx refuses exactly what the reference refuses', (n < 0) === (want === undefined), () => `got ${n}, reference ${want?.length}`);
      if (want) {
        inv('tx frame length', n === want.length, () => `${n} vs ${want.length}`);
        inv('tx frame bytes', Buffer.from(out.buffer, 0, n).equals(want));
      }
      inv('tx writes no guest RAM', ramBuf.equals(BACKGROUND));
    }), fcOptions(2000));
  }, 120_000);

  it('receive: header then frame across the writable buffers in order, nothing elsewhere; -1 and nothing when they are too small', () => {
    const frameArb = fc.oneof(fc.integer({ min: 1, max: 64 }), fc.integer({ min: 60, max: 1514 }), fc.constantFrom(MAX_FRAME_BYTES));
    fc.assert(fc.property(chainArb, frameArb, fc.integer({ min: 0, max: 255 }), (bufs, len, seed) => {
      ram.bytes.set(BACKGROUND);
      const frame = PATTERN.subarray(seed, seed + len);
      const total = NET_HDR_BYTES + len;
      const room = bufs.reduce((a, b) => a + (b.writable ? b.length : 0), 0);
      let n = -2;
      let threw: unknown;
      try { n = writeRxFrame(toChain(bufs), ram, frame); } catch (e) { threw = e; }
      inv('rx never throws', threw === undefined, () => String(threw));
      if (room < total) {
        inv('rx refuses a chain too small', n === -1, () => `got ${n} for room ${room} < ${total}`);
        inv('rx writes nothing when it refuses', ramBuf.equals(BACKGROUND));
        return;
      }
      inv('rx used length is header + frame', n === total, () => `${n} vs ${total}`);
      // The reference: the same bytes written in order over the writable buffers (later buffers
      // overwrite earlier ones where a hostile driver made them overlap, as sequential writes do).
      const expected = Buffer.from(BACKGROUND);
      const stream = new Uint8Array(total);
      stream[10] = 1; // num_buffers
      stream.set(frame, NET_HDR_BYTES);
      let at = 0;
      for (const b of bufs) {
        if (!b.writable || at >= total) continue;
        const k = Math.min(b.length, total - at);
        expected.set(stream.subarray(at, at + k), b.offset);
        at += k;
      }
      inv('rx bytes are the reference\'s', ramBuf.equals(expected), () => {
        const i = ram.bytes.findIndex((b, j) => b !== expected[j]);
        return `first difference at ${i}: ${ram.bytes[i]} vs ${expected[i]}`;
      });
    }), fcOptions(2000));
  }, 120_000);

  afterAll(() => {
    // Every invariant was checked, and refusals and acceptances both happened.
    for (const name of ['tx never throws', 'tx refuses exactly what the reference refuses', 'tx frame bytes', 'rx never throws', 'rx refuses a chain too small', 'rx bytes are the reference\'s']) {
      expect(checks[name] ?? 0, name).toBeGreaterThan(0);
    }
  });
});

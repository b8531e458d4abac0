import { describe, expect, it } from 'vitest';
import {
  BINARY_STATS_UNAVAILABLE, BufferStatsSource, StatsReader, decodeHeader, logBucketBounds, unitSymbol, type StatsSource,
} from '../../native/kvm/stats.ts';
import { BASE, TYPE, UNIT, buildStatsImage, type ImageStat } from './helpers/stats-image.ts';

// Listed in one order, laid out in another (as the kernel does for max_mmu_rmap_size): lookups
// must go by name and descriptor offset, never by position.
const STATS: ImageStat[] = [
  { name: 'halt_wait_ns', unit: UNIT.seconds, exponent: -9, offset: 32, values: [123_456_789] },
  { name: 'halt_exits', offset: 8, values: [2n ** 40n + 7n] },
  { name: 'blocking', type: TYPE.instant, unit: UNIT.boolean, offset: 0, values: [1] },
  { name: 'max_rmap', type: TYPE.peak, offset: 24, values: [42] },
  { name: 'halt_wait_hist', type: TYPE.logHist, unit: UNIT.seconds, exponent: -9, offset: 40, values: [3, 0, 5, 1, 0, 0, 0, 9] },
  { name: 'halt_exits_lin', type: TYPE.linearHist, bucketSize: 100, offset: 104, values: [1, 2, 3, 4] },
  { name: 'tlb_bytes', unit: UNIT.bytes, base: BASE.pow2, exponent: 10, offset: 16, values: [64] },
];

function reader(stats = STATS) {
  const image = buildStatsImage('kvm-1234/vcpu-0', stats);
  let reads = 0;
  const mem = new BufferStatsSource(image.bytes);
  const source: StatsSource = { read: (t, p) => { reads++; return mem.read(t, p); } };
  return { image, source, reads: () => reads, r: StatsReader.fromSource(source) };
}

describe('KVM binary stats decoding', () => {
  it('decodes the header and the id string', () => {
    const { image, r } = reader();
    expect(decodeHeader(image.bytes)).toEqual({
      flags: 0, nameSize: 48, numDesc: STATS.length, idOffset: 24, descOffset: 72, dataOffset: image.dataOffset,
    });
    expect(r.id).toBe('kvm-1234/vcpu-0');
    expect(r.descriptors.map((d) => d.name)).toEqual(STATS.map((s) => s.name));
    expect(r.dataSize).toBe(136);
  });

  it('decodes type, unit, base and exponent of each descriptor', () => {
    const { r } = reader();
    expect(r.descriptor('halt_wait_ns')).toMatchObject({ type: 'cumulative', unit: 'seconds', base: 10, exponent: -9, size: 1, offset: 32 });
    expect(r.descriptor('blocking')).toMatchObject({ type: 'instant', unit: 'boolean' });
    expect(r.descriptor('max_rmap')).toMatchObject({ type: 'peak', unit: 'none' });
    expect(r.descriptor('halt_wait_hist')).toMatchObject({ type: 'log-hist', size: 8, offset: 40 });
    expect(r.descriptor('halt_exits_lin')).toMatchObject({ type: 'linear-hist', bucketSize: 100 });
    expect(r.descriptor('tlb_bytes')).toMatchObject({ unit: 'bytes', base: 2, exponent: 10 });
    expect(unitSymbol(r.descriptor('halt_wait_ns')!)).toBe('ns');
    expect(unitSymbol(r.descriptor('tlb_bytes')!)).toBe('KiB');
    expect(unitSymbol({ unit: 'seconds', base: 10, exponent: -6 })).toBe('us');
    expect(unitSymbol({ unit: 'cycles', base: 10, exponent: 0 })).toBe('cycles');
    expect(unitSymbol({ unit: 'none', base: 10, exponent: 0 })).toBe('');
  });

  it('reads values by name, whatever the order of descriptors and offsets', () => {
    const { r } = reader();
    const s = r.sample();
    expect(s.value('halt_exits')).toBe(2 ** 40 + 7);
    expect(s.value('halt_wait_ns')).toBe(123_456_789);
    expect(s.value('blocking')).toBe(1);
    expect(s.value('max_rmap')).toBe(42);
    expect(s.value(r.field('tlb_bytes'))).toBe(64);
    // The same stats listed in another order decode the same.
    const shuffled = reader([...STATS].reverse()).r.sample();
    for (const st of STATS) expect(shuffled.value(st.name)).toBe(s.value(st.name));
    expect(r.has('halt_exits')).toBe(true);
    expect(r.has('nope')).toBe(false);
    expect(() => s.value('nope')).toThrow(/does not exist/);
    expect(s.scalars()).toMatchObject({ halt_exits: 2 ** 40 + 7, blocking: 1, tlb_bytes: 64 });
    expect(s.scalars()).not.toHaveProperty('halt_wait_hist');
  });

  it('decodes a log2 histogram with its bucket bounds in the stat unit', () => {
    const h = reader().r.sample().histogram('halt_wait_hist');
    expect(h).toMatchObject({ type: 'log-hist', unit: 'seconds', unitSymbol: 'ns', scale: 1e-9, total: 18 });
    expect(h.buckets).toEqual([
      { low: 0, high: 1, count: 3 },
      { low: 1, high: 2, count: 0 },
      { low: 2, high: 4, count: 5 },
      { low: 4, high: 8, count: 1 },
      { low: 8, high: 16, count: 0 },
      { low: 16, high: 32, count: 0 },
      { low: 32, high: 64, count: 0 },
      { low: 64, high: Infinity, count: 9 },
    ]);
    // KVM's 32-bucket halt histograms end at 2^30 ns (~1.07 s) and up.
    expect(logBucketBounds(31, 32)).toEqual([2 ** 30, Infinity]);
    expect(() => reader().r.sample().histogram('halt_exits')).toThrow(/not a histogram/);
  });

  it('decodes a linear histogram', () => {
    const h = reader().r.sample().histogram('halt_exits_lin');
    expect(h.buckets).toEqual([
      { low: 0, high: 100, count: 1 }, { low: 100, high: 200, count: 2 },
      { low: 200, high: 300, count: 3 }, { low: 300, high: Infinity, count: 4 },
    ]);
  });

  it('samples with exactly one read of the data block, reusing the buffer it is given', () => {
    const { image, r, reads } = reader();
    const before = reads();
    const s1 = r.sample();
    expect(reads() - before).toBe(1);
    image.setValue('halt_exits', 0, 99);
    const s2 = r.sample(s1);
    expect(s2).toBe(s1);
    expect(s2.value('halt_exits')).toBe(99);
    expect(reads() - before).toBe(2);
  });

  it('fails clearly on a short read and without binary stats', () => {
    const { image } = reader();
    const short = new BufferStatsSource(image.bytes.subarray(0, image.bytes.length - 8));
    expect(() => StatsReader.fromSource(short).sample()).toThrow(/short read of KVM stats data/);
    expect(() => StatsReader.fromSource(new BufferStatsSource(new Uint8Array(10)))).toThrow(/short read of KVM stats header/);
    expect(() => StatsReader.open(-1)).toThrow(BINARY_STATS_UNAVAILABLE);
  });
});

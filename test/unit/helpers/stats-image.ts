// Builds a KVM binary stats fd image by hand (header, id, descriptors, data), as the kernel lays it
// out, so the reader can be checked without KVM.
export interface ImageStat {
  name: string;
  /** type | unit << 4 | base << 8, as in KVM_STATS_TYPE_* / KVM_STATS_UNIT_* / KVM_STATS_BASE_*. */
  type?: number;
  unit?: number;
  base?: number;
  exponent?: number;
  bucketSize?: number;
  /** Byte offset in the data block (defaults to packing in listing order). */
  offset?: number;
  values: (number | bigint)[];
}

export const TYPE = { cumulative: 0, instant: 1, peak: 2, linearHist: 3, logHist: 4 } as const;
export const UNIT = { none: 0, bytes: 1, seconds: 2, cycles: 3, boolean: 4 } as const;
export const BASE = { pow10: 0, pow2: 1 } as const;

export function buildStatsImage(id: string, stats: ImageStat[], nameSize = 48): { bytes: Uint8Array; dataOffset: number; setValue(name: string, index: number, v: number | bigint): void } {
  const idOffset = 24;
  const descOffset = idOffset + nameSize;
  const stride = 16 + nameSize;
  const dataOffset = descOffset + stride * stats.length;
  let packed = 0;
  const offsets = stats.map((s) => {
    const o = s.offset ?? packed;
    packed = Math.max(packed, o + s.values.length * 8);
    return o;
  });
  const dataSize = Math.max(...offsets.map((o, i) => o + stats[i]!.values.length * 8));
  const bytes = new Uint8Array(dataOffset + dataSize);
  const v = new DataView(bytes.buffer);
  [0, nameSize, stats.length, idOffset, descOffset, dataOffset].forEach((x, i) => v.setUint32(i * 4, x, true));
  bytes.set(new TextEncoder().encode(id), idOffset);
  stats.forEach((s, i) => {
    const at = descOffset + i * stride;
    v.setUint32(at, (s.type ?? 0) | ((s.unit ?? 0) << 4) | ((s.base ?? 0) << 8), true);
    v.setInt16(at + 4, s.exponent ?? 0, true);
    v.setUint16(at + 6, s.values.length, true);
    v.setUint32(at + 8, offsets[i]!, true);
    v.setUint32(at + 12, s.bucketSize ?? 0, true);
    bytes.set(new TextEncoder().encode(s.name), at + 16);
    s.values.forEach((x, k) => v.setBigUint64(dataOffset + offsets[i]! + k * 8, BigInt(x), true));
  });
  return {
    bytes,
    dataOffset,
    setValue(name, index, x) {
      const i = stats.findIndex((s) => s.name === name);
      v.setBigUint64(dataOffset + offsets[i]! + index * 8, BigInt(x), true);
    },
  };
}

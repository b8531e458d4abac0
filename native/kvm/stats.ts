// Reader of KVM binary stats fds (KVM_GET_STATS_FD, Documentation/virt/kvm/api.rst "KVM_GET_STATS_FD").
// The layout (header, id, descriptors) is fixed for the fd's life, so it is parsed once and names
// are resolved to data offsets once; each sample is then a single pread of the data block into a
// preallocated buffer. Stats are always looked up by name: their order and offsets differ between
// kernels (even within one kernel the offsets are not sorted, see max_mmu_rmap_size).
import { OsError, addressOf, errno, libc } from './libc.ts';

/** Said wherever a host kernel lacks KVM_CAP_BINARY_STATS_FD (the VM then hands out -1 fds). */
export const BINARY_STATS_UNAVAILABLE = 'KVM binary stats not available on this host kernel';

export type StatType = 'cumulative' | 'instant' | 'peak' | 'linear-hist' | 'log-hist';
export type StatUnit = 'none' | 'bytes' | 'seconds' | 'cycles' | 'boolean';

const TYPES: readonly StatType[] = ['cumulative', 'instant', 'peak', 'linear-hist', 'log-hist'];
const UNITS: readonly StatUnit[] = ['none', 'bytes', 'seconds', 'cycles', 'boolean'];

export const HEADER_BYTES = 24;
/** struct kvm_stats_desc without its name: flags u32, exponent s16, size u16, offset u32, bucket_size u32. */
export const DESCRIPTOR_FIXED_BYTES = 16;

export interface StatsHeader {
  flags: number;
  nameSize: number;
  numDesc: number;
  idOffset: number;
  descOffset: number;
  dataOffset: number;
}

export interface StatDescriptor {
  name: string;
  type: StatType;
  unit: StatUnit;
  /** Values are raw * base^exponent in `unit` (halt_wait_ns: seconds, 10, -9). */
  base: 10 | 2;
  exponent: number;
  /** Number of u64 values (histogram buckets; 1 for a plain stat). */
  size: number;
  /** Byte offset of the first value inside the data block. */
  offset: number;
  /** Linear histograms only: the width of one bucket, in raw units. */
  bucketSize: number;
  /** The raw flags word, for types or units this reader does not know yet. */
  flags: number;
}

export interface HistogramBucket {
  /** Inclusive lower bound, in raw units (ns for a seconds stat with exponent -9). */
  low: number;
  /** Exclusive upper bound; Infinity for the last bucket. */
  high: number;
  count: number;
}

export interface Histogram {
  name: string;
  type: 'linear-hist' | 'log-hist';
  unit: StatUnit;
  /** Symbol of the raw unit the bounds are in: 'ns', 'us', 'bytes', 'cycles', '' … */
  unitSymbol: string;
  /** Multiply a raw bound by this to get base units (seconds, bytes). */
  scale: number;
  buckets: HistogramBucket[];
  total: number;
}

/** A stat resolved once: reading it is an offset into the sample, no name lookup. */
export interface StatField {
  readonly descriptor: StatDescriptor;
  readonly offset: number;
}

/** Where the stats bytes come from: a stats fd, or a buffer in tests. */
export interface StatsSource {
  /** Reads up to target.length bytes at position into target; returns how many it read. */
  read(target: Uint8Array, position: number): number;
}

/** A KVM stats fd read with pread. Never closes the fd: the VM that obtained it owns it. */
export class FdStatsSource implements StatsSource {
  readonly fd: number;
  private lastTarget?: Uint8Array;
  private lastAddress = 0;

  constructor(fd: number) {
    this.fd = fd;
  }

  read(target: Uint8Array, position: number): number {
    // The sample buffer is the same every time: resolve its address once, not per pread.
    if (target !== this.lastTarget) {
      this.lastTarget = target;
      this.lastAddress = addressOf(target);
    }
    const n = libc.preadAddress(this.fd, this.lastAddress, target.byteLength, position);
    if (n < 0) throw new OsError('pread (KVM stats fd)', errno());
    return Number(n);
  }
}

/** A stats image in memory (tests, or bytes saved from a real fd). */
export class BufferStatsSource implements StatsSource {
  readonly bytes: Uint8Array;
  constructor(bytes: Uint8Array) {
    this.bytes = bytes;
  }
  read(target: Uint8Array, position: number): number {
    const n = Math.max(0, Math.min(target.byteLength, this.bytes.byteLength - position));
    target.set(this.bytes.subarray(position, position + n));
    return n;
  }
}

function view(bytes: Uint8Array): DataView {
  return new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

function cString(bytes: Uint8Array): string {
  const end = bytes.indexOf(0);
  return Buffer.from(bytes.buffer, bytes.byteOffset, end < 0 ? bytes.byteLength : end).toString('latin1');
}

export function decodeHeader(bytes: Uint8Array): StatsHeader {
  if (bytes.byteLength < HEADER_BYTES) throw new Error(`KVM stats header is ${bytes.byteLength} bytes, expected ${HEADER_BYTES}`);
  const v = view(bytes);
  return {
    flags: v.getUint32(0, true),
    nameSize: v.getUint32(4, true),
    numDesc: v.getUint32(8, true),
    idOffset: v.getUint32(12, true),
    descOffset: v.getUint32(16, true),
    dataOffset: v.getUint32(20, true),
  };
}

/** Decodes `count` descriptors of 16 + nameSize bytes each. */
export function decodeDescriptors(bytes: Uint8Array, count: number, nameSize: number): StatDescriptor[] {
  const stride = DESCRIPTOR_FIXED_BYTES + nameSize;
  if (bytes.byteLength < stride * count) throw new Error(`KVM stats descriptors truncated: ${bytes.byteLength} of ${stride * count} bytes`);
  const v = view(bytes);
  const out: StatDescriptor[] = [];
  for (let i = 0; i < count; i++) {
    const at = i * stride;
    const flags = v.getUint32(at, true);
    out.push({
      name: cString(bytes.subarray(at + DESCRIPTOR_FIXED_BYTES, at + stride)),
      type: TYPES[flags & 0xf] ?? 'cumulative',
      unit: UNITS[(flags >> 4) & 0xf] ?? 'none',
      base: ((flags >> 8) & 0xf) === 1 ? 2 : 10,
      exponent: v.getInt16(at + 4, true),
      size: v.getUint16(at + 6, true),
      offset: v.getUint32(at + 8, true),
      bucketSize: v.getUint32(at + 12, true),
      flags,
    });
  }
  return out;
}

const SI_PREFIX: Record<number, string> = { 0: '', [-3]: 'm', [-6]: 'u', [-9]: 'n', 3: 'k', 6: 'M', 9: 'G' };
const BIN_PREFIX: Record<number, string> = { 0: '', 10: 'Ki', 20: 'Mi', 30: 'Gi' };

/** The symbol of a stat's raw unit, e.g. seconds·10^-9 -> 'ns', bytes·2^10 -> 'KiB'. */
export function unitSymbol(d: Pick<StatDescriptor, 'unit' | 'base' | 'exponent'>): string {
  const base = d.unit === 'seconds' ? 's' : d.unit === 'bytes' ? 'B' : d.unit === 'cycles' ? 'cycles' : '';
  if (!base) return '';
  const prefix = d.base === 10 ? SI_PREFIX[d.exponent] : BIN_PREFIX[d.exponent];
  if (prefix === undefined) return `${d.base}^${d.exponent} ${base}`;
  return d.unit === 'cycles' ? `${prefix}${prefix ? ' ' : ''}cycles` : `${prefix}${base}`;
}

/** Bucket i of a log2 histogram (KVM's fls64 index): [0,1), [1,2), [2,4) … [2^(n-2), ∞). */
export function logBucketBounds(i: number, size: number): [number, number] {
  const low = i === 0 ? 0 : 2 ** (i - 1);
  const high = i === size - 1 ? Infinity : 2 ** i;
  return [low, high];
}

/** Bucket i of a linear histogram: [i·w, (i+1)·w), the last one open-ended. */
export function linearBucketBounds(i: number, size: number, width: number): [number, number] {
  return [i * width, i === size - 1 ? Infinity : (i + 1) * width];
}

const MAX_DESCRIPTORS = 65536;
const MAX_NAME = 4096;

export class StatsReader {
  readonly source: StatsSource;
  readonly header: StatsHeader;
  /** e.g. "kvm-9844/vcpu-0". */
  readonly id: string;
  readonly descriptors: readonly StatDescriptor[];
  /** Bytes of the data block: the end of the furthest stat. */
  readonly dataSize: number;
  private readonly byName = new Map<string, StatField>();

  private constructor(source: StatsSource, header: StatsHeader, id: string, descriptors: StatDescriptor[]) {
    this.source = source;
    this.header = header;
    this.id = id;
    this.descriptors = descriptors;
    let end = 0;
    for (const d of descriptors) {
      this.byName.set(d.name, { descriptor: d, offset: d.offset });
      end = Math.max(end, d.offset + d.size * 8);
    }
    this.dataSize = end;
  }

  /** Reads the layout of a KVM stats fd (the fd stays owned by the caller). */
  static open(fd: number): StatsReader {
    if (fd < 0) throw new Error(BINARY_STATS_UNAVAILABLE);
    return StatsReader.fromSource(new FdStatsSource(fd));
  }

  static fromSource(source: StatsSource): StatsReader {
    const headerBytes = readExactly(source, HEADER_BYTES, 0, 'header');
    const header = decodeHeader(headerBytes);
    if (header.numDesc > MAX_DESCRIPTORS || header.nameSize > MAX_NAME) {
      throw new Error(`implausible KVM stats header (${header.numDesc} descriptors, names of ${header.nameSize} bytes)`);
    }
    const id = cString(readExactly(source, header.nameSize, header.idOffset, 'id'));
    const stride = DESCRIPTOR_FIXED_BYTES + header.nameSize;
    const descBytes = readExactly(source, stride * header.numDesc, header.descOffset, 'descriptors');
    return new StatsReader(source, header, id, decodeDescriptors(descBytes, header.numDesc, header.nameSize));
  }

  has(name: string): boolean {
    return this.byName.has(name);
  }

  descriptor(name: string): StatDescriptor | undefined {
    return this.byName.get(name)?.descriptor;
  }

  /** Resolves a stat name once, for reading it from many samples without a lookup. */
  field(name: string): StatField {
    const f = this.byName.get(name);
    if (!f) throw new Error(`KVM stat "${name}" does not exist on this host kernel (${this.id})`);
    return f;
  }

  /**
   * Reads the whole data block with one pread. Pass the previous sample back as `into` to reuse
   * its buffer (the sampler double-buffers two samples per fd and allocates nothing per tick).
   */
  sample(into?: StatsSample): StatsSample {
    const s = into && into.reader === this ? into : new StatsSample(this);
    const n = this.source.read(s.bytes, this.header.dataOffset);
    if (n !== this.dataSize) throw new Error(`short read of KVM stats data (${this.id}): ${n} of ${this.dataSize} bytes`);
    return s;
  }
}

function readExactly(source: StatsSource, length: number, position: number, what: string): Uint8Array {
  const bytes = new Uint8Array(length);
  const n = source.read(bytes, position);
  if (n !== length) throw new Error(`short read of KVM stats ${what}: ${n} of ${length} bytes`);
  return bytes;
}

/** One snapshot of a stats fd's data block. */
export class StatsSample {
  readonly reader: StatsReader;
  /** Backed by its own ArrayBuffer, which has a stable address for pread. */
  readonly bytes: Uint8Array;
  private readonly view: DataView;

  constructor(reader: StatsReader) {
    this.reader = reader;
    this.bytes = new Uint8Array(new ArrayBuffer(reader.dataSize));
    this.view = new DataView(this.bytes.buffer);
  }

  /** u64 at a byte offset, as a Number (exact below 2^53). */
  u64(offset: number): number {
    return this.view.getUint32(offset, true) + this.view.getUint32(offset + 4, true) * 4294967296;
  }

  /** A stat's raw value (index: which u64 of a multi-valued stat). */
  value(stat: string | StatField, index = 0): number {
    const f = typeof stat === 'string' ? this.reader.field(stat) : stat;
    if (index < 0 || index >= f.descriptor.size) throw new RangeError(`${f.descriptor.name} has ${f.descriptor.size} values, not index ${index}`);
    return this.u64(f.offset + index * 8);
  }

  /** Every scalar stat (size 1) by name: for display, not for hot paths. */
  scalars(): Record<string, number> {
    const out: Record<string, number> = {};
    for (const d of this.reader.descriptors) if (d.size === 1 && d.type !== 'log-hist' && d.type !== 'linear-hist') out[d.name] = this.u64(d.offset);
    return out;
  }

  histogram(stat: string | StatField): Histogram {
    const d = typeof stat === 'string' ? this.reader.field(stat).descriptor : stat.descriptor;
    if (d.type !== 'log-hist' && d.type !== 'linear-hist') throw new Error(`KVM stat "${d.name}" is ${d.type}, not a histogram`);
    const buckets: HistogramBucket[] = [];
    let total = 0;
    for (let i = 0; i < d.size; i++) {
      const count = this.u64(d.offset + i * 8);
      const [low, high] = d.type === 'log-hist' ? logBucketBounds(i, d.size) : linearBucketBounds(i, d.size, d.bucketSize);
      buckets.push({ low, high, count });
      total += count;
    }
    return { name: d.name, type: d.type, unit: d.unit, unitSymbol: unitSymbol(d), scale: d.base ** d.exponent, buckets, total };
  }
}

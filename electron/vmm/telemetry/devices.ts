// The per-device half of a telemetry sample: each virtio device's counters (VirtioCounters, read
// from shared state by any thread) as named cumulative values and per-second rates, in the same
// conventions as the per-vCPU records (fields.ts): a counter under its own name, its rate with a
// `_per_s` suffix, null where an interval cannot say. Drops and errors are totals only.
//
// The transport's counters are 32-bit words that wrap (4 GiB of bytes goes by in seconds on a
// fast disk); they are unwrapped here, one interval at a time, so the published totals only rise.
import type { VirtioCounters } from '../devices/virtio/virtio-pci.ts';

/** Each device's counters right now, by board name (rng, net, blk0...); {} before the VM is built. */
export type DeviceCounterSource = () => Readonly<Partial<Record<string, VirtioCounters>>>;

/**
 * One device at one sample. `device` is its board name; counters: notifications (the I/O thread
 * took; mmio_notifications of them came as MMIO exits, the rest by ioeventfd), interrupts (MSIs
 * sent), requests and bytes (per direction where a device has two: net rx_/tx_, blk reads /
 * writes and read_/write_bytes), each with `_per_s`; drops, errors and resets as totals.
 */
export interface DeviceRecord {
  /** ms since the VM started (the vCPU records' sampling instant). */
  t: number;
  device: string;
  /** ms since the previous sample. */
  interval_ms: number;
  [field: string]: number | string | null;
}

/** The transport's counters with every 32-bit word unwrapped (and the type's own, as they are). */
type Counts = Omit<VirtioCounters, 'status' | 'error' | 'lastError'>;

interface DeviceField {
  name: string;
  /** Published with `${name}_per_s` (counts), or as a total only (drops, errors). */
  rate: boolean;
  read(c: Counts): number;
}

const dev = (c: Counts, k: string) => c.device?.[k] ?? NaN;
const at = (a: readonly number[], i: number) => a[i] ?? 0;
const sum = (a: readonly number[]) => a.reduce((x, y) => x + y, 0);

const COMMON_HEAD: DeviceField[] = [
  { name: 'notifications', rate: true, read: (c) => c.kicks },
  { name: 'mmio_notifications', rate: true, read: (c) => c.mmioNotifies },
  { name: 'interrupts', rate: true, read: (c) => c.interrupts },
];
const COMMON_TAIL: DeviceField[] = [
  { name: 'drops', rate: false, read: (c) => sum(c.drops) },
  { name: 'resets', rate: false, read: (c) => c.resets },
];

/** The fields of each kind of device, in column order. */
export const DEVICE_FIELDS = {
  rng: [
    ...COMMON_HEAD,
    { name: 'requests', rate: true, read: (c) => at(c.requests, 0) },
    { name: 'bytes', rate: true, read: (c) => at(c.bytes, 0) },
    ...COMMON_TAIL,
    { name: 'errors', rate: false, read: (c) => c.needsResets },
  ],
  net: [
    ...COMMON_HEAD,
    // Queue 0 receives, queue 1 transmits; bytes include the 12-byte virtio_net_hdr both ways.
    { name: 'requests', rate: true, read: (c) => at(c.requests, 0) + at(c.requests, 1) },
    { name: 'bytes', rate: true, read: (c) => at(c.bytes, 0) + at(c.readBytes, 1) },
    { name: 'rx_frames', rate: true, read: (c) => at(c.requests, 0) },
    { name: 'tx_frames', rate: true, read: (c) => at(c.requests, 1) },
    { name: 'rx_bytes', rate: true, read: (c) => at(c.bytes, 0) },
    { name: 'tx_bytes', rate: true, read: (c) => at(c.readBytes, 1) },
    ...COMMON_TAIL,
    { name: 'rx_drops', rate: false, read: (c) => at(c.drops, 0) },
    { name: 'tx_drops', rate: false, read: (c) => at(c.drops, 1) },
    { name: 'errors', rate: false, read: (c) => c.needsResets },
  ],
  blk: [
    ...COMMON_HEAD,
    { name: 'requests', rate: true, read: (c) => at(c.requests, 0) },
    // Data bytes (the disk's own 64-bit counters), not the used lengths with their status bytes.
    { name: 'bytes', rate: true, read: (c) => dev(c, 'bytesRead') + dev(c, 'bytesWritten') },
    { name: 'reads', rate: true, read: (c) => dev(c, 'reads') },
    { name: 'writes', rate: true, read: (c) => dev(c, 'writes') },
    { name: 'read_bytes', rate: true, read: (c) => dev(c, 'bytesRead') },
    { name: 'write_bytes', rate: true, read: (c) => dev(c, 'bytesWritten') },
    { name: 'flushes', rate: true, read: (c) => dev(c, 'flushes') },
    { name: 'discards', rate: true, read: (c) => dev(c, 'discards') },
    ...COMMON_TAIL,
    // Requests answered IOERR or UNSUPP, and DEVICE_NEEDS_RESETs.
    { name: 'errors', rate: false, read: (c) => dev(c, 'ioErrors') + dev(c, 'unsupported') + c.needsResets },
  ],
  /** A device type this file does not know yet: what the transport counts. */
  virtio: [
    ...COMMON_HEAD,
    { name: 'requests', rate: true, read: (c) => sum(c.requests) },
    { name: 'bytes', rate: true, read: (c) => sum(c.bytes) + sum(c.readBytes) },
    ...COMMON_TAIL,
    { name: 'errors', rate: false, read: (c) => c.needsResets },
  ],
} satisfies Record<string, DeviceField[]>;

export type DeviceKind = keyof typeof DEVICE_FIELDS;

/** The kind of a board name: rng, net, blk0..blk7; anything else is a plain virtio device. */
export function deviceKind(name: string): DeviceKind {
  return name === 'rng' ? 'rng' : name === 'net' ? 'net' : /^blk\d+$/.test(name) ? 'blk' : 'virtio';
}

const U32 = 0x1_0000_0000;

/** Follows one device's 32-bit words across wraps (one wrap per interval at most: 4 GiB in 100 ms). */
class Unwrapper {
  private last = new Map<string, number>();
  private base = new Map<string, number>();

  private one(key: string, raw: number): number {
    const prev = this.last.get(key);
    let base = this.base.get(key) ?? 0;
    if (prev !== undefined && raw < prev) base += U32;
    this.last.set(key, raw);
    this.base.set(key, base);
    return base + raw;
  }

  counts(c: VirtioCounters): Counts {
    const list = (k: string, a: readonly number[] | undefined) => (a ?? []).map((v, i) => this.one(`${k}${i}`, v));
    return {
      kicks: this.one('kicks', c.kicks), mmioNotifies: this.one('mmio', c.mmioNotifies), interrupts: this.one('irq', c.interrupts),
      resets: this.one('resets', c.resets), needsResets: this.one('nr', c.needsResets),
      requests: list('rq', c.requests), bytes: list('b', c.bytes), drops: list('d', c.drops), readBytes: list('rb', c.readBytes),
      ...(c.device ? { device: c.device } : {}),
    };
  }
}

interface Slot {
  name: string;
  fields: readonly DeviceField[];
  /** `${name}_per_s` of each field (built once). */
  rateKeys: (string | null)[];
  /** rows × fields cumulative values; NaN where the device was not there. */
  data: Float64Array;
  unwrap: Unwrapper;
}

/**
 * The bounded device history of one VM: one row per sampling instant (the vCPU series' instants),
 * each device in its own pre-sized block, created the first time the source names it. A device
 * absent at an instant (the VM not built yet, or gone) has NaN there and no record.
 */
export class DeviceSeries {
  private readonly rows: number;
  private readonly times: Float64Array;
  private readonly slots: Slot[] = [];
  private head = 0;
  private stored = 0;

  constructor(capacity: number) {
    this.rows = capacity + 1;
    this.times = new Float64Array(this.rows);
  }

  /** Device names seen so far, in order of appearance. */
  get devices(): string[] {
    return this.slots.map((s) => s.name);
  }

  /** Adds a row at time t with each device's counters from `counters`. */
  push(t: number, counters: Readonly<Partial<Record<string, VirtioCounters>>>): void {
    const row = this.head;
    this.times[row] = t;
    this.head = (this.head + 1) % this.rows;
    if (this.stored < this.rows) this.stored++;
    for (const slot of this.slots) slot.data.fill(NaN, row * slot.fields.length, (row + 1) * slot.fields.length);
    for (const name in counters) {
      const c = counters[name];
      if (!c) continue;
      const slot = this.slot(name);
      const counts = slot.unwrap.counts(c);
      const base = row * slot.fields.length;
      slot.fields.forEach((f, i) => { slot.data[base + i] = f.read(counts); });
    }
  }

  private slot(name: string): Slot {
    let s = this.slots.find((x) => x.name === name);
    if (!s) {
      const fields = DEVICE_FIELDS[deviceKind(name)];
      s = {
        name, fields, rateKeys: fields.map((f) => (f.rate ? `${f.name}_per_s` : null)),
        data: new Float64Array(this.rows * fields.length).fill(NaN), unwrap: new Unwrapper(),
      };
      this.slots.push(s);
    }
    return s;
  }

  /** Physical row of the k-th stored row, oldest first. */
  private row(k: number): number {
    return (this.head - this.stored + k + this.rows) % this.rows;
  }

  /** Time of the oldest record, or NaN when empty. */
  get oldestT(): number {
    return this.stored < 2 ? NaN : this.times[this.row(1)]!;
  }

  /** The newest row's records (one per device present), or none before the second row. */
  latest(): DeviceRecord[] {
    return this.stored < 2 ? [] : this.recordsOfRow(this.stored - 1);
  }

  /** Every stored record, oldest first; within a row, devices in order of appearance. */
  records(): DeviceRecord[] {
    const out: DeviceRecord[] = [];
    for (let k = 1; k < this.stored; k++) out.push(...this.recordsOfRow(k));
    return out;
  }

  private recordsOfRow(k: number): DeviceRecord[] {
    const cur = this.row(k);
    const prev = this.row(k - 1);
    const t = this.times[cur]!;
    const dtMs = t - this.times[prev]!;
    const out: DeviceRecord[] = [];
    for (const s of this.slots) {
      const n = s.fields.length;
      if (Number.isNaN(s.data[cur * n]!)) continue; // not there at this instant
      const r: DeviceRecord = { t: round3(t), device: s.name, interval_ms: round3(dtMs) };
      for (let i = 0; i < n; i++) {
        const v = s.data[cur * n + i]!;
        r[s.fields[i]!.name] = Number.isNaN(v) ? null : v;
        const key = s.rateKeys[i];
        if (key === null || key === undefined) continue;
        const a = s.data[prev * n + i]!;
        r[key] = Number.isNaN(a) || Number.isNaN(v) || v < a || dtMs <= 0 ? null : ((v - a) * 1000) / dtMs;
      }
      out.push(r);
    }
    return out;
  }
}

function round3(x: number): number {
  return Math.round(x * 1000) / 1000;
}

// NDJSON output of a sampler (`unhalt run --stats FILE`): one JSON object per vCPU per sample,
// {"t":…,"vcpu":…,"interval_ms":…, counters under their KVM names, rates with _per_s …, and KVM's
// halt histograms as arrays of the interval's counts per bucket: "halt_wait_hist":[0,3,…]}, then one
// per virtio device at the same t, {"t":…,"device":"blk0","interval_ms":…,"requests":…,
// "requests_per_s":…,…} (devices.ts), and one {"t":…,"marker":"label"} line per marker. Readers
// tell them apart by `vcpu`, `device` or `marker`.
import type { Writable } from 'node:stream';
import { KVM_VCPU_HISTOGRAMS, type DeviceRecord, type SampleRecord, type TelemetryEvent, type TelemetryMarker, type VcpuHistograms } from './fields.ts';

/** What the writer follows: our own VM's Sampler, or a watched QEMU's (electron/watch/). */
export interface TelemetrySource {
  subscribe(listener: (event: TelemetryEvent) => void): () => void;
}

/** Six significant digits are plenty for a rate and keep the file about half the size. */
function compact(_key: string, v: unknown): unknown {
  return typeof v === 'number' && !Number.isInteger(v) ? Number(v.toPrecision(6)) : v;
}

export function recordLine(record: SampleRecord | DeviceRecord): string {
  return `${JSON.stringify(record, compact)}\n`;
}

export function markerLine(marker: TelemetryMarker): string {
  return `${JSON.stringify({ t: marker.t, marker: marker.label })}\n`;
}

export class NdjsonStatsWriter {
  private readonly out: Writable;
  private unsubscribe?: () => void;
  private closed?: Promise<void>;

  constructor(out: Writable) {
    this.out = out;
  }

  /** Writes what the source has stored, then every new sample and marker until close(). */
  attach(sampler: TelemetrySource): void {
    this.unsubscribe?.();
    this.unsubscribe = sampler.subscribe((e) => this.onEvent(e));
  }

  private onEvent(e: TelemetryEvent): void {
    if (e.type === 'marker') { this.out.write(markerLine(e.marker)); return; }
    if (e.type === 'sample') {
      // Each vCPU's histograms of the interval go on its line, after its counters.
      const hists = new Map((e.histograms ?? []).map((h) => [h.vcpu, h]));
      const vcpus = e.records.map((r) => { const h = hists.get(r.vcpu); return recordLine(h ? { ...r, ...histogramsOf(h) } as SampleRecord : r); });
      this.out.write([...vcpus, ...e.devices.map(recordLine)].join(''));
      return;
    }
    // Backfill: per instant the vCPUs, then the devices; markers interleaved by time.
    const markers = [...e.markers];
    const devices = e.devices;
    let d = 0;
    let text = '';
    const devicesUpTo = (t: number) => { for (; d < devices.length && devices[d]!.t <= t; d++) text += recordLine(devices[d]!); };
    for (let i = 0; i < e.records.length; i++) {
      const r = e.records[i]!;
      devicesUpTo(r.t - 1e-9); // those of earlier instants (a sample with devices only)
      while (markers.length && markers[0]!.t <= r.t) text += markerLine(markers.shift()!);
      text += recordLine(r);
      if (e.records[i + 1]?.t !== r.t) devicesUpTo(r.t);
    }
    devicesUpTo(Infinity);
    for (const m of markers) text += markerLine(m);
    if (text) this.out.write(text);
  }

  /** Stops following the sampler and flushes the file. */
  close(): Promise<void> {
    this.unsubscribe?.();
    this.unsubscribe = undefined;
    this.closed ??= new Promise<void>((resolve) => this.out.end(resolve));
    return this.closed;
  }
}

/** The histograms' counts only: the record already has KVM's sums, cumulative, under the same names. */
function histogramsOf(h: VcpuHistograms): Record<string, number[] | null> {
  const out: Record<string, number[] | null> = {};
  for (const name of KVM_VCPU_HISTOGRAMS) if (name in h) out[name] = h[name] as number[] | null;
  return out;
}

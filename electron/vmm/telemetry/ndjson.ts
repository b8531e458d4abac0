// NDJSON output of a sampler (`unhalt run --stats FILE`): one JSON object per vCPU per sample,
// {"t":…,"vcpu":…,"interval_ms":…, counters under their KVM names, rates with _per_s …}, and one
// {"t":…,"marker":"label"} line per marker (no `vcpu`: readers of samples skip them by that).
import type { Writable } from 'node:stream';
import type { SampleRecord, TelemetryEvent, TelemetryMarker } from './fields.ts';
import type { Sampler } from './sampler.ts';

/** Six significant digits are plenty for a rate and keep the file about half the size. */
function compact(_key: string, v: unknown): unknown {
  return typeof v === 'number' && !Number.isInteger(v) ? Number(v.toPrecision(6)) : v;
}

export function recordLine(record: SampleRecord): string {
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

  /** Writes what the sampler has stored, then every new sample and marker until close(). */
  attach(sampler: Sampler): void {
    this.unsubscribe?.();
    this.unsubscribe = sampler.subscribe((e) => this.onEvent(e));
  }

  private onEvent(e: TelemetryEvent): void {
    if (e.type === 'marker') { this.out.write(markerLine(e.marker)); return; }
    if (e.type === 'sample') { this.out.write(e.records.map(recordLine).join('')); return; }
    // Backfill: interleave markers with the samples by time.
    const markers = [...e.markers];
    let text = '';
    for (const r of e.records) {
      while (markers.length && markers[0]!.t <= r.t) text += markerLine(markers.shift()!);
      text += recordLine(r);
    }
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

// A vCPU's NDJSON line takes the interval's histogram counts from the sample's histograms, and
// only those: the histograms also carry KVM's time sums of the interval under their KVM names,
// which must not replace the record's cumulative counters of the same names.
import { PassThrough } from 'node:stream';
import { expect, it } from 'vitest';
import type { SampleRecord, TelemetryEvent } from '../../electron/vmm/telemetry/fields.ts';
import { NdjsonStatsWriter } from '../../electron/vmm/telemetry/ndjson.ts';

it("writes the histograms' counts beside the record, and the record's own cumulative sums", async () => {
  let emit!: (e: TelemetryEvent) => void;
  const source = { subscribe: (l: (e: TelemetryEvent) => void) => { emit = l; return () => {}; } };
  const out = new PassThrough();
  let text = '';
  out.on('data', (b: Buffer) => { text += b.toString(); });
  const writer = new NdjsonStatsWriter(out);
  writer.attach(source);
  const record = { t: 100, vcpu: 0, interval_ms: 100, halt_poll_fail_ns: 9_000_000, halt_poll_fail_ns_delta: 2_000, halt_poll_success_ns: 5_000_000 } as unknown as SampleRecord;
  emit({
    type: 'sample', t: 100, records: [record], devices: [],
    histograms: [{ vcpu: 0, halt_wait_hist: [0, 2, 1], halt_poll_success_hist: null, halt_poll_fail_ns: 2_000, halt_poll_success_ns: 0 }],
  });
  await writer.close();
  const line = JSON.parse(text.trim());
  expect(line).toMatchObject({ vcpu: 0, halt_wait_hist: [0, 2, 1], halt_poll_success_hist: null, halt_poll_fail_ns: 9_000_000, halt_poll_success_ns: 5_000_000 });
});

// The VM's virtio devices, live: requests and bytes per second per device (per direction where a
// device has two), notifications against interrupts, and each device's totals (requests, bytes,
// drops, errors). The charts are the same StreamCharts as the vCPUs'; the totals line is written
// straight to the DOM at most twice a second (no React render per sample).
import { useEffect, useRef } from 'react';
import type { VmRecord } from '../../../../electron/service/api.ts';
import { DEVICE_CHARTS } from '../../charts/defs.ts';
import { deviceTotalsText } from '../../charts/labels.ts';
import { LiveChart } from '../../charts/LiveChart.tsx';
import { telemetryFor } from '../../charts/telemetry-store.ts';

const TOTALS_MS = 500;

/** Whether the VM's configuration gives it any virtio device. */
export function hasDevices(vm: VmRecord): boolean {
  return !!vm.config.rng || !!vm.config.net || (vm.config.disks?.length ?? 0) > 0;
}

export function DevicesPanel({ vm, windowSec }: { vm: VmRecord; windowSec: number }) {
  const totals = useRef<HTMLParagraphElement>(null);
  useEffect(() => {
    const t = telemetryFor(vm.id);
    const text = document.createTextNode('');
    totals.current!.replaceChildren(text);
    let last = 0;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const write = () => {
      timer = undefined;
      last = performance.now();
      const s = deviceTotalsText(t.deviceNames, t.deviceTotals) || 'no device samples yet';
      if (text.nodeValue !== s) text.nodeValue = s;
    };
    write();
    const off = t.listen(() => {
      if (timer) return;
      timer = setTimeout(write, Math.max(0, last + TOTALS_MS - performance.now()));
    });
    return () => {
      off();
      if (timer) clearTimeout(timer);
    };
  }, [vm.id]);
  return (
    <section className="devices-panel" aria-labelledby={`devices-${vm.id}`} data-testid="devices-panel">
      <h3 id={`devices-${vm.id}`}>Devices</h3>
      <p className="muted small">virtio devices, sampled with the vCPUs: what each served, and how the guest and the VMM told each other.</p>
      <p className="device-totals small" ref={totals} data-testid="device-totals" aria-live="off" />
      <div className="chart-grid">
        {DEVICE_CHARTS.map((def) => <LiveChart key={def.id} vmId={vm.id} vmName={vm.config.name} def={def} windowSec={windowSec} />)}
      </div>
    </section>
  );
}

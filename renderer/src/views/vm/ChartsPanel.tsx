// The live charts of one VM, with the history window and the cpu-pm note.
import { useEffect, useState } from 'react';
import type { VmRecord } from '../../../../electron/service/api.ts';
import { useApp } from '../../state/app.ts';
import { CHARTS, DRAWING_NOTE } from '../../charts/defs.ts';
import { LiveChart } from '../../charts/LiveChart.tsx';
import { telemetryFor } from '../../charts/telemetry-store.ts';
import { DevicesPanel, hasDevices } from './DevicesPanel.tsx';

const WINDOWS = [
  { sec: 60, label: '1 min' },
  { sec: 300, label: '5 min' },
  { sec: 600, label: '10 min' },
];

export function ChartsPanel({ vm }: { vm: VmRecord }) {
  const hostKind = useApp((s) => s.host?.kind);
  const [windowSec, setWindowSec] = useState(60);
  // A series and a legend entry per configured vCPU, also before the first sample (a stopped VM).
  useEffect(() => { telemetryFor(vm.id).setConfiguredVcpus(vm.config.cpus); }, [vm.id, vm.config.cpus]);
  const cpuPm = vm.config.cpuPm || !!vm.status.resolved?.disableExits.some((e) => /hlt/i.test(e));
  const note = cpuPm ? (
    <p className="chart-note" role="note">
      {hostKind === 'pvm'
        ? 'cpu-pm=on: on real hardware HLT would no longer exit to the host and halt_exits would stay flat by design — but on this PVM host an emulated HLT still exits, so halt exits keep counting.'
        : 'With cpu-pm=on, HLT no longer exits to the host: halt_exits stays flat by design (the vCPU idles inside the guest).'}
    </p>
  ) : undefined;
  return (
    <section className="panel charts-panel" aria-labelledby={`charts-${vm.id}`}>
      <div className="panel-head">
        <h2 id={`charts-${vm.id}`}>Live telemetry</h2>
        <div className="panel-actions" role="group" aria-label="History shown">
          {WINDOWS.map((w) => (
            <button key={w.sec} type="button" className="btn small" aria-pressed={windowSec === w.sec} onClick={() => setWindowSec(w.sec)}>
              {w.label}
            </button>
          ))}
        </div>
      </div>
      <p className="muted small">10 samples a second per vCPU from KVM's binary stats; dashed lines mark knob changes and restarts. {DRAWING_NOTE}</p>
      <div className="chart-grid">
        {CHARTS.map((def) => (
          <LiveChart key={def.id} vmId={vm.id} vmName={vm.config.name} def={def} windowSec={windowSec}
            note={def.id === 'halt-exits' ? note : undefined} />
        ))}
      </div>
      {hasDevices(vm) && <DevicesPanel vm={vm} windowSec={windowSec} />}
    </section>
  );
}

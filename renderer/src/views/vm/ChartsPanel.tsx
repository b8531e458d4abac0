// The live charts of one VM, with the history window, the cpu-pm note and the guest's cpuidle set-up.
import { useCallback, useEffect, useState, useSyncExternalStore } from 'react';
import type { VmRecord } from '../../../../electron/service/api.ts';
import { api, errorMessage, notify, useApp } from '../../state/app.ts';
import { available } from '../../lib/config.ts';
import { haltPollParamsOf } from '../../../../electron/experiments/halt-poll-model.ts';
import { CHARTS, DRAWING_NOTE } from '../../charts/defs.ts';
import { LiveChart } from '../../charts/LiveChart.tsx';
import { HaltHistograms } from '../../charts/HaltHistograms.tsx';
import { telemetryFor } from '../../charts/telemetry-store.ts';
import { DevicesPanel, hasDevices } from './DevicesPanel.tsx';
import { hasAgent } from '../../lib/agent.ts';
import { guestChartEmpty, guestIdleNote } from '../../charts/guest-idle-text.ts';

const WINDOWS = [
  { sec: 60, label: '1 min' },
  { sec: 300, label: '5 min' },
  { sec: 600, label: '10 min' },
];

/** Why a VM's latency chart is empty, where its guest has (or could have) our agent. */
export function latencyEmpty(vm: VmRecord): string | undefined {
  const agent = vm.status.agent;
  if (agent === 'probing' || agent === 'ready') return 'waiting for the agent\'s context-switch probe (a pipe round trip sample each second while this page is open)';
  const mayHaveAgent = hasAgent(vm.config);
  if (vm.config.guest === 'probe') return undefined; // the chart's own hint: the probe's live scenarios
  if (vm.status.state === 'stopped') return mayHaveAgent ? 'no latency: start the VM; its agent\'s context-switch probe then reports here' : NO_AGENT;
  return mayHaveAgent ? 'no latency yet: the guest\'s agent has not reported on ttyS1 (it starts late in a distribution\'s boot); its context-switch probe then reports here' : NO_AGENT;
}

const NO_AGENT = 'no latency: this VM has no Unhalt agent on ttyS1 to measure it (a VM imported with the tools disk has one; or run a workload in the guest that reports @u1 latency lines)';

export function ChartsPanel({ vm }: { vm: VmRecord }) {
  const host = useApp((s) => s.host);
  const hostKind = host?.kind;
  // The halt-poll-ns in effect: this run's live change, else the saved value, else the host's default.
  const pollNs = vm.status.live?.haltPollNs ?? vm.config.haltPollNs ?? host?.haltPollParams.halt_poll_ns ?? null;
  const canApply = (vm.status.state === 'running' || vm.status.state === 'paused') && available(host, 'halt-poll-ns').ok;
  // A suggestion applied as the live knob is: for this run, marked on the charts, saved only on request.
  const applyPoll = (ns: number) => {
    api.setHaltPollNs(vm.id, ns).catch((e: unknown) => notify('error', `halt-poll-ns=${ns}: ${errorMessage(e)}`));
  };
  const [windowSec, setWindowSec] = useState(60);
  // A series and a legend entry per configured vCPU, also before the first sample (a stopped VM).
  useEffect(() => { telemetryFor(vm.id).setConfiguredVcpus(vm.config.cpus); }, [vm.id, vm.config.cpus]);
  // The guest's cpuidle facts arrive with its agent's ready line, outside React: re-render when they change.
  const telemetry = telemetryFor(vm.id);
  const subscribe = useCallback((onChange: () => void) => telemetry.listen(onChange), [telemetry]);
  const facts = useSyncExternalStore(subscribe, () => telemetry.guestIdle.facts);
  const empties: Record<string, string | undefined> = {
    latency: latencyEmpty(vm), 'guest-idle': guestChartEmpty('guest-idle', vm, facts), steal: guestChartEmpty('steal', vm, facts),
  };
  const cpuPm = vm.config.cpuPm || !!vm.status.resolved?.disableExits.some((e) => /hlt/i.test(e));
  const note = cpuPm ? (
    <p className="chart-note" role="note">
      {hostKind === 'pvm'
        ? 'cpu-pm=on: on real hardware HLT would no longer exit to the host and halt_exits would stay flat by design — but on this PVM host an emulated HLT still exits, so halt exits keep counting.'
        : 'With cpu-pm=on, HLT no longer exits to the host: halt_exits stays flat by design (the vCPU idles inside the guest).'}
    </p>
  ) : undefined;
  const idleNote = guestIdleNote(facts);
  const notes: Record<string, React.ReactNode> = {
    'halt-exits': note,
    'guest-idle': idleNote && <p className="chart-fact" role="note">{idleNote}</p>,
  };
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
            note={notes[def.id]} emptyText={empties[def.id]} />
        ))}
      </div>
      {hasDevices(vm) && <DevicesPanel vm={vm} windowSec={windowSec} />}
      <HaltHistograms vmId={vm.id} vcpus={vm.config.cpus} windowSec={windowSec} pollNs={pollNs}
        params={haltPollParamsOf(host?.haltPollParams ?? {})} onApply={canApply ? applyPoll : undefined}
        unavailable={host && !host.telemetry.binaryStats ? `no histograms: ${host.telemetry.note ?? 'this host has no KVM binary stats'}` : undefined} />
    </section>
  );
}

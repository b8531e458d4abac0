// One VM: lifecycle controls and status, the serial console, live knobs, its configuration and
// command line, and live charts.
import { useEffect, useState } from 'react';
import type { VmRecord } from '../../../../electron/service/api.ts';
import { useApp, navigate, vmAction, ensureSubscribed, deleteVm, api, attempt, errorMessage, notify } from '../../state/app.ts';
import { guestLabel, keyKnobs } from '../../lib/config.ts';
import { StateBadge } from '../StateBadge.tsx';
import { ConsolePane } from './ConsolePane.tsx';
import { ChartsPanel } from './ChartsPanel.tsx';
import { KnobControls } from './KnobControls.tsx';
import { ConfigPanel } from './ConfigPanel.tsx';
import { RenameControl } from './RenameControl.tsx';
import { ConfirmAction } from '../ConfirmAction.tsx';
import { ExportPanel } from './ExportPanel.tsx';
import { TunePanel } from './TunePanel.tsx';
import { startBlocked, startButtonProps } from '../KvmNotice.tsx';

export function VmView({ id }: { id: string }) {
  const vm = useApp((s) => s.vms.find((v) => v.id === id));
  const loaded = useApp((s) => s.vmsLoaded);
  useEffect(() => {
    if (vm) void ensureSubscribed(id);
  }, [id, !!vm]);
  if (!vm) {
    return (
      <section className="view">
        <h1 tabIndex={-1}>{loaded ? 'VM not found' : 'Loading…'}</h1>
        {loaded && <p>There is no VM with id {id}. <button type="button" className="link-btn" onClick={() => navigate({ view: 'library' })}>Back to the library</button></p>}
      </section>
    );
  }
  return (
    <section className="view vm-view" aria-labelledby="vm-title" data-vm-id={vm.id}>
      <VmHeader vm={vm} />
      <div className="vm-grid">
        <div className="vm-left">
          <ConsolePane vmId={vm.id} running={vm.status.state !== 'stopped'} />
          <KnobControls vm={vm} />
          <ConfigPanel vm={vm} />
          <ExportPanel vm={vm} />
          <TunePanel vm={vm} />
        </div>
        <ChartsPanel vm={vm} />
      </div>
    </section>
  );
}

function VmHeader({ vm }: { vm: VmRecord }) {
  const host = useApp((s) => s.host);
  const busy = useApp((s) => s.busy[vm.id]);
  const { state, lastEnd } = vm.status;
  // The last failed start, while the VM is stopped and nothing newer ran (the service drops older ones).
  const failure = state === 'stopped' && vm.lastStartFailure && vm.lastStartFailure.at >= (lastEnd?.at ?? 0) ? vm.lastStartFailure : undefined;
  const act = (a: Parameters<typeof vmAction>[1]) => () => void vmAction(vm.id, a);
  const blocked = startBlocked(host);
  const clone = async () => {
    const rec = await attempt('clone', () => api.cloneVm(vm.id));
    if (rec) navigate({ view: 'vm', id: rec.id });
  };
  const [removeImported, setRemoveImported] = useState(true);
  const remove = async () => {
    try {
      await deleteVm(vm.id, vm.imported ? removeImported : false);
      navigate({ view: 'library' });
    } catch (e) {
      notify('error', `delete ${vm.config.name}: ${errorMessage(e)}`);
    }
  };
  return (
    <div className="vm-head">
      <div className="vm-title-row">
        <h1 id="vm-title" tabIndex={-1}>{vm.config.name}</h1>
        <RenameControl vm={vm} />
        <StateBadge state={state} busy={busy} />
        <span className="muted">{vm.config.machine} · {guestLabel(host, vm.config)}</span>
      </div>
      <dl className="knobs vm-knobs" aria-label="Knobs">
        {keyKnobs(host, vm.config, vm.status).map((k) => (
          <div key={k.label} className={`knob ${k.live ? 'live' : ''}`} title={k.title} data-knob={k.label}>
            <dt>{k.label}</dt>
            <dd>{k.value}</dd>
          </div>
        ))}
      </dl>
      <div className="toolbar" role="toolbar" aria-label="VM actions">
        <button type="button" className="btn primary" data-action="start" {...startButtonProps(host, state !== 'stopped' || !!busy)}
          onClick={act('start')}>Start</button>
        <button type="button" className="btn" data-action="stop" disabled={state === 'stopped' || state === 'stopping' || !!busy}
          onClick={act('stop')} title="ACPI power button; forced after a grace period">Stop</button>
        <ConfirmAction label="Force stop…" action="force-stop" danger disabled={state === 'stopped'} confirmLabel="Force stop"
          question={`Force stop ${vm.config.name}? Its vCPUs stop at once: the guest gets no chance to shut down, and what it has not written out is lost.`}
          onConfirm={act('force-stop')} />
        <ConfirmAction label="Reset…" action="reset" disabled={(state !== 'running' && state !== 'paused') || !!busy} confirmLabel="Reset"
          title="Hard reset: stop the vCPUs and boot the same configuration again"
          question={`Reset ${vm.config.name}? It stops at once and boots again with its saved configuration (live knob changes of this run are dropped); the guest gets no chance to shut down.`}
          onConfirm={act('reset')} />
        {state === 'paused'
          ? <button type="button" className="btn" data-action="resume" disabled={!!busy} onClick={act('resume')}>Resume</button>
          : <button type="button" className="btn" data-action="pause" disabled={state !== 'running' || !!busy} onClick={act('pause')}>Pause</button>}
        <span className="toolbar-sep" />
        <button type="button" className="btn" data-action="edit" onClick={() => navigate({ view: 'edit', id: vm.id })}
          title={state === 'stopped' ? 'Change any setting' : 'Stop the VM to edit its settings; halt polling and pinning change live below'}>Edit…</button>
        <button type="button" className="btn" onClick={() => void clone()}>Clone</button>
        <ConfirmAction label="Delete…" action="delete" danger disabled={state !== 'stopped'} confirmLabel="Delete" cancelLabel="Keep"
          title={state !== 'stopped' ? 'Stop the VM first' : undefined}
          question={`Delete ${vm.config.name}? Its configuration and console log leave the library for good (disk images stay where they are).`}
          onConfirm={() => void remove()}>
          {vm.imported && (
            <label className="choice">
              <input type="checkbox" checked={removeImported} onChange={(e) => setRemoveImported(e.target.checked)} />
              {' '}Also delete what the import made ({vm.imported.dir}: kernel, initrd, seed{vm.config.disks?.[0]?.path.startsWith(vm.imported.dir) ? ', the converted raw copy' : ''}); never {vm.imported.image}
            </label>
          )}
        </ConfirmAction>
      </div>
      {vm.imported && (
        <p className="muted small" data-testid="imported-from">
          Imported from {vm.imported.image}{vm.imported.os ? ` (${vm.imported.os})` : ''} · log in as {vm.imported.user} on the
          console, or <code>ssh -p {vm.imported.sshPort} {vm.imported.user}@127.0.0.1</code> once cloud-init is done
        </p>
      )}
      {failure && (
        <p className="start-failure" role="status" data-testid="start-failure">
          <strong>Start failed</strong> <span className="muted">({new Date(failure.at).toLocaleString()})</span>: {failure.reason}
        </p>
      )}
      <p className="status-line" data-testid="status-line">
        {state === 'running' && vm.status.startedAt ? <Uptime since={vm.status.startedAt} /> : null}
        {state === 'running' && vm.status.startedAt && lastEnd ? ' · ' : null}
        {lastEnd && !failure ? <span>Last run ended: <strong>{lastEnd.kind}</strong>{lastEnd.message ? ` — ${lastEnd.message}` : ''} <span className="muted">({new Date(lastEnd.at).toLocaleTimeString()})</span></span>
          : state === 'stopped' ? <span className="muted">{vm.lastStartedAt ? `Not started in this session; last started ${new Date(vm.lastStartedAt).toLocaleString()}.` : failure ? 'It has never started.' : 'Never started.'}</span> : null}
        {state === 'stopped' && blocked ? <span className="warn-text" data-testid="start-blocked"> It cannot start here: this host lacks KVM (the notice above says why and what to do).</span> : null}
        {vm.status.droppedConsoleBytes ? <span className="warn-text"> {vm.status.droppedConsoleBytes} console bytes dropped (the guest printed faster than the host could keep).</span> : null}
      </p>
      {vm.status.resolved?.warnings.length ? <ul className="warnings">{vm.status.resolved.warnings.map((w, i) => <li key={i}>⚠ {w}</li>)}</ul> : null}
    </div>
  );
}

function Uptime({ since }: { since: number }) {
  const [now, setNow] = useState(Date.now());
  useEffect(() => {
    const t = setInterval(() => setNow(Date.now()), 1000);
    return () => clearInterval(t);
  }, []);
  const s = Math.max(0, Math.floor((now - since) / 1000));
  const text = s < 3600 ? `${Math.floor(s / 60)}:${String(s % 60).padStart(2, '0')}` : `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min`;
  return <span className="uptime">Up {text}</span>;
}

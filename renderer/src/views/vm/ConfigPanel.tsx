// A VM's whole configuration and the `unhalt run` command line that reproduces it. While the VM
// runs it shows what the guest got (the resolution made at its start); stopped, what the saved
// configuration would give now (describeConfig).
import { useEffect, useState } from 'react';
import type { ResolvedDto, VmRecord } from '../../../../electron/service/api.ts';
import { formatNetOption } from '../../../../electron/vmm/config/net-config.ts';
import { formatDeviceOption } from '../../../../electron/vmm/config/device-config.ts';
import { diskModeNote } from '../../../../electron/vmm/config/vm-config.ts';
import { api, errorMessage, useApp } from '../../state/app.ts';
import { fmtNs, haltPollNow, pinNow, probeScenario } from '../../lib/config.ts';
import { clock, mib } from '../../lib/format.ts';

function useSavedResolution(vm: VmRecord): { resolved: ResolvedDto | null; error: string | null } {
  const [state, setState] = useState<{ resolved: ResolvedDto | null; error: string | null }>({ resolved: null, error: null });
  const json = JSON.stringify(vm.config);
  useEffect(() => {
    let current = true;
    api.describeConfig(JSON.parse(json)).then(
      (resolved) => { if (current) setState({ resolved, error: null }); },
      (e) => { if (current) setState({ resolved: null, error: errorMessage(e) }); },
    );
    return () => { current = false; };
  }, [json]);
  return state;
}

export function ConfigPanel({ vm }: { vm: VmRecord }) {
  const host = useApp((s) => s.host);
  const saved = useSavedResolution(vm);
  const [copied, setCopied] = useState('');
  const c = vm.config;
  const running = vm.status.state !== 'stopped';
  const r = (running ? vm.status.resolved : undefined) ?? saved.resolved;
  const copy = async (text: string) => {
    try {
      await navigator.clipboard.writeText(text);
      setCopied('Copied');
    } catch {
      setCopied('Clipboard not available: select the text and copy it');
    }
    setTimeout(() => setCopied(''), 2500);
  };
  const rows: [string, React.ReactNode][] = [
    ['Name', c.name],
    ['Guest', c.guest === 'probe' ? `probe · ${probeScenario(c.append)}` : c.guest === 'linux' ? 'Linux (built-in kit)' : 'own kernel'],
    ...(c.kernel ? [['Kernel', <code key="k">{c.kernel}</code>] as [string, React.ReactNode]] : []),
    ...(c.initrd ? [['Initrd', <code key="i">{c.initrd}</code>] as [string, React.ReactNode]] : []),
    ['Kernel command line', c.append ? <code>{c.append}</code> : <span className="muted">none</span>],
    ['vCPUs', String(c.cpus)],
    ['Memory', mib(c.memoryMiB)],
    ['Machine type', c.machine],
    ['Paravirt features', r?.features.length ? <FeatureList features={r.features} />
      : Object.keys(c.cpuFeatures).length ? Object.entries(c.cpuFeatures).map(([k, v]) => `${k}=${v ? 'on' : 'off'}`).join(', ') : `the defaults of ${c.machine}`],
    ['cpu-pm', c.cpuPm ? `on${r?.disableExits.length ? ` (exits disabled: ${r.disableExits.join(', ')})` : ''}` : 'off'],
    ['mem-lock', c.memLock ? 'on' : 'off'],
    ['virtio-rng', c.rng ? 'on (virtio-pci, from the host\'s getrandom)' : 'off'],
    ['Disks', c.disks?.length ? c.disks.map((d, i) => `vd${String.fromCharCode(97 + i)} ${d.path}${diskModeNote(d) ? ` (${diskModeNote(d)})` : ''}`).join(', ') : 'none'],
    ['Network', c.net ? <code>{formatNetOption(c.net)}</code> : 'none'],
    ...(c.devices?.length ? [['Devices', <code key="dev">{c.devices.map(formatDeviceOption).join(' ')}</code>] as [string, React.ReactNode]] : []),
    ['Halt polling', haltPollNow(c, vm.status, host)],
    ['Guest polling', c.guestHaltPollNs === undefined ? 'the guest kernel\'s own idle' : `cpuidle-haltpoll forced, up to ${fmtNs(c.guestHaltPollNs)}`],
    ['Pinning', `${pinNow(c, vm.status)}${c.pin?.length || vm.status.live?.pin?.length ? ' (vCPU i on the i-th listed, round-robin)' : ''}`],
    ...(c.guest !== 'probe' ? [['PVM profile', c.pvmProfile ? 'on' : 'off'] as [string, React.ReactNode]] : []),
    ['Created', clock(vm.createdAt)],
    ['Changed', clock(vm.updatedAt)],
    ['Last started', vm.lastStartedAt ? clock(vm.lastStartedAt) : 'never'],
  ];
  return (
    <section className="panel config-panel" aria-labelledby={`config-${vm.id}`} data-testid="config-panel">
      <div className="panel-head">
        <h2 id={`config-${vm.id}`}>Configuration</h2>
      </div>
      {running && (
        <p className="muted small" data-testid="edit-note">
          Fixed while the VM runs (the guest's hardware, set at boot): stop it to edit. Halt polling and pinning change live above; the name at any time.
        </p>
      )}
      <dl className="summary config-list">
        {rows.map(([k, v]) => <div key={k} className={k === 'Paravirt features' ? 'wide' : undefined}><dt>{k}</dt><dd>{v}</dd></div>)}
      </dl>
      <h3>{running ? 'Command line of this run' : 'Command line'}</h3>
      <p className="muted small">Runs the same VM on its own terminal, outside the app.</p>
      {r ? (
        <>
          <pre className="cmdline" data-testid="vm-cmdline"><code>{r.commandLine}</code></pre>
          <button type="button" className="btn small" onClick={() => void copy(r.commandLine)}>Copy command line</button>
          <span className="muted small" aria-live="polite"> {copied}</span>
        </>
      ) : saved.error ? <p className="error" role="alert">{saved.error}</p> : <p className="muted">Checking…</p>}
      {r?.notes.length ? <ul className="notes">{r.notes.map((n, i) => <li key={i}>{n}</li>)}</ul> : null}
    </section>
  );
}

/** On and off features, each marked where it did not come from the machine type. */
function FeatureList({ features }: { features: ResolvedDto['features'] }) {
  const why = (f: ResolvedDto['features'][number]) => (f.source === 'explicit' ? ' (set)' : f.source === 'cpu-pm' ? ' (by cpu-pm)' : '');
  const on = features.filter((f) => f.value);
  const off = features.filter((f) => !f.value);
  return (
    <span className="feature-lists">
      <span><span className="muted">on:</span> {on.length ? on.map((f) => `${f.name}${why(f)}`).join(', ') : 'none'}</span>
      <br />
      <span><span className="muted">off:</span> {off.length ? off.map((f) => `${f.name}${why(f)}`).join(', ') : 'none'}</span>
    </span>
  );
}

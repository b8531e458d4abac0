import { useState } from 'react';
import type { HostInfo, VmRecord } from '../../../electron/service/api.ts';
import { useApp, navigate, vmAction, createVm, errorMessage, dismissLibraryNotices } from '../state/app.ts';
import { keyKnobs, guestLabel } from '../lib/config.ts';
import { Sparkline } from '../charts/Sparkline.tsx';
import { AllowedFolders } from './AllowedFolders.tsx';
import { StateBadge } from './StateBadge.tsx';
import { LibraryTable } from './LibraryTable.tsx';
import { StartButton } from './StartButton.tsx';

type Layout = 'cards' | 'table';
const LAYOUT_KEY = 'unhalt.library.layout';

export function Library() {
  const vms = useApp((s) => s.vms);
  const loaded = useApp((s) => s.vmsLoaded);
  const host = useApp((s) => s.host);
  const [layout, setLayout] = useState<Layout>(() => (localStorage.getItem(LAYOUT_KEY) === 'table' ? 'table' : 'cards'));
  const choose = (l: Layout) => {
    setLayout(l);
    localStorage.setItem(LAYOUT_KEY, l);
  };
  return (
    <section className="view library" aria-labelledby="library-title">
      <div className="view-head">
        <h1 id="library-title" tabIndex={-1}>Virtual machines</h1>
        <div className="view-actions">
          {vms.length > 0 && (
            <div className="segmented" role="group" aria-label="Show the library as">
              <button type="button" className="btn small" aria-pressed={layout === 'cards'} onClick={() => choose('cards')}>Cards</button>
              <button type="button" className="btn small" aria-pressed={layout === 'table'} onClick={() => choose('table')}>Table</button>
            </div>
          )}
          <button type="button" className="btn" onClick={() => navigate({ view: 'import' })}>Import a disk image…</button>
          <button type="button" className="btn primary" onClick={() => navigate({ view: 'new' })}>New VM…</button>
        </div>
      </div>
      <LibraryNotices host={host} />
      {!loaded ? <p className="muted">Loading the library…</p>
        : vms.length === 0 ? <EmptyLibrary host={host} />
          : layout === 'table' ? <LibraryTable vms={vms} host={host} />
            : (
              <ul className="cards" aria-label="VM library">
                {vms.map((vm) => <VmCard key={vm.id} vm={vm} host={host} />)}
              </ul>
            )}
      {loaded && vms.length > 0 && <QuickCreate host={host} compact />}
      <AllowedFolders />
    </section>
  );
}

/** What the library repaired (a damaged file moved aside, records kept out): stored on disk until dismissed. */
function LibraryNotices({ host }: { host: HostInfo | null }) {
  const notices = host?.library?.notices ?? [];
  if (notices.length === 0) return null;
  return (
    <div className="banner banner-error library-notices" role="alert">
      {notices.map((n) => (
        <p key={`${n.at}-${n.message}`}>
          {n.message}
          {n.movedTo && <> — kept in <code>{n.movedTo}</code></>}
        </p>
      ))}
      <button type="button" className="btn" onClick={() => void dismissLibraryNotices()}>Dismiss</button>
    </div>
  );
}

function VmCard({ vm, host }: { vm: VmRecord; host: HostInfo | null }) {
  const busy = useApp((s) => s.busy[vm.id]);
  const { state } = vm.status;
  const live = state !== 'stopped';
  const c = vm.config;
  return (
    <li className="card vm-card" data-vm-id={vm.id} data-state={state}>
      <div className="card-head">
        <h2 className="card-title">
          <button type="button" className="link-btn" onClick={() => navigate({ view: 'vm', id: vm.id })}>{c.name}</button>
        </h2>
        <StateBadge state={state} busy={busy} />
      </div>
      <p className="card-sub">
        <span title="machine type">{c.machine}</span> · <span>{guestLabel(host, c)}</span>
      </p>
      <dl className="knobs">
        {keyKnobs(host, c, vm.status).map((k) => (
          <div key={k.label} className={`knob ${k.live ? 'live' : ''}`} title={k.title} data-knob={k.label}>
            <dt>{k.label}</dt>
            <dd>{k.value}</dd>
          </div>
        ))}
      </dl>
      <div className="spark-row">
        <span className="spark-label">halt exits/s</span>
        <Sparkline vmId={vm.id} live={live} />
      </div>
      <p className="card-end" title={vm.status.lastEnd?.message}>
        {state === 'stopped' && vm.status.lastEnd ? `Last run ended: ${vm.status.lastEnd.kind}${vm.status.lastEnd.message ? ` — ${vm.status.lastEnd.message}` : ''}` : '\u00a0'}
      </p>
      <div className="card-actions">
        {state === 'stopped'
          ? <StartButton vmId={vm.id} host={host} busy={!!busy} className="btn primary" />
          : <button type="button" className="btn" disabled={!!busy || state === 'stopping'} onClick={() => void vmAction(vm.id, 'stop')}>Stop</button>}
        <button type="button" className="btn" onClick={() => navigate({ view: 'vm', id: vm.id })}>Open</button>
      </div>
    </li>
  );
}

function EmptyLibrary({ host }: { host: HostInfo | null }) {
  return (
    <div className="empty">
      <h2>No virtual machines yet</h2>
      <p>Start with a built-in guest (one click), or build your own configuration in the wizard.</p>
      <QuickCreate host={host} />
      <p><button type="button" className="btn" onClick={() => navigate({ view: 'new' })}>Open the wizard…</button></p>
    </div>
  );
}

/** One-click VMs on the built-in guests: the probe always, Linux where its kit is built. */
function QuickCreate({ host, compact }: { host: HostInfo | null; compact?: boolean }) {
  const vms = useApp((s) => s.vms);
  const [busy, setBusy] = useState<string | null>(null);
  const [error, setError] = useState<string | null>(null);
  const linux = host?.guests.find((g) => g.kind === 'linux');
  const probe = host?.guests.find((g) => g.kind === 'probe');
  const uniqueName = (base: string) => {
    const names = new Set(vms.map((v) => v.config.name));
    if (!names.has(base)) return base;
    for (let i = 2; ; i++) if (!names.has(`${base}-${i}`)) return `${base}-${i}`;
  };
  const make = async (guest: 'probe' | 'linux') => {
    setBusy(guest);
    setError(null);
    try {
      const rec = await createVm({ name: uniqueName(guest === 'probe' ? 'probe' : 'linux'), guest, cpus: 2 });
      navigate({ view: 'vm', id: rec.id });
    } catch (e) {
      setError(errorMessage(e));
    } finally {
      setBusy(null);
    }
  };
  return (
    <div className={compact ? 'quick compact' : 'quick'}>
      {compact && <h2 className="quick-title">Add a built-in guest</h2>}
      <div className="quick-options">
        <div className="quick-option">
          <button type="button" className="btn primary" disabled={!!busy} onClick={() => void make('probe')}>
            {busy === 'probe' ? 'Creating…' : 'Create a probe VM'}
          </button>
          <p className="muted small">
            <strong>{probe?.label ?? 'Probe (diagnostic guest)'}</strong>: our small test guest with an echo shell on the console.
            {probe?.note ? <><br />{capitalize(probe.note)}.</> : null}
          </p>
        </div>
        <div className="quick-option">
          <button type="button" className="btn" disabled={!!busy || !linux?.built}
            onClick={() => void make('linux')} aria-describedby="linux-note">
            {busy === 'linux' ? 'Creating…' : 'Create a Linux VM'}
          </button>
          <p className="muted small" id="linux-note">
            <strong>{linux?.label ?? 'Linux'}</strong>: a busybox shell and the latency agent.
            <br />
            {!linux ? 'Checking the host…' : linux.note ? `${capitalize(linux.note)}.` : linux.built ? '' : 'Its kit is not built on this machine (npm run build:guests).'}
          </p>
        </div>
      </div>
      {host?.defaultGuest && <p className="muted small">Default here: {host.defaultGuest.kind} — {host.defaultGuest.reason}</p>}
      {error && <p className="error" role="alert">{error}</p>}
    </div>
  );
}

function capitalize(s: string): string {
  return s ? s[0]!.toUpperCase() + s.slice(1) : s;
}

import { useEffect, useRef } from 'react';
import { useApp, navigate, setTheme, dismiss } from './state/app.ts';
import type { ThemeChoice } from './state/app.ts';
import { Library } from './views/Library.tsx';
import { Wizard } from './views/wizard/Wizard.tsx';
import { VmView } from './views/vm/VmView.tsx';
import { EditVm } from './views/vm/EditVm.tsx';
import { CompareView } from './views/compare/CompareView.tsx';
import { ImportView } from './views/import/ImportView.tsx';
import { KvmNotice } from './views/KvmNotice.tsx';
import { useConsoleTheme } from './console/useConsoleTheme.ts';
import { pageTitle } from './lib/page-title.ts';

export function App() {
  const route = useApp((s) => s.route);
  const title = useApp((s) => pageTitle(s.route, s.vms, s.vmsLoaded));
  useEffect(() => { document.title = title; }, [title]);
  useConsoleTheme();
  const mainRef = useRef<HTMLElement>(null);
  const firstRoute = useRef(true);
  // Moving between views puts keyboard focus at the new view's heading (not on first load).
  useEffect(() => {
    if (firstRoute.current) {
      firstRoute.current = false;
      return;
    }
    const h = mainRef.current?.querySelector<HTMLElement>('h1');
    h?.focus({ preventScroll: true });
  }, [route.view, route.view === 'vm' || route.view === 'edit' ? route.id : '']);
  return (
    <div className="app">
      <a className="skip" href="#main" onClick={(e) => { e.preventDefault(); mainRef.current?.focus(); }}>Skip to content</a>
      <Header />
      <ConnectionBanner />
      <KvmNotice />
      <main id="main" ref={mainRef} tabIndex={-1}>
        {route.view === 'library' && <Library />}
        {route.view === 'new' && <Wizard guest={route.guest} />}
        {route.view === 'import' && <ImportView />}
        {route.view === 'vm' && <VmView key={route.id} id={route.id} />}
        {route.view === 'edit' && <EditVm key={route.id} id={route.id} />}
        {route.view === 'compare' && <CompareView experimentId={route.experimentId} />}
      </main>
      <Notices />
    </div>
  );
}

function Header() {
  const route = useApp((s) => s.route);
  const theme = useApp((s) => s.theme);
  const hostKind = useApp((s) => s.host?.kind);
  const noKvm = useApp((s) => !!s.host?.kvmProblem);
  const nav: { label: string; view: 'library' | 'new' | 'compare' }[] = [
    { label: 'Library', view: 'library' },
    { label: 'New VM', view: 'new' },
    { label: 'Compare', view: 'compare' },
  ];
  const current = route.view === 'vm' || route.view === 'edit' ? 'library' : route.view;
  return (
    <header className="topbar">
      <button type="button" className="brand" onClick={() => navigate({ view: 'library' })} aria-label="Unhalt: VM library">
        <svg className="brand-mark" viewBox="0 0 32 32" width="22" height="22" aria-hidden="true">
          <rect width="32" height="32" rx="7" fill="currentColor" />
          <path d="M8 22 L12 10 L16 19 L20 13 L24 22" fill="none" stroke="var(--surface)" strokeWidth="2.6" strokeLinecap="round" strokeLinejoin="round" />
        </svg>
        Unhalt
      </button>
      <nav aria-label="Main">
        {nav.map((n) => (
          <button key={n.view} type="button" className="navlink" aria-current={current === n.view ? 'page' : undefined}
            onClick={() => navigate({ view: n.view } as Parameters<typeof navigate>[0])}>
            {n.label}
          </button>
        ))}
      </nav>
      <div className="topbar-end">
        {hostKind && noKvm && (
          <span className="host-kind host-none" title="KVM cannot be opened on this host: see the notice under this bar">No KVM</span>
        )}
        {hostKind && !noKvm && (
          <span className={`host-kind host-${hostKind}`} title={hostKind === 'pvm'
            ? 'This host runs KVM as PVM (a software nested hypervisor): ring 0 is emulated; compare ratios, not absolute times'
            : 'Hardware-backed KVM (VMX/SVM)'}>
            {hostKind === 'pvm' ? 'PVM host' : 'KVM host'}
          </span>
        )}
        <label className="theme-select">
          <span className="sr-only">Theme</span>
          <select value={theme} onChange={(e) => setTheme(e.target.value as ThemeChoice)} aria-label="Theme">
            <option value="system">Theme: system</option>
            <option value="light">Theme: light</option>
            <option value="dark">Theme: dark</option>
          </select>
        </label>
      </div>
    </header>
  );
}

function ConnectionBanner() {
  const state = useApp((s) => s.connection);
  const error = useApp((s) => s.connectionError);
  const reconnecting = useApp((s) => s.reconnecting);
  if (state === 'open') return null;
  return (
    <div className={`banner ${state === 'closed' || state === 'refused' ? 'banner-error' : ''}`} role="status" data-testid="connection-banner"
      data-state={reconnecting ? 'reconnecting' : state}>
      {state === 'refused' ? <><strong>Wrong key.</strong> {error}</>
        : reconnecting
        ? `Connection to Unhalt lost; reconnecting…${error ? ` (${error})` : ''} The page stays as it is and picks up where the server is when it answers again.`
        : state === 'connecting' ? 'Connecting to Unhalt…' : `Cannot reach Unhalt${error ? `: ${error}` : ''}; retrying…`}
    </div>
  );
}

/** Where KVM cannot be opened: the cause found and its fix (the same verdict as `unhalt doctor`). */
function Notices() {
  const notices = useApp((s) => s.notices);
  return (
    <div className="notices" role="log" aria-live="polite">
      {notices.map((n) => (
        <div key={n.id} className={`notice notice-${n.kind}`}>
          <span>{n.message}</span>
          <button type="button" className="icon-btn" aria-label="Dismiss" onClick={() => dismiss(n.id)}>×</button>
        </div>
      ))}
    </div>
  );
}

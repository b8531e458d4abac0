// The app's state and its wiring to the API: the VM library, host capabilities, experiments,
// connection state, the route (in the URL hash, so the token in the query stays put) and
// notices. Console bytes and telemetry bypass this store: they go straight to the terminal
// registry and the telemetry store.
import type {
  ApiEvent, DiskConversionDto, ImportProgressDto, ExperimentSummary, HostInfo, Subscription, TelemetrySample, VmRecord, VmStatus,
} from '../../../electron/service/api.ts';
import { ApiClient, ApiError } from '../api/client.ts';
import type { ConnectionState } from '../api/client.ts';
import { createStore, useStore } from './store.ts';
import { resetConsole, setConsoleSender, writeConsole, disposeConsole, consoleText, consoleSize } from '../console/terminals.ts';
import { telemetryFor, dropTelemetry, hasTelemetry } from '../charts/telemetry-store.ts';
import { consoleInputSender } from '../console/console-input.ts';

export type Route =
  | { view: 'library' }
  | { view: 'new'; guest?: 'probe' | 'linux' }
  | { view: 'import' }
  | { view: 'vm'; id: string }
  | { view: 'edit'; id: string }
  | { view: 'compare'; experimentId?: string };

export type ThemeChoice = 'system' | 'light' | 'dark';

export interface Notice {
  id: number;
  kind: 'error' | 'info';
  message: string;
}

export interface AppState {
  connection: ConnectionState;
  connectionError?: string;
  /** The connection was open once and dropped since (host mode): the banner says "reconnecting". */
  reconnecting: boolean;
  host: HostInfo | null;
  hostError?: string;
  vms: VmRecord[];
  vmsLoaded: boolean;
  experiments: ExperimentSummary[];
  route: Route;
  theme: ThemeChoice;
  notices: Notice[];
  /** VM ids with a start/stop call in flight (their buttons show it). */
  busy: Record<string, string>;
  /** qcow2 -> raw conversions by id, as their events last said (the wizard's Storage shows them). */
  conversions: Record<string, DiskConversionDto>;
  /** The step an import in progress reports (its last 'import' event), by image path. */
  imports: Record<string, ImportProgressDto>;
}

export const api = new ApiClient();

export const store = createStore<AppState>({
  connection: api.connection().state,
  reconnecting: false,
  host: null,
  vms: [],
  vmsLoaded: false,
  experiments: [],
  route: parseRoute(location.hash),
  theme: (localStorage.getItem('unhalt.theme') as ThemeChoice | null) ?? 'system',
  notices: [],
  busy: {},
  conversions: {},
  imports: {},
});

export function useApp<T>(selector: (s: AppState) => T): T {
  return useStore(store, selector);
}

// ---- routing ----
export function parseRoute(hash: string): Route {
  const parts = hash.replace(/^#\/?/, '').split('/').filter(Boolean).map(decodeURIComponent);
  switch (parts[0]) {
    case 'new':
      return { view: 'new', guest: parts[1] === 'linux' ? 'linux' : parts[1] === 'probe' ? 'probe' : undefined };
    case 'vm':
      if (parts[1] && parts[2] === 'edit') return { view: 'edit', id: parts[1] };
      return parts[1] ? { view: 'vm', id: parts[1] } : { view: 'library' };
    case 'compare':
      return { view: 'compare', experimentId: parts[1] };
    case 'import':
      return { view: 'import' };
    default:
      return { view: 'library' };
  }
}

export function routeHash(r: Route): string {
  switch (r.view) {
    case 'library': return '#/';
    case 'new': return r.guest ? `#/new/${r.guest}` : '#/new';
    case 'import': return '#/import';
    case 'vm': return `#/vm/${encodeURIComponent(r.id)}`;
    case 'edit': return `#/vm/${encodeURIComponent(r.id)}/edit`;
    case 'compare': return r.experimentId ? `#/compare/${encodeURIComponent(r.experimentId)}` : '#/compare';
  }
}

export function navigate(r: Route): void {
  const hash = routeHash(r);
  if (location.hash !== hash) location.hash = hash;
  else store.set({ route: r });
}

window.addEventListener('hashchange', () => store.set({ route: parseRoute(location.hash) }));

// ---- notices ----
let noticeId = 1;
export function notify(kind: Notice['kind'], message: string): void {
  const n = { id: noticeId++, kind, message };
  store.set((s) => ({ notices: [...s.notices.slice(-4), n] }));
  if (kind === 'info') setTimeout(() => dismiss(n.id), 5000);
}

export function dismiss(id: number): void {
  store.set((s) => ({ notices: s.notices.filter((n) => n.id !== id) }));
}

export function errorMessage(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

/** Runs an API call, reporting a failure as a notice; resolves undefined on failure. */
export async function attempt<T>(what: string, f: () => Promise<T>): Promise<T | undefined> {
  try {
    return await f();
  } catch (e) {
    notify('error', `${what}: ${errorMessage(e)}`);
    return undefined;
  }
}

// ---- theme ----
export function setTheme(t: ThemeChoice): void {
  localStorage.setItem('unhalt.theme', t);
  store.set({ theme: t });
}

// ---- library ----
export function upsertVm(rec: VmRecord): void {
  store.set((s) => {
    const i = s.vms.findIndex((v) => v.id === rec.id);
    const vms = i < 0 ? [...s.vms, rec] : s.vms.map((v, j) => (j === i ? rec : v));
    return { vms };
  });
  onVmStatus(rec.id, rec.status);
}

function applyStatus(vmId: string, status: VmStatus): void {
  store.set((s) => ({ vms: s.vms.map((v) => (v.id === vmId ? { ...v, status } : v)) }));
  onVmStatus(vmId, status);
}

function setLibrary(vms: VmRecord[]): void {
  const gone = store.get().vms.filter((v) => !vms.some((n) => n.id === v.id));
  store.set({ vms, vmsLoaded: true });
  for (const v of gone) forget(v.id);
  for (const v of vms) onVmStatus(v.id, v.status);
}

export function vmById(id: string): VmRecord | undefined {
  return store.get().vms.find((v) => v.id === id);
}

/** The user has read the library's notices: forget them on disk, then show the host info without them. */
export async function dismissLibraryNotices(): Promise<void> {
  await attempt('dismiss the library notices', async () => {
    await api.dismissLibraryNotices();
    store.set({ host: await api.host() });
  });
}

export async function refresh(): Promise<void> {
  const [host, vms, experiments] = await Promise.allSettled([api.host(), api.listVms(), api.listExperiments()]);
  if (host.status === 'fulfilled') store.set({ host: host.value, hostError: undefined });
  else store.set({ hostError: errorMessage(host.reason) });
  if (vms.status === 'fulfilled') setLibrary(vms.value);
  else notify('error', `could not load the VM library: ${errorMessage(vms.reason)}`);
  if (experiments.status === 'fulfilled') {
    store.set({ experiments: [...experiments.value].sort((a, b) => b.createdAt - a.createdAt) });
  }
}

// ---- subscriptions: console + telemetry for every VM that runs or is on screen ----
const subscribed = new Set<string>();
/** VM ids whose subscribe call is in flight: their stream events are in the backfill. */
const pendingSubscribe = new Map<string, Promise<void>>();

const LIVE: VmStatus['state'][] = ['starting', 'running', 'paused', 'stopping'];

function onVmStatus(vmId: string, status: VmStatus): void {
  if (hasTelemetry(vmId) || LIVE.includes(status.state)) telemetryFor(vmId).setStartedAt(status.startedAt);
  if (LIVE.includes(status.state)) void ensureSubscribed(vmId);
}

/** Subscribes once per connection; the backfill replaces what the terminal and charts held. */
export function ensureSubscribed(vmId: string): Promise<void> {
  if (subscribed.has(vmId)) return Promise.resolve();
  const inFlight = pendingSubscribe.get(vmId);
  if (inFlight) return inFlight;
  const p = (async () => {
    try {
      const sub: Subscription = await api.subscribe(vmId);
      subscribed.add(vmId);
      applyBackfill(vmId, sub);
    } catch (e) {
      if (!(e instanceof ApiError && e.code === 'disconnected')) {
        notify('error', `could not follow VM ${vmName(vmId)}: ${errorMessage(e)}`);
      }
    } finally {
      pendingSubscribe.delete(vmId);
    }
  })();
  pendingSubscribe.set(vmId, p);
  return p;
}

function applyBackfill(vmId: string, sub: Subscription): void {
  const b = sub.backfill ?? { console: '', samples: [], markers: [], metrics: [] };
  resetConsole(vmId);
  writeConsole(vmId, b.console ?? '');
  const t = telemetryFor(vmId);
  t.reset();
  const vm = vmById(vmId);
  if (vm) t.setStartedAt(vm.status.startedAt);
  if (b.samples?.length || b.markers?.length) t.addSamples(b.samples ?? [], b.markers ?? []);
  if (b.devices?.length) t.addDevices(b.devices);
  if (b.histograms?.length) t.addHistograms(b.histograms);
  for (const m of b.metrics ?? []) t.addMetric(m);
}

function forget(vmId: string): void {
  subscribed.delete(vmId);
  disposeConsole(vmId);
  dropTelemetry(vmId);
}

function vmName(id: string): string {
  return vmById(id)?.config.name ?? id;
}

function onEvent(ev: ApiEvent): void {
  switch (ev.type) {
    case 'library':
      setLibrary(ev.vms);
      break;
    case 'status':
      if (store.get().vms.some((v) => v.id === ev.vmId)) applyStatus(ev.vmId, ev.status);
      else void api.getVm(ev.vmId).then(upsertVm, () => {});
      break;
    case 'console':
      if (!pendingSubscribe.has(ev.vmId)) writeConsole(ev.vmId, ev.data);
      break;
    case 'telemetry':
      if (!pendingSubscribe.has(ev.vmId)) {
        const t = telemetryFor(ev.vmId);
        t.addSamples(ev.samples ?? [], ev.markers);
        if (ev.devices?.length) t.addDevices(ev.devices);
        if (ev.histograms?.length) t.addHistograms(ev.histograms);
      }
      break;
    case 'guest-metric':
      if (!pendingSubscribe.has(ev.vmId)) telemetryFor(ev.vmId).addMetric(ev.metric);
      break;
    case 'experiment': {
      const x = ev.experiment;
      store.set((s) => {
        const rest = s.experiments.filter((e) => e.id !== x.id);
        return { experiments: [x, ...rest].sort((a, b) => b.createdAt - a.createdAt) };
      });
      break;
    }
    case 'experiment-deleted':
      store.set((s) => ({ experiments: s.experiments.filter((e) => e.id !== ev.id) }));
      break;
    case 'disk-conversion':
      store.set((s) => ({ conversions: { ...s.conversions, [ev.conversion.id]: ev.conversion } }));
      break;
    case 'import':
      store.set((s) => ({ imports: { ...s.imports, [ev.progress.image]: ev.progress } }));
      break;
  }
}

// ---- lifecycle actions ----
export async function vmAction(
  vmId: string,
  action: 'start' | 'stop' | 'force-stop' | 'reset' | 'pause' | 'resume',
): Promise<void> {
  const label = { start: 'starting', stop: 'stopping', 'force-stop': 'stopping', reset: 'resetting', pause: 'pausing', resume: 'resuming' }[action];
  store.set((s) => ({ busy: { ...s.busy, [vmId]: label } }));
  try {
    if (action === 'start') await ensureSubscribed(vmId);
    const status = await (action === 'start' ? api.startVm(vmId)
      : action === 'stop' ? api.stopVm(vmId)
        : action === 'force-stop' ? api.forceStopVm(vmId)
          : action === 'reset' ? api.resetVm(vmId)
          : action === 'pause' ? api.pauseVm(vmId) : api.resumeVm(vmId));
    applyStatus(vmId, status);
  } catch (e) {
    notify('error', `${action} ${vmName(vmId)}: ${errorMessage(e)}`);
  } finally {
    store.set((s) => {
      const busy = { ...s.busy };
      delete busy[vmId];
      return { busy };
    });
  }
}

export async function createVm(config: unknown): Promise<VmRecord> {
  const rec = await api.createVm(config);
  upsertVm(rec);
  return rec;
}

/** Saves a stopped VM's whole configuration (the wizard's edit mode). */
export async function updateVm(vmId: string, config: unknown): Promise<VmRecord> {
  const rec = await api.updateVm(vmId, config);
  upsertVm(rec);
  return rec;
}

export async function renameVm(vmId: string, name: string): Promise<VmRecord> {
  const rec = await api.renameVm(vmId, name);
  upsertVm(rec);
  return rec;
}

export async function deleteVm(vmId: string, removeImported = false): Promise<void> {
  await api.deleteVm(vmId, removeImported);
  store.set((s) => ({ vms: s.vms.filter((v) => v.id !== vmId) }));
  forget(vmId);
}

// ---- start-up ----
setConsoleSender(consoleInputSender((vmId, data) => api.sendConsole(vmId, data),
  (vmId, problem) => notify('error', `console input to ${vmName(vmId)}: ${typeof problem === 'string' ? problem : errorMessage(problem)}`)));
api.onEvent(onEvent);
api.onConnection((state, error) => {
  const was = store.get();
  // Lost after being open: every state until the next open is "reconnecting" (host mode restarts).
  const reconnecting = state === 'open' ? false : was.reconnecting || was.connection === 'open';
  store.set({ connection: state, connectionError: error, reconnecting });
  if (state === 'open' && was.reconnecting) notify('info', 'Reconnected to Unhalt.');
  if (state === 'open') {
    // A new connection has no subscriptions: follow the live VMs again (fresh backfill).
    subscribed.clear();
    void refresh();
  }
});
if (api.connection().state === 'open') void refresh();

// The end-to-end tests and the responsiveness bench read these (no UI depends on them).
declare global {
  interface Window {
    __unhalt?: unknown;
  }
}
window.__unhalt = {
  api,
  consoleText,
  consoleSize,
  telemetry(vmId: string) {
    const t = telemetryFor(vmId);
    return {
      points: t.samples.length,
      /** Rows ever appended (those dropped from the front of the history included). */
      received: t.samples.length + t.samples.dropped,
      vcpus: t.vcpus,
      latest: t.latest,
      nonZeroHaltPoints: t.nonZeroHaltPoints,
      maxHaltExitsPerS: t.maxHaltExitsPerS,
      markers: t.markers.length,
      latencySeries: t.latencyKeys,
      probeSwitches: t.probeSwitches,
      devices: t.deviceNames,
      deviceRows: t.devices.length,
      guestIdleRows: t.guestIdle.rows.length,
      guestIdleFacts: t.guestIdle.facts,
    };
  },
  state: () => store.get(),
  /** Bench only: `rows` synthetic 10 Hz samples ending now (full-history drawing cost). */
  addSyntheticHistory(vmId: string, rows: number, vcpus: number, reset = false) {
    if (reset) telemetryFor(vmId).reset();
    const now = Date.now();
    const samples: TelemetrySample[] = [];
    for (let i = rows; i > 0; i--) {
      const t = now - i * 100;
      for (let v = 0; v < vcpus; v++) {
        const wave = 0.5 + 0.5 * Math.sin((i + v * 40) / 50);
        samples.push({
          t, vcpu: v, interval_ms: 100, halt_exits_per_s: 200 + 800 * wave, poll_hit_rate: wave, poll_cpu_fraction: 0.2 * wave,
          halt_wait_ns_delta: 6e7 * (1 - wave), exits_per_s: 1500 + 900 * wave, io_exits_per_s: 300 * wave, mmio_exits_per_s: 50,
          irq_exits_per_s: 100 * wave, signal_exits_per_s: 1,
        });
      }
    }
    telemetryFor(vmId).addSamples(samples);
    return samples.length;
  },
};

// The service's process-wide core behind every session: it owns the home (the owner lock, the VM
// library and a watch on it), the shared state (service-state.ts) and the groups of calls that
// serve the API table, one module per domain:
//   library-calls.ts     the VM library (list, create, edit, rename, clone, delete) and host()
//   config-calls.ts      a configuration not saved: describe it, check its files, export it
//   host-file-calls.ts   allowed folders, disk images (create, convert)
//   import-calls.ts      a cloud image imported as a VM, and the file browser it picks it with
//   lifecycle-calls.ts   start, stop, reset, pause, resume, status, console, subscriptions
//   knob-calls.ts        live knobs (halt polling, pinning) and keeping them
//   experiment-calls.ts  experiments and the tuning advisor
// Sessions (service.ts) forward each call of the table to the method of its name here; each is one
// line into its group. Inputs arrive as `unknown` and are validated there; errors are ApiErrors
// (sessions map anything else).
import { watch, type FSWatcher } from 'node:fs';
import { basename } from 'node:path';
import type {
  AllowedFolder, ApiCallHandlers, DiskConversionDto, FolderListing, ExperimentDetail, ExportedConfigDto, ExperimentSummary, HostCommandRequest, HostInfo, ResolvedDto,
  SavedWorkloadDto, Subscription, VmRecord, VmStatus,
} from './api.ts';
import { ConfigCalls } from './config-calls.ts';
import { ExperimentCalls, type LoadExperimentRunner } from './experiment-calls.ts';
import { DEFAULT_LOCK_TIMEOUT_MS } from './file-lock.ts';
import { HomeOwnership } from './home-owner.ts';
import { HostFileCalls } from './host-file-calls.ts';
import { ImportCalls } from './import-calls.ts';
import { KnobCalls } from './knob-calls.ts';
import { LibraryCalls } from './library-calls.ts';
import { LibraryStore } from './library-store.ts';
import { LifecycleCalls } from './lifecycle-calls.ts';
import { makeDirs } from './make-dir.ts';
import { homeLayout, unhaltHome, type HomeLayout } from './paths.ts';
import { ServiceState, type SessionSink } from './service-state.ts';
import type { EventSink } from './vm-supervisor.ts';

export interface ServiceOptions {
  /** Data folder (default: UNHALT_HOME, else the XDG data folder). */
  home?: string;
  /** How long a library change waits for another process's lock (default DEFAULT_LOCK_TIMEOUT_MS, file-lock.ts). */
  lockTimeoutMs?: number;
  /** Grace period of the ACPI stop when the service shuts down (default 2000 ms). */
  shutdownGraceMs?: number;
  /** Who this process is, as a second process refused the same UNHALT_HOME is told (home-owner.ts). */
  ownerCommand?: string;
  /**
   * vCPU worker threads to keep loaded for the next start (worker-pool.ts): the app and `unhalt
   * serve` keep SERVICE_SPARE_VCPU_WORKERS; default none (tests, one-shot users). A service that
   * keeps workers warm also keeps a KVM VM set up for the next start (builder/vm-shells.ts).
   */
  spareVcpuWorkers?: number;
  /** Tests: where the experiment runner comes from. */
  loadExperimentRunner?: LoadExperimentRunner;
  /**
   * Where a host command's confirmation code is shown to the person at this machine, out of the
   * API's reach (host-command-requests.ts): `unhalt serve` prints it on its terminal, the app shows
   * a native dialog. Without one the API cannot confirm host commands (the CLI still runs its own).
   */
  announce?: (text: string) => void;
}

/** Serves every 'call' of the API table (api.ts); sessions forward to it by name. */
export class ServiceCore implements ApiCallHandlers {
  readonly layout: HomeLayout;
  readonly options: ServiceOptions;
  /** Every connected client, the service's own session included. */
  readonly sessions: Set<SessionSink>;
  private readonly state: ServiceState;
  private readonly library: LibraryCalls;
  private readonly configs: ConfigCalls;
  private readonly hostFiles: HostFileCalls;
  private readonly imports: ImportCalls;
  private readonly lifecycle: LifecycleCalls;
  private readonly knobs: KnobCalls;
  private readonly experiments: ExperimentCalls;
  private ownership?: HomeOwnership;
  private watcher?: FSWatcher;
  private watchTimer?: NodeJS.Timeout;

  constructor(options: ServiceOptions) {
    this.options = options;
    this.layout = homeLayout(options.home ?? unhaltHome());
    this.state = new ServiceState(this.layout);
    this.sessions = this.state.sessions;
    this.library = new LibraryCalls(this.state);
    this.configs = new ConfigCalls(this.state);
    this.hostFiles = new HostFileCalls(this.state);
    this.imports = new ImportCalls(this.state);
    this.lifecycle = new LifecycleCalls(this.state);
    this.knobs = new KnobCalls(this.state);
    this.experiments = new ExperimentCalls(this.state, options.loadExperimentRunner, options.announce);
  }

  /** The service is shutting down or has shut down (close()). */
  get closed(): boolean {
    return this.state.closed;
  }

  /** Claims the home for this process, then opens its VM library and follows changes to it. */
  async openHome(): Promise<void> {
    // Before the library: a second process on this home must not touch it (not even migrate it).
    makeDirs(this.layout.home, 0o700);
    this.ownership = await HomeOwnership.claim(this.layout.home, this.options.ownerCommand ?? defaultOwnerCommand());
    try {
      this.state.store = await LibraryStore.open(this.layout.home, {
        lock: { timeoutMs: this.options.lockTimeoutMs ?? DEFAULT_LOCK_TIMEOUT_MS },
        onNotice: () => { if (this.state.store) this.state.broadcastLibrary(); },
      });
    } catch (e) {
      this.ownership.release();
      throw e;
    }
    // Another process (the Electron app next to host mode) may change the library: follow it.
    try {
      this.watcher = watch(this.layout.home, { persistent: false }, (_event, file) => {
        if (file !== basename(this.layout.library)) return;
        clearTimeout(this.watchTimer);
        this.watchTimer = setTimeout(() => {
          try { if (this.state.store.refreshIfChanged()) this.state.broadcastLibrary(); } catch { /* next change retries */ }
        }, 100);
        this.watchTimer.unref();
      });
    } catch { /* no inotify: changes show up on the next read */ }
  }

  // ---- API: the library (library-calls.ts) ----
  host(): HostInfo { return this.library.host(); }
  dismissLibraryNotices(): void { this.library.dismissLibraryNotices(); }
  listVms(): VmRecord[] { return this.library.listVms(); }
  getVm(id: unknown): VmRecord { return this.library.getVm(id); }
  createVm(raw: unknown): Promise<VmRecord> { return this.library.createVm(raw); }
  updateVm(rawId: unknown, raw: unknown): Promise<VmRecord> { return this.library.updateVm(rawId, raw); }
  renameVm(rawId: unknown, rawName: unknown): Promise<VmRecord> { return this.library.renameVm(rawId, rawName); }
  cloneVm(rawId: unknown, rawName: unknown): Promise<VmRecord> { return this.library.cloneVm(rawId, rawName); }
  deleteVm(rawId: unknown, removeImported?: unknown): Promise<void> { return this.library.deleteVm(rawId, removeImported); }
  listFolder(rawPath?: unknown): FolderListing { return this.imports.listFolder(rawPath); }
  importImage(raw: unknown): Promise<VmRecord> { return this.imports.importImage(raw); }

  // ---- API: configurations not saved (config-calls.ts) ----
  describeConfig(raw: unknown): Promise<ResolvedDto> { return this.configs.describeConfig(raw); }
  checkBootFiles(raw: unknown): Promise<void> { return this.configs.checkBootFiles(raw); }
  exportConfig(raw: unknown, rawFormat: unknown, rawForHost?: unknown): Promise<ExportedConfigDto> { return this.configs.exportConfig(raw, rawFormat, rawForHost); }

  // ---- API: allowed folders and disk images (host-file-calls.ts) ----
  listAllowedFolders(): AllowedFolder[] { return this.hostFiles.listAllowedFolders(); }
  addAllowedFolder(rawPath: unknown): AllowedFolder[] { return this.hostFiles.addAllowedFolder(rawPath); }
  removeAllowedFolder(rawPath: unknown): AllowedFolder[] { return this.hostFiles.removeAllowedFolder(rawPath); }
  createDiskImage(rawPath: unknown, sizeMiB: unknown): Promise<void> { return this.hostFiles.createDiskImage(rawPath, sizeMiB); }
  convertDiskImage(rawSource: unknown): Promise<DiskConversionDto> { return this.hostFiles.convertDiskImage(rawSource); }

  // ---- API: a VM's life, console and subscriptions (lifecycle-calls.ts) ----
  startVm(rawId: unknown): Promise<VmStatus> { return this.lifecycle.startVm(rawId); }
  stopVm(rawId: unknown, rawGrace: unknown): Promise<VmStatus> { return this.lifecycle.stopVm(rawId, rawGrace); }
  forceStopVm(rawId: unknown): Promise<VmStatus> { return this.lifecycle.forceStopVm(rawId); }
  resetVm(rawId: unknown): Promise<VmStatus> { return this.lifecycle.resetVm(rawId); }
  pauseVm(rawId: unknown): Promise<VmStatus> { return this.lifecycle.pauseVm(rawId); }
  resumeVm(rawId: unknown): VmStatus { return this.lifecycle.resumeVm(rawId); }
  status(rawId: unknown): VmStatus { return this.lifecycle.status(rawId); }
  sendConsole(rawId: unknown, rawData: unknown): void { this.lifecycle.sendConsole(rawId, rawData); }
  /** The table's 'subscription' methods are the sessions'; they hand the core their own event sink. */
  subscribe(rawId: unknown, sink: EventSink): Subscription { return this.lifecycle.subscribe(rawId, sink); }
  unsubscribe(rawId: unknown, sink: EventSink): void { this.lifecycle.unsubscribe(rawId, sink); }

  // ---- API: live knobs (knob-calls.ts) ----
  setHaltPollNs(rawId: unknown, rawNs: unknown): VmStatus { return this.knobs.setHaltPollNs(rawId, rawNs); }
  setPin(rawId: unknown, rawCpus: unknown): VmStatus { return this.knobs.setPin(rawId, rawCpus); }
  keepLiveKnobs(rawId: unknown): Promise<VmRecord> { return this.knobs.keepLiveKnobs(rawId); }

  // ---- API: experiments and tuning (experiment-calls.ts) ----
  startExperiment(raw: unknown): Promise<ExperimentSummary> { return this.experiments.startExperiment(raw); }
  requestHostCommand(rawArgv: unknown): HostCommandRequest { return this.experiments.requestHostCommand(rawArgv); }
  confirmHostCommand(requestId: unknown, code: unknown): { id: string; argv: string[] } { return this.experiments.confirmHostCommand(requestId, code); }
  listSavedWorkloads(): SavedWorkloadDto[] { return this.experiments.listSavedWorkloads(); }
  saveWorkload(name: unknown, bench: unknown): SavedWorkloadDto { return this.experiments.saveWorkload(name, bench); }
  listExperiments(): ExperimentSummary[] { return this.experiments.listExperiments(); }
  getExperiment(rawId: unknown): ExperimentDetail { return this.experiments.getExperiment(rawId); }
  cancelExperiment(rawId: unknown): Promise<ExperimentSummary> { return this.experiments.cancelExperiment(rawId); }
  deleteExperiment(rawId: unknown): void { this.experiments.deleteExperiment(rawId); }
  startTune(rawVmId: unknown, raw: unknown): Promise<ExperimentSummary> { return this.experiments.startTune(rawVmId, raw); }
  applyTune(rawExperimentId: unknown, rawVmId: unknown): Promise<VmRecord> { return this.experiments.applyTune(rawExperimentId, rawVmId); }

  runningVmIds(): string[] {
    return [...this.state.supervisors.values()].filter((r) => r.running).map((r) => r.id);
  }

  async close(): Promise<void> {
    if (this.state.closed) return;
    this.state.closed = true;
    this.hostFiles.stopConversions();
    this.imports.stopImports();
    this.watcher?.close();
    clearTimeout(this.watchTimer);
    const grace = this.options.shutdownGraceMs ?? 2000;
    await Promise.all([this.experiments.abort(), ...[...this.state.supervisors.values()].map((r) => r.dispose(grace))]);
    await this.lifecycle.saveStarts();
    for (const s of [...this.state.sessions]) s.close();
    // Last: until every VM has stopped, this process still owns them.
    this.ownership?.release();
  }

  /** Host mode listens at `address`: a refused second process is told where. */
  announceAddress(address: string): void {
    this.ownership?.announce(address);
  }
}

function defaultOwnerCommand(): string {
  return process.argv.slice(1).map((a) => basename(a)).join(' ').slice(0, 200) || basename(process.execPath);
}

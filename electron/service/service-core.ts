// The service's shared state and logic behind every session: the VM library, the VMs this
// process runs (one VmRuntime each), experiments, and the events all sessions get. Inputs arrive
// as `unknown` and are validated here; errors are ApiErrors (sessions map anything else).
import { realpathSync, watch, type FSWatcher } from 'node:fs';
import { basename } from 'node:path';
import type {
  AllowedFolder, ApiCallHandlers, ApiEvent, DiskConversionDto, ExperimentDetail, ExportedConfigDto, ExperimentSummary, HostInfo, ResolvedDto, Subscription, VmRecord, VmStatus,
} from './api.ts';
import { commandLine } from '../vmm/config/cli-args.ts';
import { resolveBoot, resolveMachine, resolveMachineWithoutKvm, type ResolvedMachine } from '../vmm/config/resolve.ts';
import { checkNameFree, checkPinFit } from '../vmm/config/rules.ts';
import { haltPollUnavailable, judgedAtStart } from '../vmm/config/host-rules.ts';
import { EXPORT_FORMATS, exportConfig, exportHostProblem, isExportFormat, isExportHost } from '../vmm/export/export.ts';
import { checkDisk, normalizeVmName, sameVmName, validateConfig, type VmConfig } from '../vmm/config/vm-config.ts';
import { MAX_HALT_POLL_NS, MAX_HOST_CPU, MAX_NAME_LENGTH, MAX_PIN_ENTRIES } from '../vmm/config/limits.ts';
import { hostKind } from '../vmm/host.ts';
import { probeHost, type HostCapabilities } from '../vmm/machine/host-caps.ts';
import { allowedFolders, checkFolderToAdd, confineNewFileToAllowedFolders, confineToAllowedFolders } from './allowed-folders.ts';
import { DiskConversions } from './disk-conversion.ts';
import { createRawImage } from '../vmm/devices/virtio/disk-image.ts';
import { checkBootFiles, checkHostLimits } from './config-checks.ts';
import { ConsoleLogFile, consoleLogPath } from './console-log.ts';
import { ApiError, toApiError } from './errors.ts';
import { kvmProblem } from './kvm-problem.ts';
import { Experiments } from './experiments.ts';
import { applyDelta } from '../experiments/advisor.ts';
import { formatConfigString } from '../vmm/config/config-string.ts';
import { LockBusyError } from './file-lock.ts';
import { buildHostInfo, type ExtraCheck } from './host-info.ts';
import { MAX_FAILURE_REASON, MAX_VMS, type LibraryRecord } from './library-schema.ts';
import { noticeChecks } from './library-notices.ts';
import { LibraryFullError, LibraryStore, type LibraryNotice } from './library-store.ts';
import { MAX_ALLOWED_FOLDERS, readSettings, writeSettings } from './settings.ts';
import { homeLayout, unhaltHome, type HomeLayout } from './paths.ts';
import { HomeOwnership } from './home-owner.ts';
import { makeDirs } from './make-dir.ts';
import { clip, intArg, intListArg, textArg, vmIdArg } from './validate.ts';
import { VmRuntime, startRefusal, toResolvedDto, type EventSink } from './vm-runtime.ts';
import { traceStep } from '../vmm/start-trace.ts';

export const DEFAULT_STOP_GRACE_MS = 3000;
const MAX_GRACE_MS = 60_000;
const MAX_CONSOLE_INPUT = 64 * 1024;
/** How long after a start its time is written to the library (noteStarted): past the guest's first output. */
const SAVE_STARTS_DELAY_MS = 1000;

export interface ServiceOptions {
  /** Data folder (default: UNHALT_HOME, else the XDG data folder). */
  home?: string;
  /** How long a library change waits for another process's lock (default 5000 ms). */
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
  loadExperimentRunner?: ConstructorParameters<typeof Experiments>[2];
}

/** Serves every 'call' of the API table (api.ts); sessions forward to it by name. */
export class ServiceCore implements ApiCallHandlers {
  readonly layout: HomeLayout;
  readonly options: ServiceOptions;
  store!: LibraryStore;
  readonly experiments: Experiments;
  /** qcow2 -> raw conversions the wizard started (convertDiskImage). */
  private readonly conversions = new DiskConversions((conversion) => this.broadcast({ type: 'disk-conversion', conversion }));
  private readonly runtimes = new Map<string, VmRuntime>();
  /** Starts noted in memory and not yet in the library file (noteStarted). */
  private readonly startsToSave = new Map<string, number>();
  private saveStartsTimer?: NodeJS.Timeout;
  /** Every connected client, the service's own session included. */
  readonly sessions = new Set<{ deliver(e: ApiEvent): void; close(): void }>();
  private ownership?: HomeOwnership;
  private watcher?: FSWatcher;
  private watchTimer?: NodeJS.Timeout;
  closed = false;

  constructor(options: ServiceOptions) {
    this.options = options;
    this.layout = homeLayout(options.home ?? unhaltHome());
    this.experiments = new Experiments(this.layout.experiments, (experiment) => this.broadcast({ type: 'experiment', experiment }),
      options.loadExperimentRunner, (id) => this.broadcast({ type: 'experiment-deleted', id }));
  }

  async open(): Promise<void> {
    // Before the library: a second process on this home must not touch it (not even migrate it).
    makeDirs(this.layout.home, 0o700);
    this.ownership = await HomeOwnership.claim(this.layout.home, this.options.ownerCommand ?? defaultOwnerCommand());
    try {
      this.store = await LibraryStore.open(this.layout.home, {
        lock: { timeoutMs: this.options.lockTimeoutMs ?? 5000 },
        onNotice: () => { if (this.store) this.broadcastLibrary(); },
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
          try { if (this.store.refreshIfChanged()) this.broadcastLibrary(); } catch { /* next change retries */ }
        }, 100);
        this.watchTimer.unref();
      });
    } catch { /* no inotify: changes show up on the next read */ }
  }

  broadcast(e: ApiEvent): void {
    for (const s of this.sessions) s.deliver(e);
  }

  broadcastLibrary(): void {
    this.broadcast({ type: 'library', vms: this.listVms() });
  }

  private runtime(id: string): VmRuntime {
    let r = this.runtimes.get(id);
    if (!r) {
      r = new VmRuntime(id, consoleLogPath(this.layout.logs, id), (status) => this.broadcast({ type: 'status', vmId: id, status }));
      this.runtimes.set(id, r);
    }
    return r;
  }

  private record(rawId: unknown): LibraryRecord {
    const id = vmIdArg(rawId);
    const r = this.store.get(id);
    if (!r) throw new ApiError('not-found', `there is no VM with the id "${id}"`);
    return r;
  }

  private dto(r: LibraryRecord): VmRecord {
    const status = this.runtimes.get(r.id)?.status() ?? { id: r.id, state: 'stopped' as const };
    const dto: VmRecord = { id: r.id, config: r.config, createdAt: r.createdAt, updatedAt: r.updatedAt, status };
    const lastStartedAt = this.startsToSave.get(r.id) ?? r.lastStartedAt;
    if (lastStartedAt !== undefined) dto.lastStartedAt = lastStartedAt;
    // A failure older than the last start that worked is history.
    if (r.lastStartFailure && r.lastStartFailure.at > (lastStartedAt ?? -1)) dto.lastStartFailure = { ...r.lastStartFailure };
    return dto;
  }

  private probe(): HostCapabilities {
    try {
      return probeHost();
    } catch (e) {
      throw new ApiError('host', kvmProblem(e));
    }
  }

  /** A validated configuration that this host could hold (files not checked: see config()). */
  private shape(raw: unknown): VmConfig {
    let c: VmConfig;
    try {
      c = validateConfig(raw);
    } catch (e) {
      throw toApiError(e);
    }
    let maxVcpus: number | undefined;
    try { maxVcpus = probeHost().maxVcpus; } catch { /* no KVM: the start will say so */ }
    checkHostLimits(c, maxVcpus);
    return c;
  }

  /** A validated configuration that this host could hold, with its files checked. */
  private async config(raw: unknown): Promise<VmConfig> {
    const c = this.shape(raw);
    await checkBootFiles(c, this.allowedFolders());
    return c;
  }

  private allowedFolders(): AllowedFolder[] {
    return allowedFolders(this.layout.home, readSettings(this.layout.home).allowedFolders);
  }

  private resolve(c: VmConfig): ResolvedMachine {
    const host = this.probe();
    try {
      return resolveMachine(c, host);
    } catch (e) {
      throw toApiError(e);
    }
  }

  private async mutate<T>(change: (vms: LibraryRecord[]) => T): Promise<T> {
    try {
      return await this.store.mutate(change);
    } catch (e) {
      if (e instanceof LibraryFullError) throw new ApiError('conflict', e.message);
      if (e instanceof LockBusyError) {
        throw new ApiError('conflict', `the VM library is being changed by ${e.holderPid ? `another Unhalt process (pid ${e.holderPid})` : 'another process'}; try again`);
      }
      throw e;
    }
  }

  // ---- API ----

  host(): HostInfo {
    const notices = this.store.notices;
    return {
      ...buildHostInfo(this.libraryChecks(notices)),
      library: { path: this.store.path, vms: this.store.list().length, maxVms: MAX_VMS, notices },
    };
  }

  dismissLibraryNotices(): void {
    this.store.dismissNotices();
    this.broadcastLibrary();
  }

  listAllowedFolders(): AllowedFolder[] {
    return this.allowedFolders();
  }

  addAllowedFolder(rawPath: unknown): AllowedFolder[] {
    const path = checkFolderToAdd(textArg(rawPath, 'folder', 4096));
    const settings = readSettings(this.layout.home);
    if (!settings.allowedFolders.includes(path)) {
      if (settings.allowedFolders.length >= MAX_ALLOWED_FOLDERS) throw new ApiError('conflict', `at most ${MAX_ALLOWED_FOLDERS} folders can be added`);
      writeSettings(this.layout.home, { ...settings, allowedFolders: [...settings.allowedFolders, path] });
    }
    return this.allowedFolders();
  }

  removeAllowedFolder(rawPath: unknown): AllowedFolder[] {
    const given = textArg(rawPath, 'folder', 4096);
    const settings = readSettings(this.layout.home);
    // Folders are stored by real path; the caller may name one by the path it was added with.
    const path = settings.allowedFolders.includes(given) ? given : realPathOr(given);
    if (!settings.allowedFolders.includes(path)) {
      throw new ApiError('not-found', `${given.slice(0, 200)} is not a folder added in the settings (the library's folder, the guest kits and your home folder are always allowed)`);
    }
    writeSettings(this.layout.home, { ...settings, allowedFolders: settings.allowedFolders.filter((f) => f !== path) });
    return this.allowedFolders();
  }

  private libraryChecks(notices: LibraryNotice[]): ExtraCheck[] {
    if (notices.length === 0) return [{ name: 'library', ok: true, detail: `${this.store.list().length} VMs in ${this.store.path}` }];
    return noticeChecks(notices);
  }

  listVms(): VmRecord[] {
    return this.store.list().map((r) => this.dto(r));
  }

  getVm(id: unknown): VmRecord {
    return this.dto(this.record(id));
  }

  async createVm(raw: unknown): Promise<VmRecord> {
    const config = await this.config(raw);
    const now = Date.now();
    const rec: LibraryRecord = { id: crypto.randomUUID(), config, createdAt: now, updatedAt: now };
    await this.mutate((vms) => {
      assertUniqueName(vms, config.name);
      vms.push(rec);
    });
    this.broadcastLibrary();
    return this.dto(rec);
  }

  async updateVm(rawId: unknown, raw: unknown): Promise<VmRecord> {
    const id = this.record(rawId).id;
    this.assertStoppedForEdit(id);
    const config = await this.config(raw);
    const updated = await this.changeRecord(id, (r, vms) => {
      // Again inside the change: a start may have claimed the VM while the files were checked.
      this.assertStoppedForEdit(id);
      assertUniqueName(vms, config.name, id);
      r.config = config;
    });
    this.broadcastLibrary();
    return this.dto(updated);
  }

  async renameVm(rawId: unknown, rawName: unknown): Promise<VmRecord> {
    const id = this.record(rawId).id;
    const wanted = textArg(rawName, 'name');
    const updated = await this.changeRecord(id, (r, vms) => {
      // The schema's name rules (validateConfig), on the record as it is now.
      const config = this.shape({ ...r.config, name: wanted });
      assertUniqueName(vms, config.name, id);
      r.config = config;
    });
    this.broadcastLibrary();
    return this.dto(updated);
  }

  async keepLiveKnobs(rawId: unknown): Promise<VmRecord> {
    const id = this.record(rawId).id;
    const live = this.runtimes.get(id)?.liveKnobs() ?? {};
    if (live.haltPollNs === undefined && live.pin === undefined) {
      throw new ApiError('conflict', 'nothing to keep: halt polling and pinning were not changed while the VM runs');
    }
    const updated = await this.changeRecord(id, (r) => {
      // Only the knobs a running VM may change; the rest of the configuration stays as it is.
      const next: Record<string, unknown> = { ...r.config };
      if (live.haltPollNs !== undefined) next.haltPollNs = live.haltPollNs;
      if (live.pin !== undefined) {
        if (live.pin.length) next.pin = live.pin;
        else delete next.pin;
      }
      r.config = this.shape(next);
    });
    this.broadcastLibrary();
    return this.dto(updated);
  }

  /** One record changed under the library's lock, its updatedAt moved on. */
  private changeRecord(id: string, change: (r: LibraryRecord, vms: LibraryRecord[]) => void): Promise<LibraryRecord> {
    return this.mutate((vms) => {
      const r = vms.find((v) => v.id === id);
      if (!r) throw new ApiError('not-found', `there is no VM with the id "${id}"`);
      change(r, vms);
      r.updatedAt = Math.max(Date.now(), r.createdAt);
      return r;
    });
  }

  /**
   * Only halt polling and pinning change in a running guest (setHaltPollNs, setPin); everything
   * else is the guest's hardware, fixed when it booted. Saving it now would make the library say
   * something the running VM is not.
   */
  private assertStoppedForEdit(id: string): void {
    const rt = this.runtimes.get(id);
    if (rt?.running) {
      throw new ApiError('conflict', `the VM is ${rt.status().state}: its settings are the guest's hardware, fixed at boot; stop it to edit them (halt polling and pinning can be changed live, and the name at any time)`);
    }
  }

  async cloneVm(rawId: unknown, rawName: unknown): Promise<VmRecord> {
    const source = this.record(rawId);
    const wanted = rawName === undefined || rawName === null ? undefined : textArg(rawName, 'name');
    // The copy has the source's files: check them once, before the library's lock is taken.
    await this.config(source.config);
    const copy = await this.mutate((vms) => {
      const name = wanted ?? freeName(vms, source.config.name);
      const config = this.shape({ ...source.config, name });
      assertUniqueName(vms, config.name);
      const now = Date.now();
      const rec: LibraryRecord = { id: crypto.randomUUID(), config, createdAt: now, updatedAt: now };
      vms.push(rec);
      return rec;
    });
    this.broadcastLibrary();
    return this.dto(copy);
  }

  async deleteVm(rawId: unknown): Promise<void> {
    const id = this.record(rawId).id;
    this.assertNotRunning(id);
    await this.mutate((vms) => {
      // Checked again inside the change: the first check was before the wait for the library's
      // lock, and a start may have claimed the VM meanwhile (see startVm).
      this.assertNotRunning(id);
      const i = vms.findIndex((v) => v.id === id);
      if (i < 0) throw new ApiError('not-found', `there is no VM with the id "${id}"`);
      vms.splice(i, 1);
    });
    const rt = this.runtimes.get(id);
    if (rt) rt.removeLogs();
    else new ConsoleLogFile(consoleLogPath(this.layout.logs, id)).remove();
    this.runtimes.delete(id);
    this.startsToSave.delete(id);
    this.broadcastLibrary();
  }

  private assertNotRunning(id: string): void {
    if (this.runtimes.get(id)?.running) throw new ApiError('conflict', 'the VM is running: stop it before deleting it');
  }

  async describeConfig(raw: unknown): Promise<ResolvedDto> {
    const c = await this.config(raw);
    let host: HostCapabilities | undefined;
    try { host = probeHost(); } catch { /* no KVM: the command line needs none; a start judges the rest */ }
    if (host) return toResolvedDto(this.resolve(c), commandLine(c));
    try {
      const { resolution } = resolveMachineWithoutKvm(c);
      return { ...toResolvedDto({ resolution }, commandLine(c)), judgedAtStart: judgedAtStart(c, resolution.features) };
    } catch (e) {
      throw toApiError(e);
    }
  }

  async checkBootFiles(raw: unknown): Promise<void> {
    if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) throw new ApiError('invalid', 'the files to check must be an object { kernel, initrd, memoryMiB, disks }');
    const { kernel, initrd, memoryMiB, disks, ...rest } = raw as Record<string, unknown>;
    if (Object.keys(rest).length) throw new ApiError('invalid', `unknown field "${clip(Object.keys(rest)[0]!)}" (valid: kernel, initrd, memoryMiB, disks)`);
    let c: VmConfig;
    try {
      // The schema's own path and memory rules first, exactly as createVm applies them.
      c = validateConfig({ guest: kernel === undefined ? 'probe' : 'custom', kernel, initrd, memoryMiB, disks });
    } catch (e) {
      throw toApiError(e);
    }
    await checkBootFiles(c, this.allowedFolders());
  }

  async createDiskImage(rawPath: unknown, sizeMiB: unknown): Promise<void> {
    try {
      const path = checkDisk({ path: rawPath }).path;
      // Where a guest may be given files from (the file is not there yet: its folder is resolved).
      confineNewFileToAllowedFolders(path, 'disk', this.allowedFolders());
      createRawImage(path, sizeMiB);
    } catch (e) {
      throw toApiError(e, 'invalid');
    }
  }

  async convertDiskImage(rawSource: unknown): Promise<DiskConversionDto> {
    const folders = this.allowedFolders();
    try {
      return this.conversions.start(rawSource, {
        existing: (p) => confineToAllowedFolders(p, 'disk', folders),
        created: (p) => confineNewFileToAllowedFolders(p, 'disk', folders),
      });
    } catch (e) {
      throw toApiError(e, 'invalid');
    }
  }

  async exportConfig(raw: unknown, rawFormat: unknown, rawForHost?: unknown): Promise<ExportedConfigDto> {
    if (!isExportFormat(rawFormat)) {
      throw new ApiError('invalid', `export format must be one of ${EXPORT_FORMATS.join(', ')}, got ${JSON.stringify(rawFormat)?.slice(0, 40)}`);
    }
    // For the kind of host asked for, else this host's (PVM needs two adjustments); nothing else about this host matters.
    const kind = rawForHost === undefined ? hostKind() : rawForHost;
    if (!isExportHost(kind)) throw new ApiError('invalid', exportHostProblem(kind, 'the export\'s host (forHost)'));
    const c = await this.config(raw);
    try {
      return exportConfig(rawFormat, { config: c, boot: resolveBoot(c, kind), hostKind: kind });
    } catch (e) {
      throw toApiError(e);
    }
  }

  async startVm(rawId: unknown): Promise<VmStatus> {
    traceStep('service: request in');
    this.open_();
    const first = this.record(rawId);
    const current = this.runtimes.get(first.id);
    if (current?.running) throw startRefusal(current.status().state);
    try {
      await checkBootFiles(first.config, this.allowedFolders());
      traceStep('service: boot files checked');
      return await this.claimAndStart(first.id);
    } catch (e) {
      // Unless another start won the race, this start failed: the VM page says when and why.
      if (!this.runtimes.get(first.id)?.running) await this.noteStartFailed(first.id, e);
      throw e;
    }
  }

  /** Keeps the failed start in the library (shown on the VM page until a start works). */
  private async noteStartFailed(id: string, e: unknown): Promise<void> {
    const reason = (e instanceof Error ? e.message : String(e)).slice(0, MAX_FAILURE_REASON);
    const at = Date.now();
    try {
      await this.store.mutate((vms) => {
        const r = vms.find((v) => v.id === id);
        if (r) r.lastStartFailure = { at, reason };
      });
      this.broadcastLibrary();
    } catch { /* the error is still answered; only the VM page's note is lost */ }
  }

  /**
   * The start's critical section, with no await from the checks to the claim: the VM is claimed
   * (its runtime leaves 'stopped' synchronously inside rt.start) in the same turn of the event
   * loop as its record and the shutdown flag are checked. A delete checks "not running" and
   * removes the record in one synchronous step too (in its library change), so either the
   * delete sees the VM claimed and refuses, or this start finds no record: a VM that runs always
   * has a record, and a VM started after close() began cannot escape its stop.
   */
  private claimAndStart(id: string): Promise<VmStatus> {
    this.open_();
    const rec = this.record(id);
    const rt = this.runtime(rec.id);
    if (rt.running) throw startRefusal(rt.status().state);
    const resolved = this.resolve(rec.config);
    traceStep('service: machine resolved');
    const started = rt.start({ name: rec.config.name, resolved, commandLine: commandLine(rec.config) });
    // A start that failed is not a run; its reason is the VM's last exit.
    started.then(() => this.noteStarted(rec.id), () => {});
    return started;
  }

  /**
   * Keeps when the VM was last started (the library's "last run"): at once in memory (every read
   * sees it), on disk a while later. The library write is synchronous with two fsyncs, and on
   * the start's path it held up the start's answer and the guest's first output by ~10 ms.
   */
  private noteStarted(id: string): void {
    this.startsToSave.set(id, this.runtimes.get(id)?.status().startedAt ?? Date.now());
    if (this.saveStartsTimer) return;
    this.saveStartsTimer = setTimeout(() => void this.saveStarts(), SAVE_STARTS_DELAY_MS);
    this.saveStartsTimer.unref();
  }

  /** Writes the noted starts to the library (best effort: only a column of the library view). */
  private async saveStarts(): Promise<void> {
    clearTimeout(this.saveStartsTimer);
    this.saveStartsTimer = undefined;
    if (this.startsToSave.size === 0) return;
    const starts = new Map(this.startsToSave);
    try {
      await this.store.mutate((vms) => {
        for (const r of vms) {
          const at = starts.get(r.id);
          if (at !== undefined) r.lastStartedAt = at;
          if (at !== undefined && r.lastStartFailure && r.lastStartFailure.at <= at) delete r.lastStartFailure;
        }
      });
      for (const [id, at] of starts) if (this.startsToSave.get(id) === at) this.startsToSave.delete(id);
      this.broadcastLibrary();
    } catch { /* the VMs run regardless; the next start or the shutdown retries */ }
  }

  async stopVm(rawId: unknown, rawGrace: unknown): Promise<VmStatus> {
    const rec = this.record(rawId);
    const grace = rawGrace === undefined || rawGrace === null ? DEFAULT_STOP_GRACE_MS : intArg(rawGrace, 'grace period (ms)', 0, MAX_GRACE_MS);
    return this.runtime(rec.id).stop(grace);
  }

  async forceStopVm(rawId: unknown): Promise<VmStatus> {
    return this.runtime(this.record(rawId).id).forceStop();
  }

  /**
   * A guest's own reset request ends its run (the VMM has no warm reset); a user's reset does the
   * same and boots the same configuration again: a power cycle. Everything the new boot needs is
   * checked before the running guest is stopped, so a reset that cannot boot loses nothing.
   */
  async resetVm(rawId: unknown): Promise<VmStatus> {
    this.open_();
    const rec = this.record(rawId);
    const rt = this.runtimes.get(rec.id);
    if (!rt?.running || rt.status().state === 'stopping') {
      throw new ApiError('conflict', `the VM is ${rt?.status().state ?? 'stopped'}: only a running or paused VM can be reset (start it instead)`);
    }
    await checkBootFiles(rec.config, this.allowedFolders());
    this.resolve(rec.config);
    // Stopped meanwhile (by the guest or another client): a reset must not turn that into a start.
    if (!rt.running || rt.status().state === 'stopping') throw new ApiError('conflict', 'the VM stopped before it could be reset');
    await rt.forceStop('reset by the user: stopped and booted again with the same configuration');
    return this.claimAndStart(rec.id);
  }

  pauseVm(rawId: unknown): Promise<VmStatus> {
    return this.runtime(this.record(rawId).id).pause();
  }

  resumeVm(rawId: unknown): VmStatus {
    return this.runtime(this.record(rawId).id).resume();
  }

  status(rawId: unknown): VmStatus {
    return this.dto(this.record(rawId)).status;
  }

  setHaltPollNs(rawId: unknown, rawNs: unknown): VmStatus {
    const rec = this.record(rawId);
    const ns = intArg(rawNs, 'halt-poll-ns', 0, MAX_HALT_POLL_NS);
    const unavailable = haltPollUnavailable(this.probe());
    if (unavailable) throw new ApiError('host', unavailable);
    return this.runtime(rec.id).setHaltPollNs(ns);
  }

  setPin(rawId: unknown, rawCpus: unknown): VmStatus {
    const rec = this.record(rawId);
    const cpus = intListArg(rawCpus, 'pin', MAX_PIN_ENTRIES, 0, MAX_HOST_CPU);
    try {
      checkPinFit(cpus, this.probe().hostCpus);
    } catch (e) {
      throw toApiError(e);
    }
    return this.runtime(rec.id).setPin(cpus);
  }

  sendConsole(rawId: unknown, rawData: unknown): void {
    const rec = this.record(rawId);
    const data = textArg(rawData, 'console input', MAX_CONSOLE_INPUT);
    this.runtime(rec.id).sendConsole(data);
  }

  subscribe(rawId: unknown, sink: EventSink): Subscription {
    const rec = this.record(rawId);
    return { vmId: rec.id, backfill: this.runtime(rec.id).subscribe(sink) };
  }

  unsubscribe(rawId: unknown, sink: EventSink): void {
    const id = vmIdArg(rawId);
    this.runtimes.get(id)?.unsubscribe(sink);
  }

  startExperiment(raw: unknown): Promise<ExperimentSummary> {
    this.open_();
    return this.experiments.start(raw, () => this.probe());
  }

  listExperiments(): ExperimentSummary[] {
    return this.experiments.list();
  }

  getExperiment(rawId: unknown): ExperimentDetail {
    return this.experiments.get(rawId);
  }

  cancelExperiment(rawId: unknown): Promise<ExperimentSummary> {
    return this.experiments.cancel(rawId);
  }

  deleteExperiment(rawId: unknown): void {
    this.experiments.delete(rawId);
  }

  /** The tuning advisor on a VM's saved configuration; the request names the workload, goal and budget. */
  startTune(rawVmId: unknown, raw: unknown): Promise<ExperimentSummary> {
    this.open_();
    const rec = this.record(rawVmId);
    if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) throw new ApiError('invalid', 'a tune request must be an object { workload, goal, budgetS }');
    const { workload, workloadArgs, goal, latencyBound, budgetS, ...rest } = raw as Record<string, unknown>;
    const unknownField = Object.keys(rest)[0];
    if (unknownField !== undefined) throw new ApiError('invalid', `unknown tune field "${clip(unknownField, 40)}"`);
    if (rec.config.guest !== 'probe' && rec.config.guest !== 'linux') {
      throw new ApiError('invalid', `VM "${rec.config.name}" boots its own kernel: the advisor runs the bench workloads, which need the probe or the Linux guest`);
    }
    return this.experiments.startTune({
      // Without its disks: the workloads use none, and an experiment takes no files (runner.ts).
      guest: rec.config.guest, config: formatConfigString({ ...rec.config, disks: undefined }), vmId: rec.id, vmName: rec.config.name,
      workload, goal, budgetS,
      ...(workloadArgs !== undefined ? { workloadArgs } : {}), ...(latencyBound !== undefined ? { latencyBound } : {}),
    }, () => this.probe());
  }

  /** A finished tune's recommendation into a stopped VM's saved configuration; recorded in the tune. */
  async applyTune(rawExperimentId: unknown, rawVmId: unknown): Promise<VmRecord> {
    const d = this.experiments.get(rawExperimentId);
    if (d.kind !== 'tune' || !d.advice) throw new ApiError('conflict', `experiment ${d.id} is not a tune: there is no recommendation to apply`);
    if (d.state !== 'done') throw new ApiError('conflict', `tune ${d.id} is ${d.state}: only a finished tune's recommendation can be applied`);
    const rec = d.advice.recommendation;
    if (rec.kind !== 'change') throw new ApiError('conflict', 'the advice was to keep the current configuration: there is nothing to apply');
    const id = this.record(rawVmId).id;
    const refuseRunning = () => {
      const rt = this.runtimes.get(id);
      if (rt?.running) throw new ApiError('conflict', `the VM is ${rt.status().state}: its settings are fixed at boot, so nothing was changed; stop it, then apply the recommendation (${rec.label})`);
    };
    refuseRunning();
    const updated = await this.changeRecord(id, (r) => {
      refuseRunning(); // again inside the change: a start may have claimed the VM meanwhile
      r.config = this.shape(applyDelta(r.config, rec.delta));
    });
    this.experiments.markApplied(d.id, { vmId: id, vmName: updated.config.name, at: Date.now(), config: formatConfigString(updated.config) });
    this.broadcastLibrary();
    return this.dto(updated);
  }

  runningVmIds(): string[] {
    return [...this.runtimes.values()].filter((r) => r.running).map((r) => r.id);
  }

  private open_(): void {
    if (this.closed) throw new ApiError('conflict', 'Unhalt is shutting down');
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.conversions.stopAll();
    this.watcher?.close();
    clearTimeout(this.watchTimer);
    const grace = this.options.shutdownGraceMs ?? 2000;
    await Promise.all([this.experiments.abort(), ...[...this.runtimes.values()].map((r) => r.dispose(grace))]);
    await this.saveStarts();
    for (const s of [...this.sessions]) s.close();
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

function realPathOr(path: string): string {
  try { return realpathSync(path); } catch { return path; }
}

function assertUniqueName(vms: LibraryRecord[], name: string, exceptId?: string): void {
  try {
    checkNameFree(name, vms.filter((v) => v.id !== exceptId).map((v) => v.config.name));
  } catch (e) {
    throw new ApiError('conflict', (e as Error).message);
  }
}

/** "name-copy", "name-copy-2", ... within the name length limit. */
function freeName(vms: LibraryRecord[], name: string): string {
  for (let i = 1; ; i++) {
    const suffix = i === 1 ? '-copy' : `-copy-${i}`;
    const candidate = `${normalizeVmName(name).slice(0, MAX_NAME_LENGTH - suffix.length)}${suffix}`;
    if (!vms.some((v) => sameVmName(v.config.name, candidate))) return candidate;
  }
}


// What every group of the service's calls shares (service-core.ts holds one of each): the home and
// its VM library, the VMs this process runs (one VmSupervisor each), the connected sessions and
// the events they all get, and the steps most calls begin with: find the VM, check a
// configuration, ask the host, change the library under its lock. Inputs arrive as `unknown` and
// are validated here or by the caller; errors are ApiErrors (sessions map anything else).
import type { AllowedFolder, ApiEvent, VmRecord } from './api.ts';
import { resolveMachine, type ResolvedMachine } from '../vmm/config/resolve.ts';
import { validateConfig, type VmConfig } from '../vmm/config/vm-config.ts';
import { probeHost, type HostCapabilities } from '../vmm/machine/host-caps.ts';
import { allowedFolders, folderStates } from './allowed-folders.ts';
import { checkBootFiles, checkHostLimits } from './config-checks.ts';
import { consoleLogPath } from './console-log.ts';
import { ApiError, toApiError } from './errors.ts';
import { LockBusyError, LockFileError } from './file-lock.ts';
import { kvmProblem } from './kvm-problem.ts';
import type { LibraryRecord } from './library-schema.ts';
import { LibraryFullError, type LibraryStore } from './library-store.ts';
import type { HomeLayout } from './paths.ts';
import { readSettings } from './settings.ts';
import { vmIdArg } from './validate.ts';
import { VmSupervisor } from './vm-supervisor.ts';

/** A connected client as the service sees it (service.ts's sessions). */
export interface SessionSink {
  deliver(e: ApiEvent): void;
  close(): void;
}

export class ServiceState {
  readonly layout: HomeLayout;
  /** The VM library; set once the home is open (ServiceCore.openHome). */
  store!: LibraryStore;
  /** Every connected client, the service's own session included. */
  readonly sessions = new Set<SessionSink>();
  /** The VMs of the library this process has started (or been asked about), by id. */
  readonly supervisors = new Map<string, VmSupervisor>();
  /** Starts noted in memory and not yet in the library file (lifecycle-calls.ts noteStarted). */
  readonly startsToSave = new Map<string, number>();
  /** Set when the service shuts down (ServiceCore.close): nothing new starts from then on. */
  closed = false;

  constructor(layout: HomeLayout) {
    this.layout = layout;
  }

  broadcast(e: ApiEvent): void {
    for (const s of this.sessions) s.deliver(e);
  }

  broadcastLibrary(): void {
    this.broadcast({ type: 'library', vms: this.vmRecords() });
  }

  /** Refuses what would start something once the service is shutting down. */
  assertNotShuttingDown(): void {
    if (this.closed) throw new ApiError('conflict', 'Unhalt is shutting down');
  }

  /** The VM's supervisor, made on first use (a VM that never ran has none yet). */
  supervisor(id: string): VmSupervisor {
    let r = this.supervisors.get(id);
    if (!r) {
      r = new VmSupervisor(id, consoleLogPath(this.layout.logs, id), (status) => this.broadcast({ type: 'status', vmId: id, status }));
      this.supervisors.set(id, r);
    }
    return r;
  }

  /** The library's record of the VM a call names; not-found if there is none. */
  record(rawId: unknown): LibraryRecord {
    const id = vmIdArg(rawId);
    const r = this.store.get(id);
    if (!r) throw new ApiError('not-found', `there is no VM with the id "${id}"`);
    return r;
  }

  /** A library record as the API shows it: with its status and its last start (or failed start). */
  dto(r: LibraryRecord): VmRecord {
    const status = this.supervisors.get(r.id)?.status() ?? { id: r.id, state: 'stopped' as const };
    const dto: VmRecord = { id: r.id, config: r.config, createdAt: r.createdAt, updatedAt: r.updatedAt, status };
    const lastStartedAt = this.startsToSave.get(r.id) ?? r.lastStartedAt;
    if (lastStartedAt !== undefined) dto.lastStartedAt = lastStartedAt;
    // A failure older than the last start that worked is history.
    if (r.lastStartFailure && r.lastStartFailure.at > (lastStartedAt ?? -1)) dto.lastStartFailure = { ...r.lastStartFailure };
    if (r.imported) dto.imported = { ...r.imported };
    return dto;
  }

  vmRecords(): VmRecord[] {
    return this.store.list().map((r) => this.dto(r));
  }

  /** This host's KVM, or the reason it cannot be used as a 'host' ApiError (kvm-problem.ts). */
  probe(): HostCapabilities {
    try {
      return probeHost();
    } catch (e) {
      throw new ApiError('host', kvmProblem(e));
    }
  }

  /** A configuration as the schema and this host's limits accept it; its files not checked (see validConfigWithFiles). */
  validConfig(raw: unknown): VmConfig {
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

  /** validConfig, and its boot files and disks checked where they are (config-checks.ts). */
  async validConfigWithFiles(raw: unknown): Promise<VmConfig> {
    const c = this.validConfig(raw);
    await checkBootFiles(c, this.allowedFolders());
    return c;
  }

  allowedFolders(): AllowedFolder[] {
    const s = readSettings(this.layout.home);
    return allowedFolders(this.layout.home, s.allowedFolders, s.allowedFolderIds);
  }
  /** Every folder with its state (a refused added folder included), for the list the user sees. */
  folderStates(): AllowedFolder[] {
    const s = readSettings(this.layout.home);
    return folderStates(this.layout.home, s.allowedFolders, s.allowedFolderIds);
  }


  /** The configuration resolved against this host's KVM (a 'host' ApiError without one). */
  resolve(c: VmConfig): ResolvedMachine {
    const host = this.probe();
    try {
      return resolveMachine(c, host);
    } catch (e) {
      throw toApiError(e);
    }
  }

  /** A change of the library under its lock; a full library or a busy lock is a 'conflict'. */
  async mutate<T>(change: (vms: LibraryRecord[]) => T): Promise<T> {
    try {
      return await this.store.mutate(change);
    } catch (e) {
      if (e instanceof LibraryFullError || e instanceof LockFileError) throw new ApiError('conflict', e.message);
      if (e instanceof LockBusyError) {
        throw new ApiError('conflict', `the VM library is being changed by ${e.holderPid ? `another Unhalt process (pid ${e.holderPid})` : 'another process'}; try again`);
      }
      throw e;
    }
  }

  /** One record changed under the library's lock, its updatedAt moved on. */
  changeRecord(id: string, change: (r: LibraryRecord, vms: LibraryRecord[]) => void): Promise<LibraryRecord> {
    return this.mutate((vms) => {
      const r = vms.find((v) => v.id === id);
      if (!r) throw new ApiError('not-found', `there is no VM with the id "${id}"`);
      change(r, vms);
      r.updatedAt = Math.max(Date.now(), r.createdAt);
      return r;
    });
  }
}

// The service behind the app's one API (api.ts): the VM library, lifecycle, console, telemetry,
// host capabilities and experiments, transport-neutral (the logic is in service-core.ts). A
// transport opens one session per client (connect()); sessions share everything but their
// subscriptions. The service object itself is also a session, whose events come out of
// `on('event')` — what tests and in-process users use.
//
// Every input arrives as `unknown`; every rejection is an ApiError with a code and one readable line.
import { EventEmitter } from 'node:events';
import type {
  AllowedFolder, ApiEvent, ExperimentDetail, ExperimentSpec, ExperimentSummary, HostInfo, ResolvedDto, Subscription, UnhaltApi, VmRecord, VmStatus,
} from './api.ts';
import { ApiError, toApiError } from './errors.ts';
import { DEFAULT_STOP_GRACE_MS, ServiceCore, type ServiceOptions } from './service-core.ts';
import type { EventSink } from './vm-runtime.ts';

export { DEFAULT_STOP_GRACE_MS, type ServiceOptions };

/** What a transport holds per client: the API plus its end. */
export interface ServiceSession extends UnhaltApi {
  close(): void;
}

export async function createService(options: ServiceOptions = {}): Promise<UnhaltService> {
  const core = new ServiceCore(options);
  await core.open();
  return new UnhaltService(core);
}

/** One client's view of the service: the API, with its own subscriptions and event sink. */
class Session implements ServiceSession {
  protected readonly core: ServiceCore;
  private readonly sink: EventSink;
  private readonly subscribed = new Set<string>();
  private closed = false;

  constructor(core: ServiceCore, sink: EventSink) {
    this.core = core;
    this.sink = (e) => { if (!this.closed) sink(e); };
    core.sessions.add(this);
  }

  /** Events for every session (status, library, experiments). */
  deliver(e: ApiEvent): void {
    try { this.sink(e); } catch { /* a failing transport must not break the others */ }
  }

  close(): void {
    if (this.closed) return;
    for (const id of this.subscribed) this.core.unsubscribe(id, this.sink);
    this.subscribed.clear();
    this.closed = true;
    this.core.sessions.delete(this);
  }

  host(): Promise<HostInfo> { return guard(() => this.core.host()); }
  listVms(): Promise<VmRecord[]> { return guard(() => this.core.listVms()); }
  getVm(id: unknown): Promise<VmRecord> { return guard(() => this.core.getVm(id)); }
  createVm(config: unknown): Promise<VmRecord> { return guard(() => this.core.createVm(config)); }
  updateVm(id: unknown, config: unknown): Promise<VmRecord> { return guard(() => this.core.updateVm(id, config)); }
  cloneVm(id: unknown, name?: unknown): Promise<VmRecord> { return guard(() => this.core.cloneVm(id, name)); }
  deleteVm(id: unknown): Promise<void> { return guard(() => this.core.deleteVm(id)); }
  describeConfig(config: unknown): Promise<ResolvedDto> { return guard(() => this.core.describeConfig(config)); }
  startVm(id: unknown): Promise<VmStatus> { return guard(() => this.core.startVm(id)); }
  stopVm(id: unknown, graceMs?: unknown): Promise<VmStatus> { return guard(() => this.core.stopVm(id, graceMs)); }
  forceStopVm(id: unknown): Promise<VmStatus> { return guard(() => this.core.forceStopVm(id)); }
  pauseVm(id: unknown): Promise<VmStatus> { return guard(() => this.core.pauseVm(id)); }
  resumeVm(id: unknown): Promise<VmStatus> { return guard(() => this.core.resumeVm(id)); }
  status(id: unknown): Promise<VmStatus> { return guard(() => this.core.status(id)); }
  setHaltPollNs(id: unknown, ns: unknown): Promise<VmStatus> { return guard(() => this.core.setHaltPollNs(id, ns)); }
  setPin(id: unknown, hostCpus: unknown): Promise<VmStatus> { return guard(() => this.core.setPin(id, hostCpus)); }
  sendConsole(id: unknown, data: unknown): Promise<void> { return guard(() => this.core.sendConsole(id, data)); }

  subscribe(id: unknown): Promise<Subscription> {
    return guard(() => {
      if (this.closed) throw new ApiError('conflict', 'this connection is closed');
      const sub = this.core.subscribe(id, this.sink);
      this.subscribed.add(sub.vmId);
      return sub;
    });
  }

  unsubscribe(id: unknown): Promise<void> {
    return guard(() => {
      this.core.unsubscribe(id, this.sink);
      this.subscribed.delete(id as string);
    });
  }

  startExperiment(spec: unknown): Promise<ExperimentSummary> { return guard(() => this.core.startExperiment(spec as ExperimentSpec)); }
  listExperiments(): Promise<ExperimentSummary[]> { return guard(() => this.core.listExperiments()); }
  getExperiment(id: unknown): Promise<ExperimentDetail> { return guard(() => this.core.getExperiment(id)); }
  dismissLibraryNotices(): Promise<void> { return guard(() => this.core.dismissLibraryNotices()); }
  listAllowedFolders(): Promise<AllowedFolder[]> { return guard(() => this.core.listAllowedFolders()); }
  addAllowedFolder(path: unknown): Promise<AllowedFolder[]> { return guard(() => this.core.addAllowedFolder(path)); }
  removeAllowedFolder(path: unknown): Promise<AllowedFolder[]> { return guard(() => this.core.removeAllowedFolder(path)); }
}

/** The service: a session of its own (events via on('event')) that opens sessions for transports. */
export class UnhaltService extends Session {
  readonly events: EventEmitter<{ event: [ApiEvent] }>;

  constructor(core: ServiceCore) {
    const events = new EventEmitter<{ event: [ApiEvent] }>();
    super(core, (e) => { events.emit('event', e); });
    this.events = events;
  }

  get home(): string {
    return this.core.layout.home;
  }

  on(listener: (e: ApiEvent) => void): () => void {
    this.events.on('event', listener);
    return () => { this.events.off('event', listener); };
  }

  /** A session for one client of a transport; events for it go to `onEvent`. */
  connect(onEvent: (e: ApiEvent) => void): ServiceSession {
    if (this.core.closed) throw new ApiError('conflict', 'Unhalt is shutting down');
    return new Session(this.core, onEvent);
  }

  runningVmIds(): string[] {
    return this.core.runningVmIds();
  }

  /** Stops every VM (ACPI, then force), ends running experiments, writes out the logs. */
  async shutdown(): Promise<void> {
    await this.core.close();
  }
}

async function guard<T>(fn: () => T | Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (e) {
    throw toApiError(e);
  }
}

// The service behind the app's one API (api.ts): the VM library, lifecycle, console, telemetry,
// host capabilities and experiments, transport-neutral (the logic is in service-core.ts). A
// transport opens one session per client (connect()); sessions share everything but their
// subscriptions. The service object itself is also a session, whose events come out of
// `on('event')` — what tests and in-process users use.
//
// Every input arrives as `unknown`; every rejection is an ApiError with a code and one readable line.
import { EventEmitter } from 'node:events';
import { API_METHOD_NAMES, API_METHODS, type ApiCallHandlers, type ApiEvent, type CallMethod, type Subscription, type UnhaltApi } from './api.ts';
import { ApiError, toApiError } from './errors.ts';
import { DEFAULT_STOP_GRACE_MS } from './lifecycle-calls.ts';
import { ServiceCore, type ServiceOptions } from './service-core.ts';
import type { EventSink } from './vm-supervisor.ts';
import { SERVICE_SPARE_VCPU_WORKERS, keepVcpuWorkersWarm, releaseSpareVcpuWorkers } from '../vmm/vcpu/worker-pool.ts';
import { keepVmShellWarm, releaseVmShells } from '../vmm/builder/vm-shells.ts';

export { DEFAULT_STOP_GRACE_MS, SERVICE_SPARE_VCPU_WORKERS, type ServiceOptions };

/** What a transport holds per client: the API plus its end. */
export interface ServiceSession extends UnhaltApi {
  close(): void;
}

export async function createService(options: ServiceOptions = {}): Promise<UnhaltService> {
  const core = new ServiceCore(options);
  await core.openHome();
  if (options.spareVcpuWorkers) {
    keepVcpuWorkersWarm(options.spareVcpuWorkers);
    keepVmShellWarm();
  }
  return new UnhaltService(core);
}

// The call methods are installed from the table (the static block below); this says they exist.
// eslint-disable-next-line @typescript-eslint/no-unsafe-declaration-merging
interface Session extends Pick<UnhaltApi, CallMethod> {}

/**
 * One client's view of the service: the API, with its own subscriptions and event sink. It
 * serves the table's 'subscription' methods itself (`implements` fails if one is missing) and
 * forwards its 'call' methods to the core.
 */
// eslint-disable-next-line @typescript-eslint/no-unsafe-declaration-merging
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

  // The table's 'call' methods, one forwarder each: the core serves them under the same name
  // (ServiceCore implements ApiCallHandlers, so a call the core lacks does not compile).
  static {
    for (const method of API_METHOD_NAMES) {
      if (API_METHODS[method].kind !== 'call') continue;
      const call = method as CallMethod;
      Object.defineProperty(Session.prototype, call, {
        value(this: Session, ...params: unknown[]): Promise<unknown> {
          const core: ApiCallHandlers = this.core;
          return guard(() => (core[call] as (...p: unknown[]) => unknown).apply(core, params));
        },
        writable: true,
        configurable: true,
      });
    }
  }
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

  /** Host mode's origin (no token), for the owner lock's "who owns this home" (home-owner.ts). */
  announceAddress(address: string): void {
    this.core.announceAddress(address);
  }

  /** Stops every VM (ACPI, then force), ends running experiments, writes out the logs. */
  async shutdown(): Promise<void> {
    await this.core.close();
    if (this.core.options.spareVcpuWorkers) await Promise.all([releaseSpareVcpuWorkers(), releaseVmShells()]);
  }
}

async function guard<T>(fn: () => T | Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (e) {
    throw toApiError(e);
  }
}

// The API's calls on a VM's life: start, stop, force stop, reset, pause and resume; its status;
// its console input and the subscriptions that stream its console and telemetry. Each VM's runs
// are its VmSupervisor's (vm-supervisor.ts); this side finds the VM in the library, checks what
// the start needs, claims the VM and keeps in the library when it last started or failed to.
import type { VmStatus, Subscription } from './api.ts';
import { commandLine } from '../vmm/config/cli-args.ts';
import { checkBootFiles } from './config-checks.ts';
import { ApiError } from './errors.ts';
import { MAX_FAILURE_REASON } from './library-schema.ts';
import type { ServiceState } from './service-state.ts';
import { intArg, textArg, vmIdArg } from './validate.ts';
import { startRefusal, type EventSink } from './vm-supervisor.ts';
import { traceStep } from '../vmm/start-trace.ts';

export const DEFAULT_STOP_GRACE_MS = 3000;
const MAX_GRACE_MS = 60_000;
const MAX_CONSOLE_INPUT = 64 * 1024;
/** How long after a start its time is written to the library (noteStarted): past the guest's first output. */
const SAVE_STARTS_DELAY_MS = 1000;

export class LifecycleCalls {
  private readonly s: ServiceState;
  private saveStartsTimer?: NodeJS.Timeout;

  constructor(state: ServiceState) {
    this.s = state;
  }

  async startVm(rawId: unknown): Promise<VmStatus> {
    traceStep('service: request in');
    this.s.assertNotShuttingDown();
    const first = this.s.record(rawId);
    const current = this.s.supervisors.get(first.id);
    if (current?.running) throw startRefusal(current.status().state);
    try {
      await checkBootFiles(first.config, this.s.allowedFolders());
      traceStep('service: boot files checked');
      return await this.claimAndStart(first.id);
    } catch (e) {
      // Unless another start won the race, this start failed: the VM page says when and why.
      if (!this.s.supervisors.get(first.id)?.running) await this.noteStartFailed(first.id, e);
      throw e;
    }
  }

  /** Keeps the failed start in the library (shown on the VM page until a start works). */
  private async noteStartFailed(id: string, e: unknown): Promise<void> {
    const reason = (e instanceof Error ? e.message : String(e)).slice(0, MAX_FAILURE_REASON);
    const at = Date.now();
    try {
      await this.s.store.mutate((vms) => {
        const r = vms.find((v) => v.id === id);
        if (r) r.lastStartFailure = { at, reason };
      });
      this.s.broadcastLibrary();
    } catch { /* the error is still answered; only the VM page's note is lost */ }
  }

  /**
   * The start's critical section, with no await from the checks to the claim: the VM is claimed
   * (its supervisor leaves 'stopped' synchronously inside sup.start) in the same turn of the event
   * loop as its record and the shutdown flag are checked. A delete checks "not running" and
   * removes the record in one synchronous step too (in its library change, library-calls.ts), so
   * either the delete sees the VM claimed and refuses, or this start finds no record: a VM that
   * runs always has a record, and a VM started after close() began cannot escape its stop.
   */
  private claimAndStart(id: string): Promise<VmStatus> {
    this.s.assertNotShuttingDown();
    const rec = this.s.record(id);
    const sup = this.s.supervisor(rec.id);
    if (sup.running) throw startRefusal(sup.status().state);
    const resolved = this.s.resolve(rec.config);
    traceStep('service: machine resolved');
    const started = sup.start({ name: rec.config.name, resolved, commandLine: commandLine(rec.config) });
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
    this.s.startsToSave.set(id, this.s.supervisors.get(id)?.status().startedAt ?? Date.now());
    if (this.saveStartsTimer) return;
    this.saveStartsTimer = setTimeout(() => void this.saveStarts(), SAVE_STARTS_DELAY_MS);
    this.saveStartsTimer.unref();
  }

  /** Writes the noted starts to the library (best effort: only a column of the library view). */
  async saveStarts(): Promise<void> {
    clearTimeout(this.saveStartsTimer);
    this.saveStartsTimer = undefined;
    if (this.s.startsToSave.size === 0) return;
    const starts = new Map(this.s.startsToSave);
    try {
      await this.s.store.mutate((vms) => {
        for (const r of vms) {
          const at = starts.get(r.id);
          if (at !== undefined) r.lastStartedAt = at;
          if (at !== undefined && r.lastStartFailure && r.lastStartFailure.at <= at) delete r.lastStartFailure;
        }
      });
      for (const [id, at] of starts) if (this.s.startsToSave.get(id) === at) this.s.startsToSave.delete(id);
      this.s.broadcastLibrary();
    } catch { /* the VMs run regardless; the next start or the shutdown retries */ }
  }

  async stopVm(rawId: unknown, rawGrace: unknown): Promise<VmStatus> {
    const rec = this.s.record(rawId);
    const grace = rawGrace === undefined || rawGrace === null ? DEFAULT_STOP_GRACE_MS : intArg(rawGrace, 'grace period (ms)', 0, MAX_GRACE_MS);
    return this.s.supervisor(rec.id).stop(grace);
  }

  async forceStopVm(rawId: unknown): Promise<VmStatus> {
    return this.s.supervisor(this.s.record(rawId).id).forceStop();
  }

  /**
   * A guest's own reset request ends its run (the VMM has no warm reset); a user's reset does the
   * same and boots the same configuration again: a power cycle. Everything the new boot needs is
   * checked before the running guest is stopped, so a reset that cannot boot loses nothing.
   */
  async resetVm(rawId: unknown): Promise<VmStatus> {
    this.s.assertNotShuttingDown();
    const rec = this.s.record(rawId);
    const sup = this.s.supervisors.get(rec.id);
    if (!sup?.running || sup.status().state === 'stopping') {
      throw new ApiError('conflict', `the VM is ${sup?.status().state ?? 'stopped'}: only a running or paused VM can be reset (start it instead)`);
    }
    await checkBootFiles(rec.config, this.s.allowedFolders());
    this.s.resolve(rec.config);
    // Stopped meanwhile (by the guest or another client): a reset must not turn that into a start.
    if (!sup.running || sup.status().state === 'stopping') throw new ApiError('conflict', 'the VM stopped before it could be reset');
    await sup.forceStop('reset by the user: stopped and booted again with the same configuration');
    return this.claimAndStart(rec.id);
  }

  pauseVm(rawId: unknown): Promise<VmStatus> {
    return this.s.supervisor(this.s.record(rawId).id).pause();
  }

  resumeVm(rawId: unknown): VmStatus {
    return this.s.supervisor(this.s.record(rawId).id).resume();
  }

  status(rawId: unknown): VmStatus {
    return this.s.dto(this.s.record(rawId)).status;
  }

  sendConsole(rawId: unknown, rawData: unknown): void {
    const rec = this.s.record(rawId);
    const data = textArg(rawData, 'console input', MAX_CONSOLE_INPUT);
    this.s.supervisor(rec.id).sendConsole(data);
  }

  subscribe(rawId: unknown, sink: EventSink): Subscription {
    const rec = this.s.record(rawId);
    return { vmId: rec.id, backfill: this.s.supervisor(rec.id).subscribe(sink) };
  }

  unsubscribe(rawId: unknown, sink: EventSink): void {
    const id = vmIdArg(rawId);
    this.s.supervisors.get(id)?.unsubscribe(sink);
  }
}

// The supervisor of one VM of the library in this process (VmSupervisor), across its runs: it
// starts a VirtualMachine (the VMM's runtime of one run, vm.ts) and stops it, and keeps what
// outlives a run: the VM's status and last exit, its console (scrollback + log file), telemetry
// (a Sampler per run) and guest metrics, and the subscribers that stream them. Whatever the guest
// or the VMM does ends here as a status with a reason; nothing a guest does throws out of this
// class.
//
// Streams are batched per VM: console bytes within ~16 ms (the first at once), telemetry and guest metrics every
// 200 ms (two samples at 10 Hz), so a transport sends a few messages per second, not one per exit.
// Times on the API are epoch milliseconds, so history from several runs shares one time axis.
import type {
  ApiEvent, GuestMetric, LiveKnobs, ResolvedDto, Subscription, TelemetryDeviceSample, TelemetryHistograms, TelemetryMarker, TelemetrySample, VmRunState, VmStatus,
} from './api.ts';
import type { AgentEvent } from '../vmm/agent/line-protocol.ts';
import type { ResolvedMachine } from '../vmm/config/resolve.ts';
import { disableExitNames } from '../vmm/machine/host-caps.ts';
import { Sampler } from '../vmm/telemetry/sampler.ts';
import { KVM_HISTOGRAM_SUMS, type DeviceRecord, type TelemetryEvent, type SampleRecord, type TelemetryMarker as SamplerMarker, type VcpuHistograms } from '../vmm/telemetry/fields.ts';
import { VirtualMachine, type VmState } from '../vmm/vm.ts';
import { isGuestEnd, type VmEnd } from '../vmm/runtime/vm-end.ts';
import { sanitizeVmError } from './config-checks.ts';
import { ConsoleLogFile, readLogTail } from './console-log.ts';
import { ApiError } from './errors.ts';
import { Scrollback } from './scrollback.ts';
import { traceStep } from '../vmm/start-trace.ts';

export type EventSink = (e: ApiEvent) => void;

const CONSOLE_FLUSH_MS = 16;
const TELEMETRY_FLUSH_MS = 200;
/** Console bytes waiting for a slow subscriber; beyond this the oldest are dropped (counted). */
const MAX_PENDING_CONSOLE = 256 * 1024;
const MAX_PENDING_SAMPLES = 4000;
const MAX_METRICS = 1000;
/** The agent's live probe while the VM is watched: a sample a second of 100 pipe round trips (light on the guest). */
const PROBE_INTERVAL_MS = 1000;
const PROBE_ROUNDS = 100;
const MAX_METRICS_PER_FLUSH = 50;
/**
 * Records in a subscription's backfill (newest kept): ~1.5 KiB of JSON each, so this bounds the
 * first message to a few MiB — ten minutes at 10 Hz for one vCPU, less for more. Device records
 * (~0.5 KiB) have the same bound of their own. Live streaming has no such limit; a renderer keeps
 * its own history from there.
 */
export const MAX_BACKFILL_SAMPLES = 6000;
/** Histogram bins in a backfill (one per vCPU per second, ~0.3 KiB each): ten minutes of 8 vCPUs. */
const MAX_BACKFILL_HIST_BINS = 4800;

/**
 * The guest metrics a new subscriber gets: those kept, led by the agent's newest ready / info line
 * when the per-vCPU probe lines have pushed it out (the VM page reads the guest's cpuidle set-up from it).
 */
export function metricsBackfill(kept: readonly GuestMetric[], agentFacts: GuestMetric | undefined): GuestMetric[] {
  return agentFacts && !kept.includes(agentFacts) ? [agentFacts, ...kept] : [...kept];
}

export interface StartInput {
  name: string;
  resolved: ResolvedMachine;
  commandLine: string;
}

/**
 * Why a VM that is not stopped cannot be started. It does not name the VM: the caller shows the
 * refusal after the action and the VM's name ("start NAME: ...").
 */
export function startRefusal(state: VmRunState): ApiError {
  return new ApiError('conflict', state === 'stopping' ? 'the VM is still stopping: start it again once it has stopped' : `the VM is already ${state}`);
}

export class VmSupervisor {
  readonly id: string;
  private state: VmRunState = 'stopped';
  private vm?: VirtualMachine;
  private sampler?: Sampler;
  /** Epoch ms of the sampler's time origin (the run's start). */
  private epochBase = 0;
  private startedAt?: number;
  private lastEnd?: VmStatus['lastEnd'];
  private resolved?: ResolvedDto;
  /** Knobs changed while this run lasts (VmStatus.live). */
  private live: LiveKnobs = {};
  /** The guest's agent said ready this run; its live probe is on (updateProbe). */
  private agentReady = false;
  private probing = false;
  private droppedByVm = 0;
  private droppedForSubscribers = 0;
  private starting?: Promise<unknown>;
  private forceMessage?: string;
  private readonly scrollback = new Scrollback();
  private scrollbackLoaded = false;
  private readonly log: ConsoleLogFile;
  private metrics: GuestMetric[] = [];
  /** The agent's newest ready / info line this run: the VM page's guest facts, kept past MAX_METRICS. */
  private agentFacts: GuestMetric | undefined;
  /** Markers of a run without a sampler (telemetry unavailable). */
  private ownMarkers: TelemetryMarker[] = [];
  private readonly sinks = new Set<EventSink>();
  private pendingConsole: Uint8Array[] = [];
  private pendingConsoleBytes = 0;
  private pendingSamples: TelemetrySample[] = [];
  private pendingDevices: TelemetryDeviceSample[] = [];
  private pendingHistograms: TelemetryHistograms[] = [];
  private pendingMarkers: TelemetryMarker[] = [];
  private pendingMetrics: GuestMetric[] = [];
  private consoleTimer?: NodeJS.Timeout;
  private telemetryTimer?: NodeJS.Timeout;
  private readonly onStatus: (s: VmStatus) => void;

  constructor(id: string, logPath: string, onStatus: (s: VmStatus) => void) {
    this.id = id;
    this.log = new ConsoleLogFile(logPath);
    this.onStatus = onStatus;
  }

  get running(): boolean {
    return this.state !== 'stopped';
  }

  status(): VmStatus {
    const s: VmStatus = { id: this.id, state: this.state };
    if (this.lastEnd) s.lastEnd = { ...this.lastEnd };
    if (this.startedAt !== undefined && this.state !== 'stopped') s.startedAt = this.startedAt;
    if (this.resolved && this.state !== 'stopped') s.resolved = this.resolved;
    const dropped = (this.vm?.droppedConsoleBytes ?? this.droppedByVm) + this.droppedForSubscribers + this.log.dropped;
    if (dropped) s.droppedConsoleBytes = dropped;
    if (this.state !== 'stopped' && Object.keys(this.live).length) s.live = { ...this.live };
    if (this.state !== 'stopped' && this.agentReady) s.agent = this.probing ? 'probing' : 'ready';
    return s;
  }

  /**
   * The agent's live context-switch probe (the latency chart of a Linux guest) runs while a client
   * watches this VM and the agent is there: on at the agent's ready or a new subscriber, off when
   * the last one leaves. An agent that restarted said ready again with its probe off.
   */
  private updateProbe(): boolean {
    const want = this.agentReady && this.sinks.size > 0 && this.vm !== undefined && this.state !== 'stopped';
    if (want === this.probing) return false;
    this.probing = want;
    this.vm?.sendAgent(want ? `probe on interval_ms=${PROBE_INTERVAL_MS} rounds=${PROBE_ROUNDS}\n` : 'probe off\n');
    this.emitStatus();
    return true;
  }

  async start(input: StartInput): Promise<VmStatus> {
    if (this.state !== 'stopped') throw startRefusal(this.state);
    const run = this.startAndAttach(input);
    // A stop or force stop that arrives meanwhile waits for this, then finds the VM attached.
    this.starting = run.catch(() => undefined);
    try {
      return await run;
    } finally {
      this.starting = undefined;
    }
  }

  private async startAndAttach(input: StartInput): Promise<VmStatus> {
    this.state = 'starting';
    this.forceMessage = undefined;
    this.resolved = toResolvedDto(input.resolved, input.commandLine);
    this.emitStatus();
    let vm: VirtualMachine;
    try {
      vm = await VirtualMachine.start(input.resolved.spec);
    } catch (e) {
      const message = sanitizeVmError((e as Error)?.message ?? String(e));
      this.state = 'stopped';
      this.lastEnd = { kind: 'start-failed', message, at: Date.now() };
      this.emitStatus();
      // The cause only: the caller knows which VM it started and says so (the app's notice
      // reads "start NAME: cause"); naming it here too said it twice.
      throw new ApiError('host', message);
    }
    this.attach(vm);
    traceStep('service: VM attached (telemetry on)');
    return this.status();
  }

  private attach(vm: VirtualMachine): void {
    this.vm = vm;
    this.startedAt = Date.now();
    this.epochBase = performance.timeOrigin + vm.startedAt;
    this.metrics = [];
    this.agentFacts = undefined;
    this.ownMarkers = [];
    this.live = {};
    this.droppedByVm = 0;
    this.droppedForSubscribers = 0;
    // One console holds every run: a line says where the next one begins (a start, a reset).
    if (this.scrollback.size > 0) this.consoleLine(`run started ${new Date(this.startedAt).toLocaleTimeString()}`);
    vm.on('console', (b) => this.onConsole(b));
    vm.on('agent', (e) => this.onAgent(e));
    vm.on('state', (s) => this.onVmState(s));
    vm.on('end', (x) => this.onEnd(x));
    try {
      const sampler = Sampler.forVm(vm);
      sampler.subscribe((e) => this.onTelemetry(e));
      this.sampler = sampler;
    } catch (e) {
      // Telemetry is an extra: a VM without it still runs; the charts say why they are empty.
      this.sampler = undefined;
      this.addMarker(`telemetry unavailable: ${(e as Error).message}`);
    }
    this.mark('started');
    this.state = vm.state === 'paused' ? 'paused' : 'running';
    this.emitStatus();
    // The VM may have ended during start-up already (a guest that powers off at once).
    if (vm.state === 'stopped') void vm.ended.then((x) => this.onEnd(x));
  }

  private onVmState(s: VmState): void {
    if (this.state === 'stopping' || s === 'stopped' || s === 'starting') return;
    const next: VmRunState = s;
    if (next !== this.state) {
      this.state = next;
      this.emitStatus();
    }
  }

  private onEnd(end: VmEnd): void {
    if (!this.vm) return;
    this.agentReady = false;
    this.probing = false;
    this.droppedByVm = this.vm.droppedConsoleBytes;
    this.vm = undefined;
    const message = end.kind === 'stopped' && this.forceMessage ? this.forceMessage : end.message;
    // Which vCPU hit a fault is worth saying (unless the VMM's message already does); which one
    // wrote the power-off register or isa-debug-exit is not.
    const where = end.vcpu !== undefined && !isGuestEnd(end.kind) && !message.startsWith(`vCPU ${end.vcpu}`)
      ? ` (vCPU ${end.vcpu})` : '';
    this.lastEnd = { kind: end.kind, message: `${message}${where}`, at: Date.now(), ...(end.value !== undefined ? { value: end.value } : {}) };
    this.state = 'stopped';
    this.consoleLine(`run ended ${new Date(this.lastEnd.at).toLocaleTimeString()}: ${this.lastEnd.message}`);
    this.flushConsole();
    this.flushTelemetry();
    void this.log.flush();
    this.emitStatus();
  }

  /** ACPI power button, then a forced stop after graceMs if the guest has not powered off. */
  async stop(graceMs: number): Promise<VmStatus> {
    await this.starting;
    const vm = this.vm;
    if (!vm) return this.status();
    this.state = 'stopping';
    this.emitStatus();
    let listening = false;
    try {
      if (vm.state === 'paused') vm.resume();
      listening = await vm.pressPowerButton();
    } catch { /* the VM is already going away */ }
    if (!listening) {
      // The guest never enabled power-button events: waiting would only delay the inevitable.
      this.forceMessage = 'stopped by the user (the guest does not handle the ACPI power button, so it was stopped at once)';
      await vm.stop();
    } else {
      let timer: NodeJS.Timeout | undefined;
      const ended = await Promise.race([
        vm.ended.then(() => true),
        new Promise<boolean>((r) => { timer = setTimeout(() => r(false), graceMs); }),
      ]);
      clearTimeout(timer);
      if (!ended) {
        this.forceMessage = `the guest did not power off within ${graceMs} ms of the ACPI power button; stopped by force`;
        await vm.stop();
      }
    }
    await vm.ended;
    return this.status();
  }

  async forceStop(message = 'stopped by force (the user)'): Promise<VmStatus> {
    await this.starting;
    const vm = this.vm;
    if (!vm) return this.status();
    this.forceMessage = message;
    this.state = 'stopping';
    this.emitStatus();
    await vm.stop();
    return this.status();
  }

  /** Answers once every vCPU is out of KVM_RUN and the virtio I/O thread has stopped serving (a disk request in progress finishes first: VirtualMachine.pause). */
  async pause(): Promise<VmStatus> {
    const vm = this.need('pause');
    if (this.state === 'running' || this.state === 'paused') await vm.pause();
    return this.status();
  }

  resume(): VmStatus {
    const vm = this.need('resume');
    if (this.state === 'paused') vm.resume();
    return this.status();
  }

  setHaltPollNs(ns: number): VmStatus {
    const vm = this.need('change halt polling of');
    try {
      vm.setHaltPollNs(ns);
    } catch (e) {
      throw new ApiError('host', `halt-poll-ns could not be changed: ${(e as Error).message}`);
    }
    this.live = { ...this.live, haltPollNs: ns };
    this.mark(`halt-poll-ns=${ns}`);
    this.emitStatus();
    return this.status();
  }

  /** This run's live knob changes (empty when none, or when the VM is not running). */
  liveKnobs(): LiveKnobs {
    return this.state === 'stopped' ? {} : { ...this.live };
  }

  setPin(hostCpus: number[]): VmStatus {
    const vm = this.need('re-pin');
    try {
      vm.setPin(hostCpus);
    } catch (e) {
      throw new ApiError('host', `the vCPUs could not be pinned: ${(e as Error).message}`);
    }
    this.live = { ...this.live, pin: [...hostCpus] };
    this.mark(`pin=${hostCpus.length ? hostCpus.join('+') : 'none'}`);
    this.emitStatus();
    return this.status();
  }

  sendConsole(data: string): void {
    this.need('type into').sendConsole(Buffer.from(data, 'latin1'));
  }

  private need(what: string): VirtualMachine {
    if (!this.vm || this.state === 'stopping') throw new ApiError('conflict', `cannot ${what} a VM that is ${this.state}`);
    return this.vm;
  }

  // ---- streaming ----

  /** Adds a subscriber and returns what it should show first; the stream continues from there. */
  subscribe(sink: EventSink): Subscription['backfill'] {
    // Deliver what is pending to the existing subscribers first: the backfill then covers it,
    // and the new subscriber never sees a sample or a byte twice.
    this.flushConsole();
    this.flushTelemetry();
    if (!this.scrollbackLoaded) {
      this.scrollbackLoaded = true;
      // After an app restart the in-memory scrollback is empty: the log's tail stands in for it.
      if (this.scrollback.size === 0 && !this.vm) this.scrollback.push(readLogTail(this.log.path, this.scrollback.limit));
    }
    const samples = this.sampler ? this.toApiSamples(this.sampler.records().slice(-MAX_BACKFILL_SAMPLES)) : [];
    const devices = this.sampler ? this.toApiSamples(this.sampler.deviceRecords().slice(-MAX_BACKFILL_SAMPLES)) : [];
    const markers = this.sampler ? this.sampler.markers.map((m) => this.toApiMarker(m)) : [...this.ownMarkers];
    // The newest bins, copied (the sampler's own keep growing while this one is sent).
    const histograms = this.sampler ? this.sampler.histBins.all().slice(-MAX_BACKFILL_HIST_BINS).map((b) => ({
      t: this.toEpochMs(b.t), vcpu: b.vcpu, counts: Object.fromEntries(Object.entries(b.counts).map(([k, c]) => [k, Array.isArray(c) ? [...c] : c])),
    })) : [];
    this.sinks.add(sink);
    this.updateProbe();
    return {
      console: this.scrollback.text(), samples, markers, metrics: metricsBackfill(this.metrics, this.agentFacts),
      ...(devices.length ? { devices } : {}), ...(histograms.length ? { histograms } : {}),
    };
  }

  unsubscribe(sink: EventSink): void {
    this.sinks.delete(sink);
    this.updateProbe();
  }

  /** A line of the service's own between guest output (on a line of its own, in the log too). */
  private consoleLine(text: string): void {
    this.onConsole(Buffer.from(`\r\n----- ${text} -----\r\n`, 'utf8'));
  }

  private onConsole(bytes: Uint8Array): void {
    this.scrollback.push(bytes);
    this.log.write(bytes);
    if (this.sinks.size === 0) return;
    this.pendingConsole.push(new Uint8Array(bytes)); // a copy (Buffer#slice would share)
    this.pendingConsoleBytes += bytes.length;
    while (this.pendingConsoleBytes > MAX_PENDING_CONSOLE && this.pendingConsole.length > 1) {
      const dropped = this.pendingConsole.shift()!;
      this.pendingConsoleBytes -= dropped.length;
      this.droppedForSubscribers += dropped.length;
    }
    // Throttled, not delayed: the first bytes after a quiet spell (a start's first output, the
    // echo of a key) go out at once; what follows within CONSOLE_FLUSH_MS waits for the window's end.
    if (this.consoleTimer === undefined) this.flushConsole();
  }

  /** Sends what is pending and, if it sent anything, opens a window in which bytes are collected. */
  private flushConsole(): void {
    if (this.consoleTimer) clearTimeout(this.consoleTimer);
    this.consoleTimer = undefined;
    if (this.pendingConsoleBytes === 0) return;
    const data = Buffer.concat(this.pendingConsole, this.pendingConsoleBytes).toString('latin1');
    this.pendingConsole = [];
    this.pendingConsoleBytes = 0;
    traceStep('service: console sent');
    this.send({ type: 'console', vmId: this.id, data });
    this.consoleTimer = setTimeout(() => this.flushConsole(), CONSOLE_FLUSH_MS);
  }

  private onAgent(e: AgentEvent): void {
    if (e.event === 'ready') {
      this.agentReady = true;
      this.probing = false; // a (re)started agent has no probe running
      // One status event says the agent is there, probing or not.
      if (!this.updateProbe()) this.emitStatus();
    }
    const metric: GuestMetric = { t: Date.now(), event: e.event, fields: { ...e.fields } };
    if (e.event === 'ready' || e.event === 'info') this.agentFacts = metric;
    this.metrics.push(metric);
    if (this.metrics.length > MAX_METRICS) this.metrics.shift();
    if (this.sinks.size === 0 || this.pendingMetrics.length >= MAX_METRICS_PER_FLUSH) return;
    this.pendingMetrics.push(metric);
    this.scheduleTelemetry();
  }

  private onTelemetry(e: TelemetryEvent): void {
    if (this.sinks.size === 0 || e.type === 'backfill') return;
    if (e.type === 'sample') {
      this.pendingSamples.push(...this.toApiSamples(e.records));
      if (this.pendingSamples.length > MAX_PENDING_SAMPLES) this.pendingSamples.splice(0, this.pendingSamples.length - MAX_PENDING_SAMPLES);
      this.pendingDevices.push(...this.toApiSamples(e.devices));
      if (this.pendingDevices.length > MAX_PENDING_SAMPLES) this.pendingDevices.splice(0, this.pendingDevices.length - MAX_PENDING_SAMPLES);
      this.pendingHistograms.push(...apiHistograms(this.toEpochMs(e.t), e.histograms));
      if (this.pendingHistograms.length > MAX_PENDING_SAMPLES) this.pendingHistograms.splice(0, this.pendingHistograms.length - MAX_PENDING_SAMPLES);
    } else {
      this.pendingMarkers.push(this.toApiMarker(e.marker));
    }
    this.scheduleTelemetry();
  }

  private scheduleTelemetry(): void {
    this.telemetryTimer ??= setTimeout(() => this.flushTelemetry(), TELEMETRY_FLUSH_MS);
  }

  private flushTelemetry(): void {
    if (this.telemetryTimer) clearTimeout(this.telemetryTimer);
    this.telemetryTimer = undefined;
    if (this.pendingSamples.length || this.pendingMarkers.length || this.pendingDevices.length) {
      const event: ApiEvent = { type: 'telemetry', vmId: this.id, samples: this.pendingSamples };
      if (this.pendingMarkers.length) event.markers = this.pendingMarkers;
      if (this.pendingDevices.length) event.devices = this.pendingDevices;
      if (this.pendingHistograms.length) event.histograms = this.pendingHistograms;
      this.pendingHistograms = [];
      this.pendingSamples = [];
      this.pendingMarkers = [];
      this.pendingDevices = [];
      this.send(event);
    }
    const metrics = this.pendingMetrics;
    this.pendingMetrics = [];
    for (const metric of metrics) this.send({ type: 'guest-metric', vmId: this.id, metric });
  }

  /** A chart marker: through the sampler when there is one (it keeps them), else our own list. */
  private mark(label: string): void {
    if (this.sampler?.running) this.sampler.markEvent(label);
    else this.addMarker(label);
  }

  private addMarker(label: string): void {
    const marker = { t: Date.now(), label };
    this.ownMarkers.push(marker);
    if (this.ownMarkers.length > 1000) this.ownMarkers.shift();
    if (this.sinks.size) {
      this.pendingMarkers.push(marker);
      this.scheduleTelemetry();
    }
  }

  private toApiSamples<R extends SampleRecord | DeviceRecord>(records: R[]): R[] {
    for (const r of records) r.t = this.toEpochMs(r.t);
    return records;
  }

  private toApiMarker(m: SamplerMarker): TelemetryMarker {
    return { t: this.toEpochMs(m.t), label: m.label };
  }

  /** A sampler time (ms since the VM started) as ms since the epoch. */
  private toEpochMs(t: number): number {
    return Math.round((this.epochBase + t) * 10) / 10;
  }

  private send(e: ApiEvent): void {
    for (const sink of this.sinks) {
      try { sink(e); } catch { /* one broken subscriber must not stop the others */ }
    }
  }

  private emitStatus(): void {
    try { this.onStatus(this.status()); } catch { /* a listener's problem, not the VM's */ }
  }

  /** Stops the VM (if it runs) and writes out the log: service shutdown. */
  async dispose(graceMs: number): Promise<void> {
    try {
      await this.stop(graceMs);
    } catch { /* already reported as its status */ }
    this.flushConsole();
    this.flushTelemetry();
    await this.log.flush();
    this.sinks.clear();
  }

  /** The VM was deleted: forget its logs too. */
  removeLogs(): void {
    this.log.remove();
    this.scrollback.clear();
  }
}

export function toResolvedDto(r: Pick<ResolvedMachine, 'resolution'>, commandLine: string): ResolvedDto {
  const res = r.resolution;
  return {
    machine: res.machine,
    features: res.features.map((f) => ({ name: f.name, value: f.value, source: f.source })),
    kvmFeatures: res.kvmFeatures,
    kvmHints: res.kvmHints,
    disableExits: disableExitNames(res.disableExits),
    notes: [...res.notes],
    warnings: [...res.warnings],
    commandLine,
  };
}

/** A sample's histograms as the API sends them: the vCPUs with counts in the interval only. */
function apiHistograms(t: number, hists: readonly VcpuHistograms[] | undefined): TelemetryHistograms[] {
  const out: TelemetryHistograms[] = [];
  for (const h of hists ?? []) {
    const counts: TelemetryHistograms['counts'] = {};
    let any = false;
    for (const [name, c] of Object.entries(h)) {
      if (!Array.isArray(c) || !c.some((n) => n > 0)) continue;
      counts[name] = c;
      any = true;
    }
    if (!any) continue;
    for (const name of KVM_HISTOGRAM_SUMS) {
      const v = h[name];
      if (typeof v === 'number') counts[name] = v;
    }
    out.push({ t, vcpu: h.vcpu, counts });
  }
  return out;
}

// The app's one typed API, transport-neutral: the Electron IPC bridge and host mode's WebSocket
// both carry exactly these calls and events. Types only (plus the method list): the renderer
// imports this file and nothing else from electron/.
//
// Every call's input is untrusted; the service validates it and rejects with an ApiError whose
// `code` says what kind of problem it is and whose message is one line a user can read.
//
// The few types shared with the VMM are imported as types only: they carry no runtime code, so
// the renderer still loads nothing from electron/.
import type { VmConfig } from '../vmm/config/vm-config.ts';
import type { ExperimentResultRow, ExperimentSpec } from '../vmm/experiments/types.ts';

/** A VM configuration as stored and edited: the VMM's one schema (electron/vmm/config/vm-config.ts). */
export type VmConfigDto = VmConfig;

export type VmRunState = 'stopped' | 'starting' | 'running' | 'paused' | 'stopping';

export interface VmStatus {
  id: string;
  state: VmRunState;
  /** Why it last stopped (guest power-off, triple fault, stopped by the user, ...). */
  lastExit?: { kind: string; message: string; at: number };
  startedAt?: number;
  /** Resolved knobs of the running instance (what the guest actually got). */
  resolved?: ResolvedDto;
  /** Console bytes dropped because the host could not keep up (flooding guest). */
  droppedConsoleBytes?: number;
}

export interface ResolvedDto {
  machine: string;
  features: { name: string; value: boolean; source: 'machine-type' | 'explicit' | 'cpu-pm' }[];
  kvmFeatures: number;
  kvmHints: number;
  disableExits: string[];
  notes: string[];
  warnings: string[];
  commandLine: string;
}

export interface VmRecord {
  id: string;
  config: VmConfigDto;
  createdAt: number;
  updatedAt: number;
  status: VmStatus;
}

export interface OptionAvailability {
  /** e.g. 'machine:unhalt-1.1', 'feature:kvm-pv-unhalt', 'cpu-pm', 'mem-lock', 'halt-poll-ns', 'pin', 'guest:linux'. */
  option: string;
  available: boolean;
  /** Why not (or a warning worth showing when available). */
  reason?: string;
}

export interface HostInfo {
  kind: 'pvm' | 'hardware';
  cpuModel: string;
  hostCpus: number[];
  memoryMiB: number;
  maxVcpus: number;
  haltPollParams: Record<string, number>;
  machineTypes: { name: string; summary: string; changes: string; defaults: Record<string, boolean>; newest: boolean }[];
  features: { name: string; summary: string; hostOffers: boolean; usesHypercalls: boolean }[];
  options: OptionAvailability[];
  guests: { kind: 'probe' | 'linux'; built: boolean; label: string; note?: string }[];
  /** The guest a new VM gets by default on this host, and why. */
  defaultGuest: { kind: 'probe' | 'linux'; reason: string };
  telemetry: { binaryStats: boolean; note?: string };
  doctor: { name: string; ok: boolean; detail: string; fix?: string }[];
  /** The VM library: where it is, how full, and what it had to repair (shown until dismissed). */
  library: LibraryInfo;
}

export interface LibraryInfo {
  path: string;
  vms: number;
  maxVms: number;
  notices: LibraryNoticeDto[];
}

/** A repair the library made: a damaged file moved aside, records kept out, a migration. */
export interface LibraryNoticeDto {
  severity: 'error' | 'info';
  message: string;
  /** The file that holds what was set aside (errors). */
  movedTo?: string;
  at: number;
}

/** A folder that kernels, initrds and disk images may come from, and why it is allowed. */
export interface AllowedFolder {
  path: string;
  source: 'library' | 'guests' | 'home' | 'settings';
}

/** One telemetry sample of one vCPU (cumulative counters under KVM names, rates with _per_s). */
export interface TelemetrySample {
  /** ms since the epoch (one time axis across restarts; the VM's status.startedAt is its run's start). */
  t: number;
  vcpu: number;
  [field: string]: number | null;
}

export interface TelemetryMarker {
  /** ms since the epoch, like TelemetrySample.t. */
  t: number;
  label: string;
}

/** Guest-reported measurements (ttyS1 `@u1` events), e.g. ipi p50_ns. */
export interface GuestMetric {
  /** ms since the epoch. */
  t: number;
  event: string;
  fields: Record<string, number>;
}

/** Experiments: the runner's own types (electron/vmm/experiments/types.ts). */
export type { ExperimentSpec, ExperimentResultRow };

export interface ExperimentSummary {
  id: string;
  createdAt: number;
  spec: ExperimentSpec;
  state: 'running' | 'done' | 'failed';
  progress: { done: number; total: number; current?: string };
  error?: string;
}

export interface ExperimentDetail extends ExperimentSummary {
  rows: ExperimentResultRow[];
  environment: Record<string, unknown>;
}

export type ApiEvent =
  | { type: 'status'; vmId: string; status: VmStatus }
  /** ttyS0 bytes as a latin1 "binary string" (one char per byte); sendConsole takes the same. */
  | { type: 'console'; vmId: string; data: string }
  | { type: 'telemetry'; vmId: string; samples: TelemetrySample[]; markers?: TelemetryMarker[] }
  | { type: 'guest-metric'; vmId: string; metric: GuestMetric }
  | { type: 'library'; vms: VmRecord[] }
  | { type: 'experiment'; experiment: ExperimentSummary };

export interface Subscription {
  vmId: string;
  /** What the subscriber already has, replayed first (console scrollback, telemetry history). */
  backfill: { console: string; samples: TelemetrySample[]; markers: TelemetryMarker[]; metrics: GuestMetric[] };
}

/** The API. Every method is async and rejects with ApiError. */
export interface UnhaltApi {
  host(): Promise<HostInfo>;

  listVms(): Promise<VmRecord[]>;
  getVm(id: string): Promise<VmRecord>;
  createVm(config: unknown): Promise<VmRecord>;
  updateVm(id: string, config: unknown): Promise<VmRecord>;
  cloneVm(id: string, name?: string): Promise<VmRecord>;
  deleteVm(id: string): Promise<void>;
  /** The `unhalt run` command line equivalent to a (possibly unsaved) configuration, and its resolution. */
  describeConfig(config: unknown): Promise<ResolvedDto>;

  startVm(id: string): Promise<VmStatus>;
  /** ACPI power button, then a forced stop after `graceMs` (default 3000). */
  stopVm(id: string, graceMs?: number): Promise<VmStatus>;
  forceStopVm(id: string): Promise<VmStatus>;
  pauseVm(id: string): Promise<VmStatus>;
  resumeVm(id: string): Promise<VmStatus>;
  status(id: string): Promise<VmStatus>;
  /** Live knobs (marked on the charts). */
  setHaltPollNs(id: string, ns: number): Promise<VmStatus>;
  setPin(id: string, hostCpus: number[]): Promise<VmStatus>;

  sendConsole(id: string, data: string): Promise<void>;
  /** Starts streaming a VM's console, telemetry and guest metrics as events; returns the backfill. */
  subscribe(id: string): Promise<Subscription>;
  unsubscribe(id: string): Promise<void>;

  startExperiment(spec: ExperimentSpec): Promise<ExperimentSummary>;
  listExperiments(): Promise<ExperimentSummary[]>;
  getExperiment(id: string): Promise<ExperimentDetail>;

  /** The user has seen the library's notices (HostInfo.library.notices). */
  dismissLibraryNotices(): Promise<void>;
  /** Where boot files may come from; only 'settings' entries can be added or removed. */
  listAllowedFolders(): Promise<AllowedFolder[]>;
  addAllowedFolder(path: string): Promise<AllowedFolder[]>;
  removeAllowedFolder(path: string): Promise<AllowedFolder[]>;
}

export const API_METHODS = [
  'host', 'listVms', 'getVm', 'createVm', 'updateVm', 'cloneVm', 'deleteVm', 'describeConfig',
  'startVm', 'stopVm', 'forceStopVm', 'pauseVm', 'resumeVm', 'status', 'setHaltPollNs', 'setPin',
  'sendConsole', 'subscribe', 'unsubscribe', 'startExperiment', 'listExperiments', 'getExperiment',
  'dismissLibraryNotices', 'listAllowedFolders', 'addAllowedFolder', 'removeAllowedFolder',
] as const satisfies readonly (keyof UnhaltApi)[];

export type ApiMethod = (typeof API_METHODS)[number];

export type ApiErrorCode = 'invalid' | 'not-found' | 'conflict' | 'host' | 'internal' | 'unauthorized' | 'too-large';

/** How errors cross a transport: plain data. */
export interface ApiErrorDto {
  code: ApiErrorCode;
  message: string;
}

/** Transport framing (WebSocket and IPC alike). */
export type ClientMessage = { id: number; method: ApiMethod; params: unknown[] };
export type ServerMessage =
  | { id: number; result: unknown }
  | { id: number; error: ApiErrorDto }
  | { event: ApiEvent };

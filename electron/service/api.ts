// The app's one typed API, transport-neutral: the Electron IPC bridge and host mode's WebSocket
// both carry exactly these calls and events. Types and plain data only (the method table, the
// error codes), no Node: the renderer imports this file (and, besides it, only the pure rule
// modules under electron/vmm/config/, see docs/architecture.md).
//
// Every call's input is untrusted; the service validates it and rejects with an ApiError whose
// `code` says what kind of problem it is and whose message is one line a user can read.
//
// The few types shared with the VMM are imported as types only: they carry no runtime code, so
// the renderer still loads nothing from electron/.
import type { VmConfig } from '../vmm/config/vm-config.ts';
import type { Comparison, ExperimentResultRow, ExperimentSpec, RunRecord } from '../experiments/types.ts';
import type { UserBenchmark } from '../experiments/user-bench.ts';
import type { ExportedText, ExportFormat, ExportHost } from '../vmm/export/types.ts';
import type { Advice } from '../experiments/advisor.ts';
import type { TuneSpec } from '../experiments/tune-limits.ts';
import type { KvmAccess } from '../vmm/kvm-cause.ts';
import type { ImportedFrom } from './library-schema.ts';

/** A VM configuration as stored and edited: the VMM's one schema (electron/vmm/config/vm-config.ts). */
export type VmConfigDto = VmConfig;

export type VmRunState = 'stopped' | 'starting' | 'running' | 'paused' | 'stopping';

export interface VmStatus {
  id: string;
  state: VmRunState;
  /**
   * Why it last stopped (guest power-off, triple fault, stopped by the user, ...); `value`: what
   * the guest wrote to its isa-debug-exit (kind 'debug-exit'; the message gives its exit status).
   */
  lastEnd?: { kind: string; message: string; at: number; value?: number };
  startedAt?: number;
  /** Resolved knobs of the running instance (what the guest actually got). */
  resolved?: ResolvedDto;
  /** Console bytes dropped because the host could not keep up (flooding guest). */
  droppedConsoleBytes?: number;
  /**
   * Live knob changes of this run (setHaltPollNs, setPin): in effect now, not saved in the VM's
   * configuration, gone at the next start. Absent until one is made.
   */
  live?: LiveKnobs;
  /**
   * The guest's agent on ttyS1 this run: 'ready' once it said so; 'probing' while its live
   * context-switch probe runs (started while a client watches the VM, stopped when none does).
   * Absent: no agent has spoken (a guest without one, or one still booting).
   */
  agent?: 'ready' | 'probing';
}

export interface LiveKnobs {
  haltPollNs?: number;
  /** The host CPUs as given (vCPU i on pin[i % length]); [] = unpinned. */
  pin?: number[];
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
  /**
   * Where KVM cannot be opened (describeConfig only): what this host lacks and what waits for a
   * start, in one line (the wizard's summary shows it as a warning). Nothing else was judged
   * against a host then: features are as asked, disableExits empty.
   */
  judgedAtStart?: string;
}

/** A VM's boot files as a form holds them (checkBootFiles); memoryMiB for the "does it fit" rule. */
export interface BootFilesToCheck {
  kernel?: string;
  initrd?: string;
  memoryMiB?: number;
  /** Disk images, as VmConfig.disks holds them (the wizard asks for one at a time). */
  disks?: { path: string; readonly?: boolean }[];
}

/** An export to where fleets run (docs/export.md): the text, a file name to save it as, its media type. */
export type ExportedConfigDto = ExportedText;
export type ExportFormatDto = ExportFormat;
export type ExportHostDto = ExportHost;
/** The kinds of host an export can be for, and their names (plain data from the export's own types). */
export { EXPORT_HOSTS, EXPORT_HOST_LABELS } from '../vmm/export/types.ts';

export interface VmRecord {
  id: string;
  config: VmConfigDto;
  createdAt: number;
  updatedAt: number;
  /** When it was last started (ms since the epoch); absent if never. Kept in the library. */
  lastStartedAt?: number;
  /** The last start that failed, when it is newer than the last start: when and why. Kept in the library. */
  lastStartFailure?: StartFailure;
  /** Made by an import: the user's image, the folder of what the import made, the login and SSH port. */
  imported?: ImportedFromDto;
  status: VmStatus;
}

export type ImportedFromDto = ImportedFrom;

export interface StartFailure {
  /** ms since the epoch */
  at: number;
  reason: string;
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
  /** Whether KVM can be opened here; if not, the cause found and its fix (the same verdict as `unhalt doctor`). */
  kvm: KvmAccess;
  cpuModel: string;
  /** From the OS (the CPUs this process may use), also where KVM cannot be opened: never empty. */
  hostCpus: number[];
  memoryMiB: number;
  /** KVM_CAP_MAX_VCPUS; 0 where KVM cannot be asked (kvmProblem): rules.ts vcpuLimit says what applies then. */
  maxVcpus: number;
  /**
   * Why KVM cannot be opened here (the cause and its fix), absent where it can. VMs can still be
   * created, edited, cloned and exported; a start is refused with these words, and what only KVM
   * tells (its vCPU limit, features, cpu-pm, halt polling) is judged at that start.
   */
  kvmProblem?: string;
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
  /** What allowing it exposes, for a broad folder (/home, /tmp, /mnt...). */
  note?: string;
  /** Why an added folder counts for nothing now (it changed identity since it was added); remove and add it again. */
  refused?: string;
}

/** One telemetry sample of one vCPU (cumulative counters under KVM names, rates with _per_s). */
export interface TelemetrySample {
  /** ms since the epoch (one time axis across restarts; the VM's status.startedAt is its run's start). */
  t: number;
  vcpu: number;
  [field: string]: number | null;
}

/**
 * One telemetry sample of one virtio device (rng, net, blk0...), at the vCPU samples' instants:
 * notifications, mmio_notifications, interrupts, requests, bytes (net rx_/tx_, blk reads/writes
 * and read_/write_bytes) with _per_s rates; drops, errors, resets as totals (telemetry/devices.ts).
 */
export interface TelemetryDeviceSample {
  /** ms since the epoch, like TelemetrySample.t. */
  t: number;
  device: string;
  [field: string]: number | string | null;
}

/**
 * One vCPU's KVM halt histograms over a span (a live sample's interval, or a one-second bin of a
 * backfill): each histogram's count per log2 bucket (bucket i: [2^(i-1), 2^i) ns; 0: zero; the
 * last open-ended), under its KVM name (halt_wait_hist, halt_poll_success_hist, halt_poll_fail_hist),
 * and KVM's time sums of its polls over the same span in ns (halt_poll_success_ns,
 * halt_poll_fail_ns) where the span has them. Spans with no counts are not sent.
 */
export interface TelemetryHistograms {
  /** ms since the epoch, like TelemetrySample.t (a bin's start). */
  t: number;
  vcpu: number;
  counts: Partial<Record<string, number[] | number>>;
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

/** Experiments: the runner's own types (electron/experiments/types.ts) and limits (plain data). */
export type { Comparison, ExperimentSpec, ExperimentResultRow };
/** One run of an experiment as recorded (electron/experiments/types.ts). */
export type RunRecordDto = RunRecord;
export { CONFIG_NAME, FEW_RUNS, MAX_CONFIGS, MAX_CONTENTION, MAX_RUNS } from '../experiments/limits.ts';
/** The tuning advisor's goals and budget rule (plain data and one pure function). */
export { GOAL_KINDS, GOAL_LABELS, MAX_BUDGET_S, MIN_BUDGET_S, parseBudget, type GoalKind } from '../experiments/tune-limits.ts';
export type AdviceDto = Advice;
export type TuneSpecDto = TuneSpec;

/** A host command waiting for the code its confirmation needs (requestHostCommand). */
export interface HostCommandRequest {
  requestId: string;
  argv: string[];
}

/** A saved user benchmark: its name and what it runs and reads. */
export interface SavedWorkloadDto {
  name: string;
  bench: UserBenchmark;
}

/** What the VM page's advisor asks for (startTune): the rest comes from the VM. */
export interface TuneRequest {
  workload: string;
  workloadArgs?: string;
  goal: string;
  latencyBound?: number;
  budgetS: number;
}

export interface ExperimentSummary {
  id: string;
  createdAt: number;
  spec: ExperimentSpec;
  /** cancelled: by the user, or the app stopped while it ran (`error` says which). */
  state: 'running' | 'done' | 'failed' | 'cancelled';
  progress: { done: number; total: number; current?: string };
  error?: string;
  /** A tuning advisor's run (startTune): progress is seconds of its budget. */
  kind?: 'tune';
  tune?: TuneSpecDto;
}

export interface ExperimentDetail extends ExperimentSummary {
  rows: ExperimentResultRow[];
  /** Each row against the first of its VMM, with a verdict (electron/experiments/stats.ts). */
  comparisons?: Comparison[];
  /** What to know reading the rows (a QEMU row that ran differently, too few runs...). */
  notes?: string[];
  /** Every failed run, one line each. */
  failures?: { config: string; runner: string; run: number; error: string }[];
  /**
   * Every run as it was recorded (the runner's RunRecord: value, KVM counters, halt histograms);
   * a record saved by an older version may lack fields.
   */
  raw?: RunRecordDto[];
  environment: Record<string, unknown>;
  /** A tune's advice: the recommendation, why, the confidence, the curve. */
  advice?: AdviceDto;
  /** The recommended configuration as a config string (machine type pinned). */
  recommendedConfig?: string;
  /** Where a tune's recommendation was applied (applyTune). */
  applied?: { vmId: string; vmName: string; at: number; config: string };
}

export type ApiEvent =
  | { type: 'status'; vmId: string; status: VmStatus }
  /** ttyS0 bytes as a latin1 "binary string" (one char per byte); sendConsole takes the same. */
  | { type: 'console'; vmId: string; data: string }
  | { type: 'telemetry'; vmId: string; samples: TelemetrySample[]; markers?: TelemetryMarker[]; devices?: TelemetryDeviceSample[]; histograms?: TelemetryHistograms[] }
  | { type: 'guest-metric'; vmId: string; metric: GuestMetric }
  | { type: 'library'; vms: VmRecord[] }
  | { type: 'experiment'; experiment: ExperimentSummary }
  | { type: 'experiment-deleted'; id: string }
  | { type: 'disk-conversion'; conversion: DiskConversionDto }
  | { type: 'import'; progress: ImportProgressDto };

/** A step of an import in progress (importImage): what it does now, and qemu-img's percent while it converts. */
export interface ImportProgressDto {
  image: string;
  step: string;
  percent?: number;
}

/** What importImage takes: the image (in an allowed folder) and, optionally, the VM's name, size and the guest's login. */
export interface ImportRequestDto {
  image: string;
  name?: string;
  memoryMiB?: number;
  cpus?: number;
  /** The guest's user (default: yours, or "unhalt" for root). */
  user?: string;
  /** A public key file; without it and a password, the first ~/.ssh/*.pub. */
  sshKeyFile?: string;
  /** Hashed by the service (SHA-512 crypt); only the hash goes into the seed. */
  password?: string;
}

/** A folder as the import's file browser shows it (listFolder); `path` '' lists the allowed folders. */
export interface FolderListing {
  path: string;
  /** The folder above, when it may be listed too. */
  parent?: string;
  entries: { name: string; path: string; kind: 'dir' | 'file'; sizeBytes?: number; image?: 'qcow2' | 'raw' }[];
  /** More entries than one listing returns. */
  truncated?: boolean;
}

/** A qcow2 -> raw conversion the service runs (convertDiskImage), as its events report it. */
export interface DiskConversionDto {
  id: string;
  source: string;
  /** The raw image it makes: the source's path with `.qcow2` replaced by `.raw`. */
  target: string;
  state: 'running' | 'done' | 'failed';
  /** 0-100, as qemu-img -p reports it. */
  percent: number;
  message?: string;
}

export interface Subscription {
  vmId: string;
  /** What the subscriber already has, replayed first (console scrollback, telemetry history). */
  backfill: {
    console: string; samples: TelemetrySample[]; markers: TelemetryMarker[]; metrics: GuestMetric[]; devices?: TelemetryDeviceSample[];
    /** KVM's halt histograms of the history kept, one bin per vCPU per second. */
    histograms?: TelemetryHistograms[];
  };
}

/** The API. Every method is async and rejects with ApiError. */
export interface UnhaltApi {
  host(): Promise<HostInfo>;

  listVms(): Promise<VmRecord[]>;
  getVm(id: string): Promise<VmRecord>;
  createVm(config: unknown): Promise<VmRecord>;
  /** Replaces a stopped VM's whole configuration (a running VM's are refused: see renameVm and the live knobs). */
  updateVm(id: string, config: unknown): Promise<VmRecord>;
  /** Renames a VM, running or not (the name is the library's, the guest never sees it). */
  renameVm(id: string, name: string): Promise<VmRecord>;
  /** Stores this run's live knob changes (VmStatus.live: halt polling, pinning) in the VM's configuration, running or not. */
  keepLiveKnobs(id: string): Promise<VmRecord>;
  cloneVm(id: string, name?: string): Promise<VmRecord>;
  /** Deletes a stopped VM; `removeImported` also removes what its import made (never the user's image). */
  deleteVm(id: string, removeImported?: boolean): Promise<void>;
  /** A folder's subfolders and files, if allowed (no path: the allowed folders): the import's file browser. */
  listFolder(path?: string): Promise<FolderListing>;
  /** Imports a cloud image as a new VM (image-import.ts); 'import' events report its steps. */
  importImage(request: ImportRequestDto): Promise<VmRecord>;
  /** The `unhalt run` command line equivalent to a (possibly unsaved) configuration, and its resolution. */
  describeConfig(config: unknown): Promise<ResolvedDto>;
  /**
   * The checks createVm makes of a kernel and initrd, alone (a form asks at the field): rejects
   * with the very error createVm would give for these files, resolves when they would pass.
   */
  checkBootFiles(files: BootFilesToCheck): Promise<void>;
  /**
   * Creates an empty raw disk image of `sizeMiB` MiB (sparse) at `path`, which must not exist and
   * must lie in an allowed folder; the wizard's "create an image" for a new disk.
   */
  createDiskImage(path: string, sizeMiB: number): Promise<void>;
  /**
   * Starts converting a qcow2 image (in an allowed folder) to a raw image beside it (`.raw`, which
   * must not exist); resolves at once, then 'disk-conversion' events report progress and the end.
   */
  convertDiskImage(source: string): Promise<DiskConversionDto>;
  /**
   * A (possibly unsaved or recommended) configuration as a QEMU command line, a libvirt domain
   * or a KubeVirt VirtualMachine; format is 'qemu' | 'libvirt' | 'kubevirt'. forHost is the kind
   * of host it is for, 'pvm' | 'hardware' (as `unhalt export --for-host`); default: this host's.
   */
  exportConfig(config: unknown, format: ExportFormatDto, forHost?: ExportHostDto): Promise<ExportedConfigDto>;

  startVm(id: string): Promise<VmStatus>;
  /** ACPI power button, then a forced stop after `graceMs` (default 3000). */
  stopVm(id: string, graceMs?: number): Promise<VmStatus>;
  forceStopVm(id: string): Promise<VmStatus>;
  /**
   * Hard reset of a running or paused VM: its vCPUs are stopped and the same configuration boots
   * afresh, as on a guest's own reset request (which ends the run); console and charts continue.
   */
  resetVm(id: string): Promise<VmStatus>;
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
  /**
   * Asks to run a host command (an argument vector) in experiments. Nothing is stored yet: the
   * service shows a one-time code where only the person at this machine sees it (the terminal of
   * `unhalt serve`, the app's native dialog), so a holder of the API's token alone cannot confirm
   * it (host-command-requests.ts). The UI shows the command in full and asks for that code.
   */
  requestHostCommand(argv: string[]): Promise<HostCommandRequest>;
  /**
   * With the code the person typed: stores the request's command as confirmed; an experiment
   * names it by the returned id (bench.hostCmdId). A wrong code is refused (three end the
   * request); startExperiment refuses a host command given any other way (experiment-api.ts).
   */
  confirmHostCommand(requestId: string, code: string): Promise<{ id: string; argv: string[] }>;
  /** The user's own benchmarks saved by name (`--save-workload`, or the compare view), for the workload fields. */
  listSavedWorkloads(): Promise<SavedWorkloadDto[]>;
  /** Saves a benchmark ({ hostCmdId or guestCmd, metric, ... }) under a name the advisor and experiments can use. */
  saveWorkload(name: string, bench: Omit<UserBenchmark, 'hostCmd'>): Promise<SavedWorkloadDto>;
  listExperiments(): Promise<ExperimentSummary[]>;
  getExperiment(id: string): Promise<ExperimentDetail>;
  /** Stops the running experiment promptly (its VMs and QEMU end); resolves once it has stopped. */
  cancelExperiment(id: string): Promise<ExperimentSummary>;
  /** Removes a finished experiment from the list and from disk. */
  deleteExperiment(id: string): Promise<void>;
  /**
   * The tuning advisor on a VM's configuration: searches the knobs this host can run within the
   * budget and records the result as an experiment (kind 'tune').
   */
  startTune(vmId: string, request: TuneRequest): Promise<ExperimentSummary>;
  /**
   * Stores a finished tune's recommendation in the VM's saved configuration (a stopped VM only:
   * a running VM's settings are fixed at boot, so it is refused and nothing changes).
   */
  applyTune(experimentId: string, vmId: string): Promise<VmRecord>;

  /** The user has seen the library's notices (HostInfo.library.notices). */
  dismissLibraryNotices(): Promise<void>;
  /** Where boot files may come from; only 'settings' entries can be added or removed. */
  listAllowedFolders(): Promise<AllowedFolder[]>;
  addAllowedFolder(path: string): Promise<AllowedFolder[]>;
  removeAllowedFolder(path: string): Promise<AllowedFolder[]>;
}

/**
 * The method table: every API method once, with how it is served and how many parameters it
 * takes. Everything else is derived from it or checked against it at compile time: the
 * service's forwarders (service.ts), the dispatch that refuses what is not listed
 * (dispatch.ts), the renderer's client (renderer/src/api/client.ts) and the preload's literal
 * copy (electron/preload.ts, which cannot import it). The `satisfies` clause keeps it equal to
 * UnhaltApi: a method missing from either side, an extra one or a wrong count does not compile.
 *
 * - 'call': answered by the service core alone, the same for every client;
 * - 'subscription': also changes which events this client's session receives, so the session
 *   serves it itself.
 */
export const API_METHODS = {
  host: { kind: 'call', params: 0 },
  listVms: { kind: 'call', params: 0 },
  getVm: { kind: 'call', params: 1 },
  createVm: { kind: 'call', params: 1 },
  updateVm: { kind: 'call', params: 2 },
  renameVm: { kind: 'call', params: 2 },
  keepLiveKnobs: { kind: 'call', params: 1 },
  cloneVm: { kind: 'call', params: 2 },
  deleteVm: { kind: 'call', params: 2 },
  listFolder: { kind: 'call', params: 1 },
  importImage: { kind: 'call', params: 1 },
  describeConfig: { kind: 'call', params: 1 },
  checkBootFiles: { kind: 'call', params: 1 },
  exportConfig: { kind: 'call', params: 3 },
  startVm: { kind: 'call', params: 1 },
  stopVm: { kind: 'call', params: 2 },
  forceStopVm: { kind: 'call', params: 1 },
  resetVm: { kind: 'call', params: 1 },
  pauseVm: { kind: 'call', params: 1 },
  resumeVm: { kind: 'call', params: 1 },
  status: { kind: 'call', params: 1 },
  setHaltPollNs: { kind: 'call', params: 2 },
  setPin: { kind: 'call', params: 2 },
  sendConsole: { kind: 'call', params: 2 },
  subscribe: { kind: 'subscription', params: 1 },
  unsubscribe: { kind: 'subscription', params: 1 },
  startExperiment: { kind: 'call', params: 1 },
  requestHostCommand: { kind: 'call', params: 1 },
  confirmHostCommand: { kind: 'call', params: 2 },
  listSavedWorkloads: { kind: 'call', params: 0 },
  saveWorkload: { kind: 'call', params: 2 },
  listExperiments: { kind: 'call', params: 0 },
  getExperiment: { kind: 'call', params: 1 },
  cancelExperiment: { kind: 'call', params: 1 },
  deleteExperiment: { kind: 'call', params: 1 },
  startTune: { kind: 'call', params: 2 },
  applyTune: { kind: 'call', params: 2 },
  dismissLibraryNotices: { kind: 'call', params: 0 },
  listAllowedFolders: { kind: 'call', params: 0 },
  addAllowedFolder: { kind: 'call', params: 1 },
  removeAllowedFolder: { kind: 'call', params: 1 },
  createDiskImage: { kind: 'call', params: 2 },
  convertDiskImage: { kind: 'call', params: 1 },
} as const satisfies { [M in keyof UnhaltApi]: { kind: ApiMethodKind; params: ParamCount<UnhaltApi[M]> } };

export type ApiMethodKind = 'call' | 'subscription';

/** The most parameters a method takes, optional ones included. */
type ParamCount<F> = F extends (...params: infer P) => unknown ? Required<P>['length'] : never;

export type ApiMethod = keyof typeof API_METHODS;

/** The table's names, in its order. */
export const API_METHOD_NAMES: readonly ApiMethod[] = Object.keys(API_METHODS) as ApiMethod[];

type MethodsOfKind<K extends ApiMethodKind> = { [M in ApiMethod]: (typeof API_METHODS)[M]['kind'] extends K ? M : never }[ApiMethod];
export type CallMethod = MethodsOfKind<'call'>;
export type SubscriptionMethod = MethodsOfKind<'subscription'>;

/** What a method resolves with. */
export type ApiResult<M extends ApiMethod> = Awaited<ReturnType<UnhaltApi[M]>>;

/**
 * What serves the calls on the service side (ServiceCore implements it): each 'call' of the
 * table under its own name, every parameter untrusted input (`unknown`), answered at once or
 * asynchronously.
 */
export type ApiCallHandlers = {
  [M in CallMethod]: (...params: Untrusted<Parameters<UnhaltApi[M]>>) => ApiResult<M> | Promise<ApiResult<M>>;
};

/** The same parameter list, every entry `unknown` (optional ones stay optional). */
type Untrusted<P extends readonly unknown[]> = { [I in keyof P]: unknown };

/**
 * A literal copy of the method names, for code that cannot import the table (the sandboxed
 * preload): it type-checks only when it names every method of the table and nothing else.
 */
export type ApiMethodList<L extends readonly ApiMethod[]> = [Exclude<ApiMethod, L[number]>] extends [never]
  ? L
  : { missing: Exclude<ApiMethod, L[number]> };

/** Every code an ApiError can carry (the renderer checks what arrives against it). */
export const API_ERROR_CODES = ['invalid', 'not-found', 'conflict', 'host', 'internal', 'unauthorized', 'too-large'] as const;

export type ApiErrorCode = (typeof API_ERROR_CODES)[number];

/**
 * How errors cross every transport (WebSocket and IPC alike): plain data, never a string to
 * parse. Clients show `message` and branch on `code`.
 */
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

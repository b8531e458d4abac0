// A/B experiments: validates a spec, runs it through the experiment runner (loaded on demand, so
// a build without it still serves everything else), reports progress as events, and keeps every
// result as UNHALT_HOME/experiments/<id>.json. One experiment runs at a time: two at once on the
// same host CPUs would measure each other.
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { readdirSync, rmSync } from 'node:fs';
import type { AdviceDto, Comparison, ExperimentDetail, ExperimentSpec, ExperimentSummary, TuneSpecDto as TuneSpec } from './api.ts';
import { ExperimentError, totalRuns, validateSpec } from '../experiments/spec.ts';
import { betterOf, compareRows } from '../experiments/stats.ts';
import { writeFileAtomic } from './atomic-file.ts';
import { ApiError } from './errors.ts';
import { textArg } from './validate.ts';
import { makeDirs } from './make-dir.ts';
import { entryUrl } from '../entry-url.ts';
import type { HostCapabilities } from '../vmm/machine/host-caps.ts';
import { readHomeFile } from './home-file.ts';
import { pidAlive } from '../vmm/process-alive.ts';

/** An experiment's record with every run's raw figures: a few MiB at most. */
const MAX_RECORD_BYTES = 64 * 1024 * 1024;

/** Ids of saved experiments: ours ("exp-…") and `unhalt bench`'s (an ISO time and a uuid part). */
export const EXPERIMENT_ID = /^[A-Za-z0-9][A-Za-z0-9_-]{0,79}$/;
const PROGRESS_EVENT_MS = 250;
const MAX_LISTED = 200;

type Progress = ExperimentSummary['progress'];

/** What the service needs of electron/experiments/runner.ts (also shared with `unhalt bench`). */
interface RunnerModule {
  runExperiment(spec: ExperimentSpec, onProgress: (p: Progress) => void, signal?: AbortSignal): Promise<RunnerResult>;
  /** Checks a spec, then against the host (from `host`), before anything runs (throws with a readable message). */
  prepareExperiment?(spec: ExperimentSpec, host?: () => HostCapabilities): unknown;
}

interface RunnerResult {
  rows: ExperimentDetail['rows'];
  environment: Record<string, unknown>;
  comparisons?: Comparison[];
  raw?: unknown[];
  notes?: string[];
  /** Which runs gave no value and why (runner.ts failuresOf), and ok / partial / failed. */
  failures?: unknown[];
  status?: string;
}

/** The runner (electron/experiments/runner.ts), wherever this build keeps it (entry-url.ts). */
const RUNNER_URL = entryUrl(new URL('../experiments/runner.ts', import.meta.url));
/** The tuning advisor (electron/experiments/tune.ts), loaded like the runner. */
const TUNE_URL = entryUrl(new URL('../experiments/tune.ts', import.meta.url));

/** What the service needs of electron/experiments/tune.ts. */
interface TuneModule {
  /** The one check of a tune request, then against the host (from `host`) (throws with a readable message). */
  prepareTune(spec: unknown, host?: () => HostCapabilities): TuneSpec;
  runTune(spec: TuneSpec, onProgress: (p: Progress) => void, signal?: AbortSignal): Promise<RunnerResult & { spec: ExperimentSpec; advice: AdviceDto; tune: TuneSpec; recommendedConfig?: string }>;
}

/** The spec as the API takes it: the experiments layer's one check (spec.ts), as an ApiError. */
export function validateExperimentSpec(raw: unknown): ExperimentSpec {
  try {
    return validateSpec(raw);
  } catch (e) {
    if (e instanceof ExperimentError) throw new ApiError('invalid', e.message);
    throw e;
  }
}

/** A check before anything runs refused: the host's refusal as it is (no KVM), anything else as the request's fault. */
function prepareRefusal(e: unknown): ApiError {
  return e instanceof ApiError ? e : new ApiError('invalid', (e as Error).message);
}

/** What is stored: the detail, plus the runner's raw runs (CSV/JSON export). */
type StoredExperiment = ExperimentDetail & { status?: string };

interface Running {
  detail: StoredExperiment;
  abort: AbortController;
  done: Promise<void>;
}

export class Experiments {
  readonly dir: string;
  private running?: Running;
  private readonly onUpdate: (s: ExperimentSummary) => void;
  private readonly loadRunner: () => Promise<RunnerModule>;

  private readonly onDelete: (id: string) => void;

  private readonly loadTune: () => Promise<TuneModule>;

  constructor(dir: string, onUpdate: (s: ExperimentSummary) => void, loadRunner?: () => Promise<RunnerModule>, onDelete: (id: string) => void = () => {},
    loadTune?: () => Promise<TuneModule>) {
    this.dir = dir;
    this.onUpdate = onUpdate;
    this.onDelete = onDelete;
    this.loadRunner = loadRunner ?? (() => import(RUNNER_URL.href) as Promise<RunnerModule>);
    this.loadTune = loadTune ?? (() => import(TUNE_URL.href) as Promise<TuneModule>);
  }

  /**
   * `host` gives this host's KVM or throws the ApiError a start gets where there is none (the
   * service's probe: the notice's sentence); asked only once the request itself is good.
   */
  async start(raw: unknown, host?: () => HostCapabilities): Promise<ExperimentSummary> {
    const spec = validateExperimentSpec(raw);
    this.assertIdle();
    let runner: RunnerModule;
    try {
      runner = await this.loadRunner();
      if (typeof runner.runExperiment !== 'function') throw new Error('it exports no runExperiment');
    } catch (e) {
      throw new ApiError('host', `experiments are not available in this build (the runner could not be loaded: ${(e as Error).message})`);
    }
    this.assertIdle(); // again: another start may have got in while the runner loaded
    try {
      runner.prepareExperiment?.(spec, host);
    } catch (e) {
      throw prepareRefusal(e);
    }
    return this.launch(spec, totalRuns(spec), {}, (onProgress, signal) => runner.runExperiment(spec, onProgress, signal));
  }

  /**
   * Starts the tuning advisor (electron/experiments/tune.ts) as an experiment: one at a time with
   * the others, listed with them, cancelled the same way; progress is seconds of the budget.
   */
  async startTune(raw: unknown, host?: () => HostCapabilities): Promise<ExperimentSummary> {
    this.assertIdle();
    let tune: TuneModule;
    try {
      tune = await this.loadTune();
      if (typeof tune.runTune !== 'function') throw new Error('it exports no runTune');
    } catch (e) {
      throw new ApiError('host', `the tuning advisor is not available in this build (it could not be loaded: ${(e as Error).message})`);
    }
    this.assertIdle();
    let spec: TuneSpec;
    try {
      spec = tune.prepareTune(raw, host);
    } catch (e) {
      throw prepareRefusal(e);
    }
    const shown: ExperimentSpec = { guest: spec.guest, workload: spec.workload, ...(spec.workloadArgs ? { workloadArgs: spec.workloadArgs } : {}), configs: [{ name: 'current', config: spec.config }], runs: 5 }; // the advisor's rounds: 5 runs a side
    return this.launch(shown, spec.budgetS, { kind: 'tune', tune: spec }, (onProgress, signal) => tune.runTune(spec, onProgress, signal));
  }

  /** Records what a tune's Apply did (the VM and the configuration it got). */
  markApplied(id: string, applied: NonNullable<ExperimentDetail['applied']>): ExperimentDetail {
    const d = this.read(id);
    if (!d) throw new ApiError('not-found', `there is no experiment with the id "${id.slice(0, 40)}"`);
    d.applied = applied;
    this.save(d);
    this.onUpdate(summary(d));
    return d;
  }

  private launch(spec: ExperimentSpec, total: number, extra: Partial<StoredExperiment>,
    run: (onProgress: (p: Progress) => void, signal: AbortSignal) => Promise<RunnerResult & { spec?: ExperimentSpec; advice?: AdviceDto; recommendedConfig?: string }>): ExperimentSummary {
    const id = `exp-${Date.now().toString(36)}-${randomBytes(4).toString('hex')}`;
    const detail: StoredExperiment = {
      id, createdAt: Date.now(), spec, state: 'running', progress: { done: 0, total }, rows: [], environment: {}, ...extra,
    };
    makeDirs(this.dir, 0o700);
    this.save(detail);
    const abort = new AbortController();
    let lastEvent = 0;
    const onProgress = (p: Progress) => {
      detail.progress = { done: num(p?.done), total: num(p?.total) || total, ...(typeof p?.current === 'string' ? { current: p.current.slice(0, 200) } : {}) };
      const now = performance.now();
      if (now - lastEvent >= PROGRESS_EVENT_MS) {
        lastEvent = now;
        this.onUpdate(summary(detail));
      }
    };
    const done = (async () => {
      try {
        const result = await run(onProgress, abort.signal);
        if (result && typeof result === 'object' && 'advice' in result) {
          Object.assign(detail, {
            spec: result.spec ?? detail.spec, advice: result.advice,
            ...(typeof result.recommendedConfig === 'string' ? { recommendedConfig: result.recommendedConfig } : {}),
          });
        }
        Object.assign(detail, {
          rows: Array.isArray(result?.rows) ? result.rows : [],
          ...(Array.isArray(result?.comparisons) ? { comparisons: result.comparisons } : {}),
          environment: typeof result?.environment === 'object' && result.environment ? result.environment : {},
          state: 'done', progress: { done: total, total },
          ...(Array.isArray(result?.raw) ? { raw: result.raw } : {}),
          ...(Array.isArray(result?.notes) ? { notes: result.notes } : {}),
          ...(Array.isArray(result?.failures) ? { failures: result.failures } : {}),
          ...(typeof result?.status === 'string' ? { status: result.status } : {}),
        });
      } catch (e) {
        if (abort.signal.aborted && abort.signal.reason === CANCEL) {
          detail.state = 'cancelled';
          detail.error = 'cancelled by the user';
        } else if (abort.signal.aborted) {
          detail.state = 'failed';
          detail.error = 'interrupted: the app stopped while it ran';
        } else {
          detail.state = 'failed';
          detail.error = oneLine((e as Error)?.message ?? String(e));
        }
      }
      try { this.save(detail); } catch (e) { detail.error ??= `the result could not be saved: ${(e as Error).message}`; }
      this.running = undefined;
      this.onUpdate(summary(detail));
    })();
    this.running = { detail, abort, done };
    this.onUpdate(summary(detail));
    return summary(detail);
  }

  private assertIdle(): void {
    const r = this.running;
    if (r) throw new ApiError('conflict', `experiment ${r.detail.id} is still running; wait for it to finish or cancel it`);
  }

  /**
   * Cancels the running experiment `id`: its run in progress ends at once (the VM stopped, QEMU
   * killed) and it is kept as "cancelled" with the runs so far discarded. Resolves when it has
   * stopped. Cancelling one that has finished is refused (nothing to cancel).
   */
  async cancel(rawId: unknown): Promise<ExperimentSummary> {
    const id = textArg(rawId, 'experiment id', 100);
    const r = this.running;
    if (!r || r.detail.id !== id) {
      const d = this.get(id); // not-found when there is none
      throw new ApiError('conflict', `experiment ${d.id} is not running (it is ${d.state}); there is nothing to cancel`);
    }
    r.abort.abort(CANCEL);
    await r.done;
    return summary(r.detail);
  }

  /** Deletes a finished experiment's record (from the list and from UNHALT_HOME/experiments). */
  delete(rawId: unknown): void {
    const id = textArg(rawId, 'experiment id', 100);
    if (this.running?.detail.id === id) throw new ApiError('conflict', `experiment ${id} is running; cancel it first`);
    this.get(id); // not-found when there is none
    try {
      rmSync(join(this.dir, `${id}.json`));
    } catch (e) {
      throw new ApiError('host', `experiment ${id} could not be deleted: ${(e as Error).message}`);
    }
    this.onDelete(id);
  }

  list(): ExperimentSummary[] {
    const out = new Map<string, ExperimentSummary>();
    let names: string[] = [];
    try { names = readdirSync(this.dir); } catch { /* none yet */ }
    for (const name of names) {
      const id = name.endsWith('.json') ? name.slice(0, -5) : '';
      if (!EXPERIMENT_ID.test(id)) continue;
      const d = this.read(id);
      if (d) out.set(id, summary(d));
    }
    if (this.running) out.set(this.running.detail.id, summary(this.running.detail));
    return [...out.values()].sort((a, b) => b.createdAt - a.createdAt).slice(0, MAX_LISTED);
  }

  get(rawId: unknown): ExperimentDetail {
    const id = textArg(rawId, 'experiment id', 100);
    if (this.running?.detail.id === id) return structuredClone(this.running.detail);
    const d = EXPERIMENT_ID.test(id) ? this.read(id) : undefined;
    if (!d) throw new ApiError('not-found', `there is no experiment with the id "${id.slice(0, 40)}"`);
    return d;
  }

  /** Stops a running experiment (service shutdown) and records it as interrupted. */
  async abort(): Promise<void> {
    const r = this.running;
    if (!r) return;
    r.abort.abort(SHUTDOWN);
    await r.done;
  }

  private save(d: StoredExperiment): void {
    const owner = d.state === 'running' ? { ownerPid: process.pid } : {};
    writeFileAtomic(join(this.dir, `${d.id}.json`), `${JSON.stringify({ ...d, ...owner }, null, 1)}\n`);
  }

  private read(id: string): StoredExperiment | undefined {
    try {
      // A record that is no small regular file (a FIFO would block the whole API) is no record.
      const d = JSON.parse(readHomeFile(join(this.dir, `${id}.json`), 'the experiment record', MAX_RECORD_BYTES) ?? 'null') as StoredExperiment & { ownerPid?: number };
      if (typeof d !== 'object' || d === null || d.id !== id || typeof d.createdAt !== 'number' || typeof d.spec !== 'object' || !d.spec) return undefined;
      const { ownerPid, ...detail } = d;
      if (!Array.isArray(detail.rows)) detail.rows = [];
      // Saved before experiments had verdicts: computed from the runs kept in the rows (deterministic).
      if (!Array.isArray(detail.comparisons) && detail.rows.every((r) => Array.isArray(r?.runs))) {
        detail.comparisons = compareRows(detail.rows, betterOf(detail.rows[0]?.unit ?? ''));
      }
      if (typeof detail.environment !== 'object' || !detail.environment) detail.environment = {};
      // `unhalt bench` saves only finished experiments, without state or progress.
      if (!detail.state) detail.state = 'done';
      if (!detail.progress) {
        const n = Array.isArray(detail.raw) ? detail.raw.length : 0;
        detail.progress = { done: n, total: n };
      }
      // Left "running" by a process that is gone: it will never finish.
      if (detail.state === 'running' && this.running?.detail.id !== id && !(ownerPid && ownerPid !== process.pid && pidAlive(ownerPid))) {
        detail.state = 'failed';
        detail.error = 'interrupted: the app stopped while it ran';
      }
      return detail;
    } catch {
      return undefined; // unreadable results are skipped, not fatal
    }
  }
}

/** Why a running experiment's AbortController fired. */
const CANCEL = 'cancel';
const SHUTDOWN = 'shutdown';

function summary(d: ExperimentDetail): ExperimentSummary {
  return {
    id: d.id, createdAt: d.createdAt, spec: d.spec, state: d.state, progress: { ...d.progress },
    ...(d.kind ? { kind: d.kind } : {}), ...(d.tune ? { tune: d.tune } : {}),
    ...(d.error ? { error: d.error } : {}),
  };
}

function num(v: unknown): number {
  return typeof v === 'number' && Number.isFinite(v) && v >= 0 ? v : 0;
}

function oneLine(s: string): string {
  return s.replace(/\s*\n\s*/g, ' ').slice(0, 500);
}

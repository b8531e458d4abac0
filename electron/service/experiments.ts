// A/B experiments: validates a spec, runs it through the experiment runner (loaded on demand, so
// a build without it still serves everything else), reports progress as events, and keeps every
// result as UNHALT_HOME/experiments/<id>.json. One experiment runs at a time: two at once on the
// same host CPUs would measure each other.
import { randomBytes } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { ExperimentDetail, ExperimentSpec, ExperimentSummary } from './api.ts';
import { parseConfigString } from '../vmm/config/config-string.ts';
import { ConfigError } from '../vmm/config/vm-config.ts';
import { writeFileAtomic } from './atomic-file.ts';
import { ApiError } from './errors.ts';
import { describe, textArg } from './validate.ts';
import { makeDirs } from './make-dir.ts';
import { entryUrl } from '../entry-url.ts';

/** Ids of saved experiments: ours ("exp-…") and `unhalt bench`'s (an ISO time and a uuid part). */
export const EXPERIMENT_ID = /^[A-Za-z0-9][A-Za-z0-9_-]{0,79}$/;
const MAX_CONFIGS = 8;
const MAX_RUNS = 100;
const PROGRESS_EVENT_MS = 250;
const MAX_LISTED = 200;

type Progress = ExperimentSummary['progress'];

/** What the service needs of electron/vmm/experiments/runner.ts (also shared with `unhalt bench`). */
interface RunnerModule {
  runExperiment(spec: ExperimentSpec, onProgress: (p: Progress) => void, signal?: AbortSignal): Promise<RunnerResult>;
  /** Checks a spec against the host before anything runs (throws with a readable message). */
  prepareExperiment?(spec: ExperimentSpec): unknown;
}

interface RunnerResult {
  rows: ExperimentDetail['rows'];
  environment: Record<string, unknown>;
  raw?: unknown[];
  notes?: string[];
  /** Which runs gave no value and why (runner.ts failuresOf), and ok / partial / failed. */
  failures?: unknown[];
  status?: string;
}

/** The runner, as a sibling of vmm/ in this build (.ts from source, .js when compiled). */
const RUNNER_URL = entryUrl(new URL('../vmm/experiments/runner.ts', import.meta.url));

const SPEC_FIELDS = new Set(['guest', 'workload', 'workloadArgs', 'configs', 'runs', 'vsQemu', 'bare', 'deadlineS']);

export function validateExperimentSpec(raw: unknown): ExperimentSpec {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) throw new ApiError('invalid', 'an experiment must be an object');
  const r = raw as Record<string, unknown>;
  for (const k of Object.keys(r)) if (!SPEC_FIELDS.has(k)) throw new ApiError('invalid', `unknown experiment field "${k.slice(0, 40)}"`);
  if (r.guest !== 'probe' && r.guest !== 'linux') throw new ApiError('invalid', `experiment guest must be probe or linux, got ${describe(r.guest)}`);
  const workload = textArg(r.workload, 'workload', 64);
  if (!/^[a-z0-9][a-z0-9_-]{0,31}$/.test(workload)) throw new ApiError('invalid', `workload "${workload.slice(0, 40)}" must be a lower-case name (letters, digits, - and _)`);
  const spec: ExperimentSpec = { guest: r.guest, workload, configs: [], runs: 0 };
  if (r.workloadArgs !== undefined) {
    const args = textArg(r.workloadArgs, 'workloadArgs', 1024);
    if (!/^[\x20-\x7e]*$/.test(args)) throw new ApiError('invalid', 'workloadArgs may only contain printable ASCII');
    spec.workloadArgs = args;
  }
  if (!Array.isArray(r.configs) || r.configs.length < 2) throw new ApiError('invalid', 'an experiment needs a list of at least two configurations');
  if (r.configs.length > MAX_CONFIGS) throw new ApiError('invalid', `an experiment compares at most ${MAX_CONFIGS} configurations, got ${r.configs.length}`);
  const names = new Set<string>();
  spec.configs = r.configs.map((c, i) => {
    if (typeof c !== 'object' || c === null || Array.isArray(c)) throw new ApiError('invalid', `configuration #${i + 1} must be an object { name, config }`);
    const { name, config, ...rest } = c as Record<string, unknown>;
    if (Object.keys(rest).length) throw new ApiError('invalid', `configuration #${i + 1}: unknown field "${Object.keys(rest)[0]!.slice(0, 40)}"`);
    const n = textArg(name, `configuration #${i + 1} name`, 64);
    if (!/^[A-Za-z0-9][A-Za-z0-9 ._+=,-]*$/.test(n)) throw new ApiError('invalid', `configuration name "${n.slice(0, 40)}" may use letters, digits, space and . _ + = , -`);
    if (names.has(n)) throw new ApiError('invalid', `two configurations are named "${n}"`);
    names.add(n);
    const text = textArg(config, `configuration "${n}"`, 4096);
    try {
      parseConfigString(text, { guest: spec.guest });
    } catch (e) {
      if (e instanceof ConfigError) throw new ApiError('invalid', `configuration "${n}": ${e.message}`);
      throw e;
    }
    return { name: n, config: text };
  });
  if (typeof r.runs !== 'number' || !Number.isSafeInteger(r.runs) || r.runs < 1 || r.runs > MAX_RUNS) {
    throw new ApiError('invalid', `runs must be a whole number from 1 to ${MAX_RUNS}, got ${describe(r.runs)}`);
  }
  spec.runs = r.runs;
  for (const k of ['vsQemu', 'bare'] as const) {
    if (r[k] === undefined) continue;
    if (typeof r[k] !== 'boolean') throw new ApiError('invalid', `${k} must be true or false, got ${describe(r[k])}`);
    spec[k] = r[k];
  }
  if (r.deadlineS !== undefined) {
    if (typeof r.deadlineS !== 'number' || !(r.deadlineS > 0) || r.deadlineS > 86_400) throw new ApiError('invalid', `deadlineS must be a number of seconds above 0 and at most 86400, got ${describe(r.deadlineS)}`);
    spec.deadlineS = r.deadlineS;
  }
  return spec;
}

/** What is stored: the detail, plus the runner's raw runs and notes (CSV/JSON export). */
type StoredExperiment = ExperimentDetail & { raw?: unknown[]; notes?: string[]; failures?: unknown[]; status?: string };

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

  constructor(dir: string, onUpdate: (s: ExperimentSummary) => void, loadRunner?: () => Promise<RunnerModule>) {
    this.dir = dir;
    this.onUpdate = onUpdate;
    this.loadRunner = loadRunner ?? (() => import(RUNNER_URL.href) as Promise<RunnerModule>);
  }

  async start(raw: unknown): Promise<ExperimentSummary> {
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
      runner.prepareExperiment?.(spec);
    } catch (e) {
      throw new ApiError('invalid', (e as Error).message);
    }
    const id = `exp-${Date.now().toString(36)}-${randomBytes(4).toString('hex')}`;
    const total = spec.configs.length * spec.runs;
    const detail: StoredExperiment = {
      id, createdAt: Date.now(), spec, state: 'running', progress: { done: 0, total }, rows: [], environment: {},
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
        const result = await runner.runExperiment(spec, onProgress, abort.signal);
        Object.assign(detail, {
          rows: Array.isArray(result?.rows) ? result.rows : [],
          environment: typeof result?.environment === 'object' && result.environment ? result.environment : {},
          state: 'done', progress: { done: total, total },
          ...(Array.isArray(result?.raw) ? { raw: result.raw } : {}),
          ...(Array.isArray(result?.notes) ? { notes: result.notes } : {}),
          ...(Array.isArray(result?.failures) ? { failures: result.failures } : {}),
          ...(typeof result?.status === 'string' ? { status: result.status } : {}),
        });
      } catch (e) {
        detail.state = 'failed';
        detail.error = abort.signal.aborted ? 'interrupted: the app stopped while it ran' : oneLine((e as Error)?.message ?? String(e));
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
    if (r) throw new ApiError('conflict', `experiment ${r.detail.id} is still running; wait for it to finish`);
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
    r.abort.abort();
    await r.done;
  }

  private save(d: StoredExperiment): void {
    const owner = d.state === 'running' ? { ownerPid: process.pid } : {};
    writeFileAtomic(join(this.dir, `${d.id}.json`), `${JSON.stringify({ ...d, ...owner }, null, 1)}\n`);
  }

  private read(id: string): StoredExperiment | undefined {
    try {
      const d = JSON.parse(readFileSync(join(this.dir, `${id}.json`), 'utf8')) as StoredExperiment & { ownerPid?: number };
      if (typeof d !== 'object' || d === null || d.id !== id || typeof d.createdAt !== 'number' || typeof d.spec !== 'object' || !d.spec) return undefined;
      const { ownerPid, ...detail } = d;
      if (!Array.isArray(detail.rows)) detail.rows = [];
      if (typeof detail.environment !== 'object' || !detail.environment) detail.environment = {};
      // `unhalt bench` saves only finished experiments, without state or progress.
      if (!detail.state) detail.state = 'done';
      if (!detail.progress) {
        const n = Array.isArray(detail.raw) ? detail.raw.length : 0;
        detail.progress = { done: n, total: n };
      }
      // Left "running" by a process that is gone: it will never finish.
      if (detail.state === 'running' && this.running?.detail.id !== id && !(ownerPid && ownerPid !== process.pid && alive(ownerPid))) {
        detail.state = 'failed';
        detail.error = 'interrupted: the app stopped while it ran';
      }
      return detail;
    } catch {
      return undefined; // unreadable results are skipped, not fatal
    }
  }
}

function summary(d: ExperimentDetail): ExperimentSummary {
  return {
    id: d.id, createdAt: d.createdAt, spec: d.spec, state: d.state, progress: { ...d.progress },
    ...(d.error ? { error: d.error } : {}),
  };
}

function num(v: unknown): number {
  return typeof v === 'number' && Number.isFinite(v) && v >= 0 ? v : 0;
}

function oneLine(s: string): string {
  return s.replace(/\s*\n\s*/g, ' ').slice(0, 500);
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}

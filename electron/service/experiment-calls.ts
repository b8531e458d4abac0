// The API's calls on experiments and the tuning advisor: start (after the host's check, which
// the service's probe answers), list, read, cancel and delete them (experiments.ts keeps and runs
// them), start a tune on a VM's saved configuration and apply a finished tune's recommendation.
import type { ExperimentDetail, ExperimentSummary, VmRecord } from './api.ts';
import { applyDelta } from '../experiments/advisor.ts';
import { formatConfigString } from '../vmm/config/config-string.ts';
import { ApiError } from './errors.ts';
import { Experiments } from './experiments.ts';
import type { ServiceState } from './service-state.ts';
import { clip } from './validate.ts';
import { resolveApiSpec } from './experiment-api.ts';
import { confirmHostCommand } from './host-commands.ts';
import { ExperimentError } from '../experiments/spec-error.ts';
import { HostCommandRefused, HostCommandRequests } from './host-command-requests.ts';
import type { HostCommandRequest, SavedWorkloadDto } from './api.ts';
import { checkSaveName, isBuiltInWorkload, loadWorkload, saveWorkload, savedWorkloadNames } from '../experiments/saved-workloads.ts';
import { validateUserBenchmark } from '../experiments/user-bench.ts';
import { resolveSavedWorkload } from './experiment-api.ts';
import { vmImage } from '../experiments/vm-base.ts';

/** Tests: where the experiment runner comes from (experiments.ts). */
export type LoadExperimentRunner = ConstructorParameters<typeof Experiments>[2];

export class ExperimentCalls {
  private readonly s: ServiceState;
  private readonly experiments: Experiments;

  private readonly requests?: HostCommandRequests;

  constructor(state: ServiceState, loadRunner?: LoadExperimentRunner, announce?: (text: string) => void) {
    this.s = state;
    if (announce) this.requests = new HostCommandRequests(announce);
    this.experiments = new Experiments(state.layout.experiments, (experiment) => state.broadcast({ type: 'experiment', experiment }),
      loadRunner, (id) => state.broadcast({ type: 'experiment-deleted', id }));
  }

  startExperiment(raw: unknown): Promise<ExperimentSummary> {
    this.s.assertNotShuttingDown();
    // A VM by id and a host command by its confirmation only (experiment-api.ts).
    const spec = resolveApiSpec(raw, this.s.layout, (id) => this.s.record(id));
    return this.experiments.start(spec, () => this.s.probe());
  }

  /** A host command to confirm: its one-time code goes out of band (host-command-requests.ts). */
  requestHostCommand(rawArgv: unknown): HostCommandRequest {
    if (!this.requests) throw new ApiError('host', 'this service has nowhere to show a confirmation code to the person at this machine, so it confirms no host command: run it with unhalt bench --host-cmd instead');
    try {
      return this.requests.request(rawArgv);
    } catch (e) {
      if (e instanceof ExperimentError) throw new ApiError('invalid', e.message);
      if (e instanceof HostCommandRefused) throw new ApiError('conflict', e.message);
      throw e;
    }
  }

  /** The request's command, confirmed by its code, stored for experiments (bench.hostCmdId). */
  confirmHostCommand(requestId: unknown, code: unknown): { id: string; argv: string[] } {
    if (!this.requests) throw new ApiError('host', 'this service confirms no host command (see requestHostCommand)');
    try {
      const argv = this.requests.confirm(requestId, code);
      const { id } = confirmHostCommand(this.s.layout.hostCommands, argv);
      return { id, argv };
    } catch (e) {
      if (e instanceof HostCommandRefused) throw new ApiError('invalid', e.message);
      throw e;
    }
  }

  /** Saves the user's benchmark under a name (a host command by its confirmation id only). */
  saveWorkload(rawName: unknown, rawBench: unknown): SavedWorkloadDto {
    const resolved = resolveApiSpec({ bench: rawBench }, this.s.layout, (id) => this.s.record(id)) as { bench: unknown };
    try {
      const name = checkSaveName(typeof rawName === 'string' ? rawName : '');
      const bench = validateUserBenchmark(resolved.bench);
      saveWorkload(this.s.layout.workloads, name, bench);
      return { name, bench };
    } catch (e) {
      if (e instanceof ExperimentError) throw new ApiError('invalid', e.message);
      throw e;
    }
  }

  /** The saved benchmarks that load (a damaged file is left out here; using it says why). */
  listSavedWorkloads(): SavedWorkloadDto[] {
    const dir = this.s.layout.workloads;
    return savedWorkloadNames(dir).flatMap((name) => {
      try {
        const bench = loadWorkload(dir, name);
        return bench ? [{ name, bench }] : [];
      } catch {
        return [];
      }
    });
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
    this.s.assertNotShuttingDown();
    const rec = this.s.record(rawVmId);
    if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) throw new ApiError('invalid', 'a tune request must be an object { workload, goal, budgetS }');
    const { workload, workloadArgs, goal, latencyBound, budgetS, ...rest } = raw as Record<string, unknown>;
    const unknownField = Object.keys(rest)[0];
    if (unknownField !== undefined) throw new ApiError('invalid', `unknown tune field "${clip(unknownField, 40)}"`);
    // A saved benchmark (the user's own command): the VM as saved, its disks attached snapshot=on
    // by every run, as `unhalt tune VM --workload SAVED` does; a host command only if confirmed.
    const saved = typeof workload === 'string' && !isBuiltInWorkload(workload) ? resolveSavedWorkload(this.s.layout, workload) : undefined;
    if (saved) {
      const image = vmImage(rec.config);
      return this.experiments.startTune({
        guest: rec.config.guest, config: '', vmId: rec.id, vmName: rec.config.name, workload, goal, budgetS,
        vm: { name: rec.config.name, config: rec.config, ...(image ? { image } : {}) }, bench: saved,
        ...(workloadArgs !== undefined ? { workloadArgs } : {}), ...(latencyBound !== undefined ? { latencyBound } : {}),
      }, () => this.s.probe());
    }
    if (rec.config.guest !== 'probe' && rec.config.guest !== 'linux') {
      throw new ApiError('invalid', `VM "${rec.config.name}" boots its own kernel: the advisor runs the bench workloads, which need the probe or the Linux guest; give it your own benchmark (a saved workload)`);
    }
    return this.experiments.startTune({
      // Without its disks: the workloads use none, and an experiment takes no files (runner.ts).
      guest: rec.config.guest, config: formatConfigString({ ...rec.config, disks: undefined }), vmId: rec.id, vmName: rec.config.name,
      workload, goal, budgetS,
      ...(workloadArgs !== undefined ? { workloadArgs } : {}), ...(latencyBound !== undefined ? { latencyBound } : {}),
    }, () => this.s.probe());
  }

  /** A finished tune's recommendation into a stopped VM's saved configuration; recorded in the tune. */
  async applyTune(rawExperimentId: unknown, rawVmId: unknown): Promise<VmRecord> {
    const d = this.experiments.get(rawExperimentId);
    if (d.kind !== 'tune' || !d.advice) throw new ApiError('conflict', `experiment ${d.id} is not a tune: there is no recommendation to apply`);
    if (d.state !== 'done') throw new ApiError('conflict', `tune ${d.id} is ${d.state}: only a finished tune's recommendation can be applied`);
    const rec = d.advice.recommendation;
    if (rec.kind !== 'change') throw new ApiError('conflict', 'the advice was to keep the current configuration: there is nothing to apply');
    const id = this.s.record(rawVmId).id;
    const refuseRunning = () => {
      const sup = this.s.supervisors.get(id);
      if (sup?.running) throw new ApiError('conflict', `the VM is ${sup.status().state}: its settings are fixed at boot, so nothing was changed; stop it, then apply the recommendation (${rec.label})`);
    };
    refuseRunning();
    const updated = await this.s.changeRecord(id, (r) => {
      refuseRunning(); // again inside the change: a start may have claimed the VM meanwhile
      r.config = this.s.validConfig(applyDelta(r.config, rec.delta));
    });
    this.experiments.markApplied(d.id, { vmId: id, vmName: updated.config.name, at: Date.now(), config: formatConfigString(updated.config) });
    this.s.broadcastLibrary();
    return this.s.dto(updated);
  }

  /** The service shuts down: the running experiment ends (resolves once it has). */
  abort(): Promise<void> {
    return this.experiments.abort();
  }
}

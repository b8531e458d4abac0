// The host's side of one Linux workload run over ttyS1 (LinuxAgentRun), apart from any VM: the
// commands it sends the guest's agent and how it reads the agent's answers (backend-linux.ts
// drives it with a VM; tests drive it with the agent built for the host).
import type { AgentEvent } from '../vmm/agent/line-protocol.ts';
import type { RunOutcome } from './backend.ts';
import type { RunPacer, Step } from './pacing.ts';
import { withSize, type Workload } from './workloads.ts';

/**
 * The host's side of one Linux workload run over ttyS1, apart from any VM (tests drive it with
 * the agent built for the host, `unhalt-agent --stdio`): on the agent's `@u1 ready` it sends
 * `run NAME key=value ...`; it keeps the result event, the first error and `@u1 done`, and calls
 * `finished` when done arrives. With a pacer (an experiment's runs) it first sends the pacer's
 * calibration or warm-up commands, each after the previous one's `done`, then the measured one,
 * and arms each step's deadline; only the measured command's result is the run's.
 */
export class LinuxAgentRun {
  ready?: AgentEvent;
  result?: AgentEvent;
  failure?: AgentEvent;
  /** The `@u1 done` that ended the run: the measured command's, or a failed earlier step's. */
  done?: AgentEvent;
  /** The command last sent (the measured one once the run gets there). */
  command: string;
  /** The step of the command last sent; undefined without a pacer. */
  step?: Step;
  private readonly work: Workload;
  private readonly args: readonly string[];
  private readonly send: (line: string, step?: Step) => void;
  private readonly finished: () => void;
  private readonly pacer?: RunPacer;
  private readonly now: () => number;
  private sentAt = 0;

  constructor(work: Workload, args: readonly string[], send: (line: string, step?: Step) => void, finished: () => void,
    opts: { pacer?: RunPacer; now?: () => number } = {}) {
    this.work = work;
    this.args = args;
    this.command = this.commandFor(args);
    this.send = send;
    this.finished = finished;
    if (opts.pacer) this.pacer = opts.pacer;
    this.now = opts.now ?? (() => performance.now());
  }

  onEvent(e: AgentEvent): void {
    if (!this.ready) {
      if (e.event !== 'ready') return; // the agent's ttyS1 may carry other lines before it starts
      this.ready = e;
      if (this.pacer) this.sendStep(this.pacer.next()!);
      else this.send(`${this.command}\n`);
    } else if (e.event === this.work.event && !this.result) {
      if (this.measuring()) this.result = e;
    } else if (e.event === 'error' && !this.failure) {
      this.failure = e;
    } else if (e.event === 'done' && e.fields.workload === this.work.id && !this.done) {
      const next = this.pacer && e.fields.status === 0 && !this.measuring() ? this.pacer.next(this.now() - this.sentAt) : undefined;
      if (next) {
        this.sendStep(next);
        return;
      }
      this.done = e;
      this.finished();
    }
  }

  /** The run's value, or why there is none (`ended`: how the VM or process ended). */
  outcome(ended: string): Pick<RunOutcome, 'value' | 'fields' | 'error'> {
    if (!this.ready) return { value: null, fields: {}, error: `the Linux agent never reported ready on ttyS1: ${ended}` };
    if (!this.result) {
      const f = this.failure;
      const stepName = this.measuring() ? undefined : this.step!.kind === 'calibrate' ? 'calibration' : 'warm-up';
      const why = this.done
        ? `the agent's ${this.work.name}${stepName ? ` ${stepName}` : ''} run failed (status ${this.done.fields.status}${f ? `, ${fieldText(f)}` : ''})`
        : `no ${this.work.event} result after "${this.command}"${stepName ? ` (${stepName})` : ''}: ${ended}`;
      return { value: null, fields: {}, error: why };
    }
    return { value: this.work.value(this.result, this.ready), fields: this.result.fields };
  }

  private measuring(): boolean {
    return !this.step || this.step.kind === 'measure';
  }

  private commandFor(args: readonly string[]): string {
    return `run ${this.work.name} ${args.join(' ')}`.trim();
  }

  private sendStep(step: Step): void {
    const param = this.work.size!.param;
    this.step = step;
    this.command = this.commandFor(withSize(this.args, param, step.size));
    this.sentAt = this.now();
    this.send(`${this.command}\n`, step);
  }
}

const fieldText = (e: AgentEvent): string => Object.entries(e.fields).map(([k, v]) => `${k}=${v}`).join(' ');

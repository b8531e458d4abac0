// How long each phase of an experiment run may take, and how big a Linux workload is: derived
// from this host's measured speed, never fixed. The rule (docs/cli.md, "unhalt bench"):
//
// - Every deadline is DEADLINE_MARGIN times what the phase is expected to take, and never below
//   DEADLINE_FLOOR_MS. Expected times come from the best measurement at hand:
//   - booting the Linux guest to the agent's `@u1 ready`: the slowest readiness already measured
//     in this experiment; before any, LINUX_READY_ON_HARDWARE_MS times the guest slowdown
//     (host-speed.ts: the host clock's slowdown, at least 15 where the host CPU is emulated);
//   - a workload command: its size times the time per unit (per loop) measured by calibration;
//     the first calibration command: CALIBRATION_STEP_ON_HARDWARE_MS times the slowdown;
//   - a probe-guest run (sized by its own arguments): PROBE_RUN_BUDGET_MS times the slowdown.
// - Calibration, in the first run whose agent gets ready: the workload at a small size, then
//   larger (up to 10x a step) until one command takes MIN_CALIBRATION_MS, like Go's testing.B;
//   time per unit = host wall time of that command / its size (the fixed cost of fork and the
//   ttyS1 round trip is counted per unit too, which errs on the slow side: smaller sizes, longer
//   deadlines). The workload size is then what takes TARGET_RUN_MS, rounded to two significant
//   digits, at most the workload's default (perf's standard sizes, so fast hosts stay comparable
//   with perf) and at least its minimum. A size given in --workload-args wins; it is still
//   calibrated, for its deadline.
// - Every later run first runs the calibration's last size once (a warm-up, so every VM has the
//   same history before its measured command as the first one), and its measured command's
//   deadline follows the slower of that warm-up and the calibration.
// - `--deadline S` replaces every derived deadline by S seconds (for tests and for users who
//   know better).

/** A generous multiple: a healthy guest on a noisy host never gets near it; a hung one is noticed. */
export const DEADLINE_MARGIN = 5;
/** No deadline is shorter: VM set-up, Node's timers and a loaded host's hiccups fit well inside. */
export const DEADLINE_FLOOR_MS = 30_000;
/**
 * The Linux kit from VM start to the agent's ready line on real VMX/SVM hardware: well under 1 s
 * (as measured there). Generous on purpose: the host clock times ordinary code, but a nested guest's boot
 * also pays for its exits, which slow down more than ordinary code does (in the TCG-nested KVM a
 * PIO exit costs 6x, a boot to the prompt 20-40x; docs/nested.md). Only the first boot relies on it.
 */
export const LINUX_READY_ON_HARDWARE_MS = 4_000;
/** The first calibration command on hardware (pipe loops=1000 takes ~10 ms; generous). */
export const CALIBRATION_STEP_ON_HARDWARE_MS = 1_000;
/** A calibration command must take this long for its time to mean something (ttyS1 latency, timer granularity). */
export const MIN_CALIBRATION_MS = 250;
/** How long one measured Linux workload command should take. */
export const TARGET_RUN_MS = 5_000;
/** A probe run on this project's hardware-speed hosts: boot plus scenario take 0.2-5 s; the budget it always had. */
export const PROBE_RUN_BUDGET_MS = 120_000;

/**
 * A user's VM from start to its --ready line on hardware: a distribution's boot to its service
 * takes seconds to a minute; generous on purpose (a hung guest is still noticed), and scaled by
 * the guest slowdown like every guest-side phase.
 */
export const USER_READY_ON_HARDWARE_MS = 60_000;
/** A user's host command (a load generator's run) at hardware speed; scaled by the host clock's slowdown. */
export const HOST_CMD_BUDGET_MS = 600_000;

export interface Deadline {
  ms: number;
  /** Where the figure comes from, for the failure message ("5x the slowest boot so far, 14.2 s"). */
  why: string;
}

const seconds = (ms: number): string => `${ms >= 10_000 ? (ms / 1000).toFixed(0) : (ms / 1000).toFixed(1)} s`;
const times = (x: number): string => `${x >= 10 ? x.toFixed(0) : x.toFixed(1)}x`;

/** MARGIN x the expected time, at least the floor; `what` says what was expected. */
export function deadlineFrom(expectedMs: number, what: string): Deadline {
  const ms = Math.max(DEADLINE_FLOOR_MS, Math.ceil(DEADLINE_MARGIN * expectedMs));
  return ms === DEADLINE_FLOOR_MS && DEADLINE_MARGIN * expectedMs < DEADLINE_FLOOR_MS
    ? { ms, why: `the ${seconds(DEADLINE_FLOOR_MS)} floor (${DEADLINE_MARGIN}x ${what} is less)` }
    : { ms, why: `${DEADLINE_MARGIN}x ${what}` };
}

export function userDeadline(ms: number): Deadline {
  return { ms, why: 'set by --deadline' };
}

// `slowdown` here is the guest slowdown (host-speed.ts): the host clock's, floored where the CPU is emulated.
const clock = (slowdown: number): string => (slowdown > 1 ? `, guests on this host expected ${times(slowdown)} slower than on hardware` : '');

/** Boot to the agent's ready line: the slowest measured so far, else the host clock's prediction. */
export function readyDeadline(slowdown: number, slowestReadyMs?: number): Deadline {
  if (slowestReadyMs !== undefined) return deadlineFrom(slowestReadyMs, `the slowest boot to agent ready so far (${seconds(slowestReadyMs)})`);
  return deadlineFrom(slowdown * LINUX_READY_ON_HARDWARE_MS, `the ${seconds(slowdown * LINUX_READY_ON_HARDWARE_MS)} boot to agent ready predicted${clock(slowdown)}`);
}

export function firstCalibrationDeadline(slowdown: number): Deadline {
  const expected = slowdown * CALIBRATION_STEP_ON_HARDWARE_MS;
  return deadlineFrom(expected, `the ${seconds(expected)} predicted for a calibration command${clock(slowdown)}`);
}

export function probeRunDeadline(slowdown: number): Deadline {
  const ms = Math.ceil(slowdown * PROBE_RUN_BUDGET_MS);
  return { ms, why: slowdown > 1 ? `the probe's ${seconds(PROBE_RUN_BUDGET_MS)} budget, scaled by this host's guest slowdown (${times(slowdown)})` : `the probe's ${seconds(PROBE_RUN_BUDGET_MS)} budget` };
}

/** Boot to the user's --ready line: the slowest measured so far, else the prediction from the host's clock. */
export function userReadyDeadline(guestSlowdown: number, slowestReadyMs?: number): Deadline {
  if (slowestReadyMs !== undefined) return deadlineFrom(slowestReadyMs, `the slowest boot to ready so far (${seconds(slowestReadyMs)})`);
  const expected = guestSlowdown * USER_READY_ON_HARDWARE_MS;
  return { ms: expected, why: `a ${seconds(USER_READY_ON_HARDWARE_MS)} budget for a boot to ready${clock(guestSlowdown)}` };
}

/** The user's command: a fixed budget, scaled by the host's clock (a host command) or the guest's (a guest command). */
export function userCmdDeadline(where: 'host' | 'guest', slowdown: number): Deadline {
  const ms = Math.ceil(slowdown * HOST_CMD_BUDGET_MS);
  return { ms, why: `the ${where} command's ${seconds(HOST_CMD_BUDGET_MS)} budget${slowdown > 1 ? `, scaled by this ${where}'s clock (${times(slowdown)} slower)` : ''}` };
}

/** A workload command of `size` units at `perUnitMs` each. */
export function commandDeadline(perUnitMs: number, size: number, param: string): Deadline {
  const expected = perUnitMs * size;
  return deadlineFrom(expected, `the ${seconds(expected)} expected for ${param}=${size} from calibration`);
}

/**
 * The next calibration size after a command of `size` took `wallMs`, or undefined when this one
 * was long enough (`minMs`: MIN_CALIBRATION_MS unless the caller names its own) or already at
 * `cap`: about twice the minimum time, in steps of 2x to 10x.
 */
export function nextCalibrationSize(size: number, wallMs: number, cap: number, minMs = MIN_CALIBRATION_MS): number | undefined {
  if (wallMs >= minMs || size >= cap) return undefined;
  const factor = Math.min(10, Math.max(2, Math.round((2 * minMs) / Math.max(wallMs, 1))));
  return Math.min(cap, size * factor);
}

/** Two significant digits: sizes a reader can compare (23000, not 23456). */
export function roundSize(n: number): number {
  if (n < 100) return Math.max(1, Math.round(n));
  const unit = 10 ** (Math.floor(Math.log10(n)) - 1);
  return Math.round(n / unit) * unit;
}

/** The size that takes TARGET_RUN_MS at `perUnitMs`, within [min, max]. */
export function sizeForTarget(perUnitMs: number, min: number, max: number): number {
  if (!(perUnitMs > 0)) return max;
  return Math.min(max, Math.max(min, roundSize(TARGET_RUN_MS / perUnitMs)));
}

/** What an experiment's calibration found (kept in the result). */
export interface Sizing {
  /** The size parameter ("loops"). */
  param: string;
  /** The size every measured command used. */
  size: number;
  source: 'calibrated' | 'given';
  targetRunMs: number;
  /** The calibration commands: size and host wall time from sending the command to its `done`. */
  steps: { size: number; wallMs: number }[];
  perUnitMs: number;
}

export interface SizeParam {
  name: string;
  /** Where calibration starts. */
  calibrateFrom: number;
  min: number;
  /** The workload's default: the largest size calibration picks. */
  max: number;
}

export type Step = { kind: 'calibrate' | 'warmup' | 'measure'; size: number; deadline: Deadline };

/**
 * The pacing of one experiment's Linux runs: state shared by all runs (readiness times, the
 * calibration), handing each run its steps and deadlines.
 */
export class ExperimentPacing {
  readonly slowdown: number;
  readonly param: SizeParam;
  private readonly givenSize?: number;
  private readonly fixedDeadline?: Deadline;
  private slowestReadyMs?: number;
  private found?: Sizing;

  constructor(opts: { slowdown: number; param: SizeParam; givenSize?: number; deadlineMs?: number }) {
    this.slowdown = opts.slowdown;
    this.param = opts.param;
    if (opts.givenSize !== undefined) this.givenSize = opts.givenSize;
    if (opts.deadlineMs !== undefined) this.fixedDeadline = userDeadline(opts.deadlineMs);
  }

  get sizing(): Sizing | undefined {
    return this.found;
  }

  readyDeadline(): Deadline {
    return this.fixedDeadline ?? readyDeadline(this.slowdown, this.slowestReadyMs);
  }

  noteReady(ms: number): void {
    this.slowestReadyMs = Math.max(this.slowestReadyMs ?? 0, ms);
  }

  /** Steps of one run, one at a time: `next(undefined)` first, then `next(wallMs of the last)`. */
  newRun(): RunPacer {
    return new RunPacer(this);
  }

  /** @internal RunPacer's access to the shared state. */
  deadline(d: () => Deadline): Deadline {
    return this.fixedDeadline ?? d();
  }

  /** @internal the largest size calibration goes to. */
  cap(): number {
    return this.givenSize ?? this.param.max;
  }

  /** @internal a calibration finished: fix the size for every run. */
  calibrated(steps: { size: number; wallMs: number }[]): Sizing {
    const last = steps.at(-1)!;
    const perUnitMs = last.wallMs / last.size;
    this.found = {
      param: this.param.name,
      size: this.givenSize ?? sizeForTarget(perUnitMs, this.param.min, this.param.max),
      source: this.givenSize !== undefined ? 'given' : 'calibrated',
      targetRunMs: TARGET_RUN_MS,
      steps,
      perUnitMs,
    };
    return this.found;
  }
}

export class RunPacer {
  private readonly pacing: ExperimentPacing;
  private readonly steps: { size: number; wallMs: number }[] = [];
  private last?: Step;
  private warmupPerUnitMs = 0;

  constructor(pacing: ExperimentPacing) {
    this.pacing = pacing;
  }

  /** The step after the last one took `wallMs` (undefined for the first step); undefined when the run is complete. */
  next(wallMs?: number): Step | undefined {
    const p = this.pacing;
    const last = this.last;
    if (last && wallMs !== undefined) {
      if (last.kind === 'measure') return (this.last = undefined);
      if (last.kind === 'calibrate') {
        this.steps.push({ size: last.size, wallMs });
        const size = nextCalibrationSize(last.size, wallMs, p.cap());
        if (size !== undefined) {
          return (this.last = { kind: 'calibrate', size, deadline: p.deadline(() => commandDeadline(wallMs / last.size, size, p.param.name)) });
        }
        p.calibrated(this.steps);
      } else {
        this.warmupPerUnitMs = wallMs / last.size;
      }
      return (this.last = this.measureStep());
    }
    // The first step: calibrate while no run has; else warm up at the calibration's last size.
    const sizing = p.sizing;
    if (!sizing) {
      const size = Math.min(p.param.calibrateFrom, p.cap());
      return (this.last = { kind: 'calibrate', size, deadline: p.deadline(() => firstCalibrationDeadline(p.slowdown)) });
    }
    const size = sizing.steps.at(-1)!.size;
    return (this.last = { kind: 'warmup', size, deadline: p.deadline(() => commandDeadline(sizing.perUnitMs, size, p.param.name)) });
  }

  private measureStep(): Step {
    const sizing = this.pacing.sizing!;
    const perUnit = Math.max(sizing.perUnitMs, this.warmupPerUnitMs);
    return { kind: 'measure', size: sizing.size, deadline: this.pacing.deadline(() => commandDeadline(perUnit, sizing.size, sizing.param)) };
  }
}

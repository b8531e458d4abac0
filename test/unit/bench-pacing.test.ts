// The rule behind every deadline and Linux workload size of `unhalt bench` (pacing.ts): a
// generous multiple of what a phase is expected to take, with a floor, from the host clock
// (host-speed.ts) until calibration has measured the guest itself; never a fixed 120 s.
import { describe, expect, it } from 'vitest';
import { EMULATED_GUEST_SLOWDOWN, guestSlowdownFor, measureHostSpeed, REFERENCE_LOOP_MS, slowdownFor } from '../../electron/vmm/host-speed.ts';
import {
  DEADLINE_FLOOR_MS, DEADLINE_MARGIN, ExperimentPacing, LINUX_READY_ON_HARDWARE_MS, MIN_CALIBRATION_MS, PROBE_RUN_BUDGET_MS,
  TARGET_RUN_MS, commandDeadline, deadlineFrom, nextCalibrationSize, probeRunDeadline, readyDeadline, roundSize, sizeForTarget,
} from '../../electron/experiments/pacing.ts';

const loops = { name: 'loops', calibrateFrom: 1000, min: 1, max: 1_000_000 };

describe('the host clock', () => {
  it('is the reference loop time over the reference, never below 1', () => {
    expect(slowdownFor(REFERENCE_LOOP_MS / 2)).toBe(1); // a faster host keeps the hardware bases
    expect(slowdownFor(REFERENCE_LOOP_MS)).toBe(1);
    expect(slowdownFor(REFERENCE_LOOP_MS * 30)).toBeCloseTo(30, 9); // QEMU TCG
    expect(slowdownFor(Number.NaN)).toBe(1);
  });

  it('is the guest slowdown too, except that an emulated CPU never counts as less than 15x for guests', () => {
    // Under QEMU TCG the loop is translated once and ran 1.8x in the nested lane while a Linux boot
    // there took ~40 s (10x the hardware base): the clock alone killed a healthy boot at 37 s.
    expect(guestSlowdownFor(1.8, false)).toBe(1.8);
    expect(guestSlowdownFor(1.8, true)).toBe(EMULATED_GUEST_SLOWDOWN);
    expect(guestSlowdownFor(40, true)).toBe(40);
    expect(readyDeadline(guestSlowdownFor(1.8, true)).ms).toBeGreaterThan(5 * 40_000);
    expect(readyDeadline(guestSlowdownFor(1.8, true)).why).toMatch(/60 s boot to agent ready predicted, guests on this host expected 15x slower than on hardware/);
    let i = 0;
    const times = [0, 5.4]; // one 1.8x repetition, the rest the same
    const speed = measureHostSpeed(() => times[i++ % 2]!, true);
    expect(speed.slowdown).toBeCloseTo(1.8, 9);
    expect(speed.guestSlowdown).toBe(EMULATED_GUEST_SLOWDOWN);
    expect(measureHostSpeed(() => times[i++ % 2]!, false).guestSlowdown).toBeCloseTo(1.8, 9);
  });

  it('takes the fastest of its repetitions (one preemption is not a slow host)', () => {
    const times = [0, 500, 500, 503, 503, 1003, 1003, 1006, 1006, 1106, 1106, 1200, 1200, 1290]; // ms, begin/end pairs
    let i = 0;
    const speed = measureHostSpeed(() => times[i++]!);
    expect(speed.loopMs).toBe(3);
    expect(speed.slowdown).toBe(1);
  });

  it('measures this host quickly', () => {
    const t0 = performance.now();
    const speed = measureHostSpeed();
    expect(speed.loopMs).toBeGreaterThan(0);
    expect(speed.slowdown).toBeGreaterThanOrEqual(1);
    expect(performance.now() - t0).toBeLessThan(5000);
  });
});

describe('deadlines', () => {
  it('are a generous multiple of the expected time, never below the floor', () => {
    expect(deadlineFrom(100, 'x').ms).toBe(DEADLINE_FLOOR_MS);
    expect(deadlineFrom(100, 'x').why).toMatch(/^the 30 s floor \(5x x is less\)$/);
    expect(deadlineFrom(60_000, 'the thing').ms).toBe(DEADLINE_MARGIN * 60_000);
    expect(deadlineFrom(60_000, 'the thing').why).toBe('5x the thing');
  });

  it('for agent readiness: the host clock first, the slowest measured boot once there is one', () => {
    expect(readyDeadline(1).ms).toBe(Math.max(DEADLINE_FLOOR_MS, DEADLINE_MARGIN * LINUX_READY_ON_HARDWARE_MS));
    // Under TCG (30x): 4 s x 30 x 5 = 600 s, where a fixed 120 s killed healthy boots.
    const tcg = readyDeadline(30);
    expect(tcg.ms).toBe(600_000);
    expect(tcg.why).toMatch(/5x the 120 s boot to agent ready predicted, guests on this host expected 30x slower than on hardware/);
    // Measured: the guest reached ready in 14 s; a hung boot is noticed after 70 s, not 300.
    expect(readyDeadline(30, 14_000)).toEqual({ ms: 70_000, why: '5x the slowest boot to agent ready so far (14 s)' });
  });

  it('for a probe run: its old budget, scaled by the host clock', () => {
    expect(probeRunDeadline(1).ms).toBe(PROBE_RUN_BUDGET_MS);
    expect(probeRunDeadline(20).ms).toBe(20 * PROBE_RUN_BUDGET_MS);
    expect(probeRunDeadline(20).why).toMatch(/scaled by this host's guest slowdown \(20x\)/);
  });

  it('for a workload command: its size at the calibrated time per unit', () => {
    const d = commandDeadline(0.4, 25_000, 'loops'); // 10 s expected
    expect(d.ms).toBe(10_000 * DEADLINE_MARGIN);
    expect(d.why).toBe('5x the 10 s expected for loops=25000 from calibration');
    expect(commandDeadline(0.2, 25_000, 'loops').ms).toBe(DEADLINE_FLOOR_MS);
  });
});

describe('workload sizes', () => {
  it('calibration grows the size until a command takes long enough', () => {
    expect(nextCalibrationSize(1000, 5, 1e6)).toBe(10_000); // 2-10x a step
    expect(nextCalibrationSize(10_000, 100, 1e6)).toBe(50_000);
    expect(nextCalibrationSize(10_000, 240, 1e6)).toBe(20_000);
    expect(nextCalibrationSize(50_000, MIN_CALIBRATION_MS, 1e6)).toBeUndefined();
    expect(nextCalibrationSize(1000, 5, 3000)).toBe(3000); // never past the cap (default or given size)
    expect(nextCalibrationSize(3000, 5, 3000)).toBeUndefined();
    // A caller that needs longer names its own minimum (the agent-vs-perf check: twice a tool's fixed cost).
    expect(nextCalibrationSize(1000, MIN_CALIBRATION_MS, 1e6, 1000)).toBe(8000);
    expect(nextCalibrationSize(1000, 999, 1e6, 1000)).toBe(2000);
    expect(nextCalibrationSize(1000, 1000, 1e6, 1000)).toBeUndefined();
  });

  it('the size takes the target time, in two significant digits, within the workload\'s range', () => {
    expect(roundSize(23_456)).toBe(23_000);
    expect(roundSize(987)).toBe(990);
    expect(roundSize(42)).toBe(42);
    expect(roundSize(0.2)).toBe(1);
    // TCG: 1000 loops in 250 ms -> 0.25 ms per loop -> 20000 loops for 5 s.
    expect(sizeForTarget(0.25, 1, 1_000_000)).toBe(TARGET_RUN_MS / 0.25);
    expect(sizeForTarget(0.000_5, 1, 1_000_000)).toBe(1_000_000); // hardware: perf's standard size, not more
    expect(sizeForTarget(10_000, 1, 1_000_000)).toBe(1);
  });
});

describe('an experiment\'s pacing across runs', () => {
  it('the first run calibrates; later runs warm up at the last calibration size, then measure', () => {
    const pacing = new ExperimentPacing({ slowdown: 30, param: loops });
    const first = pacing.newRun();
    expect(first.next()).toMatchObject({ kind: 'calibrate', size: 1000, deadline: { ms: 150_000 } }); // 1 s x 30 x 5
    expect(first.next(20)).toMatchObject({ kind: 'calibrate', size: 10_000 });
    const measure = first.next(300)!; // 0.03 ms per loop -> 170000 loops for 5 s
    expect(measure).toMatchObject({ kind: 'measure', size: 170_000 });
    expect(measure.deadline.ms).toBe(DEADLINE_FLOOR_MS); // 5x 5.1 s is under the floor
    expect(first.next(5000)).toBeUndefined();
    expect(pacing.sizing).toMatchObject({ param: 'loops', size: 170_000, source: 'calibrated', steps: [{ size: 1000, wallMs: 20 }, { size: 10_000, wallMs: 300 }] });

    const second = pacing.newRun();
    expect(second.next()).toMatchObject({ kind: 'warmup', size: 10_000 });
    // This VM is twice as slow: its measured command's deadline follows the warm-up.
    const m2 = second.next(600)!;
    expect(m2).toMatchObject({ kind: 'measure', size: 170_000 });
    expect(m2.deadline.ms).toBe(Math.ceil(DEADLINE_MARGIN * 0.06 * 170_000));
  });

  it('a run that failed before calibrating leaves it to the next run', () => {
    const pacing = new ExperimentPacing({ slowdown: 1, param: loops });
    expect(pacing.newRun().next()?.kind).toBe('calibrate'); // ... and its VM hung
    expect(pacing.sizing).toBeUndefined();
    expect(pacing.newRun().next()?.kind).toBe('calibrate');
  });

  it('a given size wins, but is still calibrated for its deadline', () => {
    const pacing = new ExperimentPacing({ slowdown: 1, param: loops, givenSize: 3000 });
    const run = pacing.newRun();
    expect(run.next()).toMatchObject({ kind: 'calibrate', size: 1000 });
    expect(run.next(2)).toMatchObject({ kind: 'calibrate', size: 3000 });
    expect(run.next(6)).toMatchObject({ kind: 'measure', size: 3000 });
    expect(pacing.sizing).toMatchObject({ size: 3000, source: 'given' });
    const tiny = new ExperimentPacing({ slowdown: 1, param: loops, givenSize: 10 });
    expect(tiny.newRun().next()).toMatchObject({ kind: 'calibrate', size: 10 });
  });

  it('readiness: the slowest boot measured sets the next deadline', () => {
    const pacing = new ExperimentPacing({ slowdown: 30, param: loops });
    expect(pacing.readyDeadline().ms).toBe(600_000);
    pacing.noteReady(14_000);
    pacing.noteReady(9_000);
    expect(pacing.readyDeadline().ms).toBe(70_000);
  });

  it('--deadline replaces every derived deadline', () => {
    const pacing = new ExperimentPacing({ slowdown: 30, param: loops, deadlineMs: 2500 });
    const fixed = { ms: 2500, why: 'set by --deadline' };
    expect(pacing.readyDeadline()).toEqual(fixed);
    const run = pacing.newRun();
    expect(run.next()!.deadline).toEqual(fixed);
    expect(run.next(1)!.deadline).toEqual(fixed);
  });
});

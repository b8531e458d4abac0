// A model of KVM's adaptive halt polling (virt/kvm/kvm_main.c, kvm_vcpu_halt, Linux 6.2+), to
// predict from a VM's halt histograms what another max halt-poll window would catch and cost.
// Pure (no Node: the renderer draws the curve) and deterministic (the sampler is seeded).
//
// KVM does not poll the max window every time: each vCPU keeps its own window
// (vcpu->halt_poll_ns) that grows after a short halt and shrinks after a long one. What polling
// catches therefore depends on the mix of halts, and a static "poll max every halt" model
// overstates both what is caught and what is burnt. This module runs KVM's rules instead.
import { seededRandom } from './stats.ts';

/** KVM's module parameters that steer the window (one set per host, shared by every VM). */
export interface HaltPollParams {
  /** halt_poll_ns_grow: what a short halt multiplies the window by; 0 never grows it. */
  grow: number;
  /** halt_poll_ns_grow_start: the first window, and the floor under which a shrink stops polling. */
  growStart: number;
  /** halt_poll_ns_shrink: what a long halt divides the window by; 0 drops it to 0 at once. */
  shrink: number;
}

/** KVM's defaults on recent kernels (older ones shrink with 0: one long halt ends polling). */
export const KVM_HALT_POLL_PARAMS: HaltPollParams = { grow: 2, growStart: 10_000, shrink: 2 };

/**
 * The parameters from KVM's module parameters as the host reports them (HostInfo.haltPollParams,
 * /sys/module/kvm/parameters): a parameter the kernel lacks takes the default above, except
 * halt_poll_ns_shrink, which kernels before it was 2 treated as 0.
 */
export function haltPollParamsOf(host: Readonly<Record<string, number | undefined>>): HaltPollParams {
  return {
    grow: host.halt_poll_ns_grow ?? KVM_HALT_POLL_PARAMS.grow,
    growStart: host.halt_poll_ns_grow_start ?? KVM_HALT_POLL_PARAMS.growStart,
    shrink: host.halt_poll_ns_shrink ?? 0,
  };
}

/** What a sequence of halts did under a polling rule, summed. */
export interface HaltPollOutcome {
  halts: number;
  /** Halts that polled (their window was above 0). */
  polled: number;
  /** Polls that saw the wake-up: the vCPU never slept. */
  caught: number;
  /** Polls that ran their whole window, then slept. */
  missed: number;
  /** Host CPU burnt polling: the wake-up delay for a caught poll, the window for a missed one. */
  pollCpuNs: number;
  /** Time asleep: the delay less the window after a missed poll, the whole delay without one. */
  waitedNs: number;
  /** The windows the halts started with, 0 included (their mean is windowSumNs / halts). */
  windowSumNs: number;
  /** The window after the last halt: where the next one would start (the cap comes then). */
  finalWindowNs: number;
}

/**
 * KVM's halt polling, one vCPU, over halts whose wake-up comes `delaysNs[i]` after the HLT.
 * The window starts at `startWindowNs` (0 for a new vCPU, as in KVM).
 */
export function simulateHaltPolling(
  delaysNs: readonly number[], maxPollNs: number, params: HaltPollParams, startWindowNs = 0,
): HaltPollOutcome {
  checkNs(maxPollNs, 'maxPollNs');
  checkNs(startWindowNs, 'startWindowNs');
  checkParams(params);
  const out = emptyOutcome();
  let window = startWindowNs;
  for (const delay of delaysNs) {
    // The cap applies when a halt starts: a grow may have left the window above a lowered max.
    if (window > maxPollNs) window = maxPollNs;
    tally(out, delay, window);
    window = nextWindow(window, delay, maxPollNs, params);
  }
  out.finalWindowNs = window;
  return out;
}

/** The naive model, for comparison: every halt polls exactly `windowNs`, nothing adapts. */
export function simulateStaticPolling(delaysNs: readonly number[], windowNs: number): HaltPollOutcome {
  checkNs(windowNs, 'windowNs');
  const out = emptyOutcome();
  for (const delay of delaysNs) tally(out, delay, windowNs);
  out.finalWindowNs = windowNs;
  return out;
}

/**
 * KVM's adjustment after a halt of `haltNs` (HLT to wake-up, polling included) that started with
 * `window`: keep it when the halt fit, shrink it after a halt longer than max, grow it after one
 * shorter than max. Growth is not capped here; the next halt's start caps it.
 */
export function nextWindow(window: number, haltNs: number, maxPollNs: number, params: HaltPollParams): number {
  if (maxPollNs === 0) return 0;
  if (haltNs <= window) return window;
  if (window > 0 && haltNs > maxPollNs) {
    const shrunk = params.shrink === 0 ? 0 : Math.floor(window / params.shrink);
    return shrunk < params.growStart ? 0 : shrunk;
  }
  if (window < maxPollNs && haltNs < maxPollNs) {
    if (params.grow === 0) return window;
    return Math.max(window * params.grow, params.growStart);
  }
  return window;
}

function emptyOutcome(): HaltPollOutcome {
  return { halts: 0, polled: 0, caught: 0, missed: 0, pollCpuNs: 0, waitedNs: 0, windowSumNs: 0, finalWindowNs: 0 };
}

function tally(out: HaltPollOutcome, delay: number, window: number): void {
  if (!(delay >= 0) || !Number.isFinite(delay)) throw new RangeError(`a wake-up delay must be a finite number of ns >= 0, got ${delay}`);
  out.halts++;
  out.windowSumNs += window;
  if (window === 0) {
    out.waitedNs += delay;
  } else if (delay <= window) {
    out.polled++;
    out.caught++;
    out.pollCpuNs += delay;
  } else {
    out.polled++;
    out.missed++;
    out.pollCpuNs += window;
    out.waitedNs += delay - window;
  }
}

function checkNs(v: number, name: string): void {
  if (!Number.isFinite(v) || v < 0) throw new RangeError(`${name} must be a finite number of ns >= 0, got ${v}`);
}

function checkParams(p: HaltPollParams): void {
  for (const key of ['grow', 'growStart', 'shrink'] as const) {
    if (!Number.isInteger(p[key]) || p[key] < 0) throw new RangeError(`${key} must be an integer >= 0 (a KVM module parameter), got ${p[key]}`);
  }
}

// ---- From KVM's histograms to a distribution of wake-up delays ----

/**
 * One vCPU's KVM halt histograms over an interval (or several vCPUs' or intervals' summed), under
 * KVM's names. Bucket 0 counts 0 ns, bucket i >= 1 counts [2^(i-1), 2^i) ns; the last bucket is
 * open-ended. A histogram the host lacks is absent or null.
 */
export interface HaltHistograms {
  /** Halts that slept, from the end of polling to the wake-up. */
  halt_wait_hist?: readonly number[] | null;
  /** Polls that caught the wake-up, from the HLT to the wake-up. */
  halt_poll_success_hist?: readonly number[] | null;
  /** Polls that missed, each its window. */
  halt_poll_fail_hist?: readonly number[] | null;
  /** KVM's counter over the same interval: a better mean failed poll than the buckets give. */
  halt_poll_fail_ns?: number | null;
  /** KVM's sum of the caught polls' durations: where in their buckets the caught wake-ups lie. */
  halt_poll_success_ns?: number | null;
}

/** The sums of HaltHistograms, each a KVM counter over the same interval as the buckets. */
const SUM_KEYS = ['halt_poll_fail_ns', 'halt_poll_success_ns'] as const;

/** Several histograms summed bucket by bucket (vCPUs of one VM, or the intervals of a window). */
export function sumHaltHistograms(list: readonly HaltHistograms[]): HaltHistograms {
  const add = (key: 'halt_wait_hist' | 'halt_poll_success_hist' | 'halt_poll_fail_hist') => {
    const present = list.map((h) => h[key]).filter((x): x is readonly number[] => !!x);
    if (!present.length) return null;
    const sum = new Array<number>(Math.max(...present.map((x) => x.length))).fill(0);
    for (const x of present) x.forEach((v, i) => { sum[i]! += v; });
    return sum;
  };
  // A sum over some members only would be too small a mean: then the buckets give it.
  const sumOf = (key: (typeof SUM_KEYS)[number]) => {
    const xs = list.map((h) => h[key]).filter((x): x is number => typeof x === 'number');
    return xs.length === list.length && list.length ? xs.reduce((a, b) => a + b, 0) : null;
  };
  return {
    halt_wait_hist: add('halt_wait_hist'),
    halt_poll_success_hist: add('halt_poll_success_hist'),
    halt_poll_fail_hist: add('halt_poll_fail_hist'),
    halt_poll_fail_ns: sumOf('halt_poll_fail_ns'),
    halt_poll_success_ns: sumOf('halt_poll_success_ns'),
  };
}

/** One weighted log2 bucket of wake-up delays; a draw from it is shiftNs + a duration of the bucket. */
export interface DelayPiece {
  /** KVM's bucket: 0 is 0 ns, i >= 1 is [2^(i-1), 2^i) ns. */
  bucket: number;
  /** The histogram's last bucket: open-ended, drawn as 2^bucket ns (beyond any poll window). */
  openEnded: boolean;
  /** Added to every draw: the mean failed poll, for halts that slept after one. */
  shiftNs: number;
  /** Halts (a fraction where a bucket is split between sleeps with and without a poll first). */
  weight: number;
  /**
   * Where in its bucket a draw lies: the position u in [0, 1) of a duration 2^(bucket-1+u) has
   * density proportional to e^(tilt·u). 0 is log-uniform; negative leans to the bucket's low end.
   */
  tilt: number;
}

/** The distribution of wake-up delays (HLT to wake-up) the model draws halts from. */
export interface WakeDelayDistribution {
  /** Halts the histograms counted: caught + blocked. 0: nothing to predict. */
  halts: number;
  /** Halts a poll caught (halt_poll_success_hist's total). */
  caught: number;
  /** Halts that slept (halt_wait_hist's total). */
  blocked: number;
  /** Polls that missed (halt_poll_fail_hist's total): the blocked halts that polled first. */
  missed: number;
  /** The shift of a sleep that followed a failed poll; 0 without failed polls. */
  meanFailedPollNs: number;
  pieces: readonly DelayPiece[];
}

/**
 * The wake-up delays the histograms imply. A caught poll's duration is its delay. A sleep is timed
 * from the end of polling, so a sleep that followed a failed poll is shifted by the mean failed
 * poll. Which sleeps followed one, and how long each poll ran, is not in the histograms (they
 * keep no joint of a halt's poll and wait): each wait bucket is split by the share of sleeps that
 * polled (missed / blocked), and that share is shifted by the mean. Without polls (polling was
 * off) this is the wait histogram itself. A poll that caught at 0 ns found the wake-up already
 * pending: no window changes such a halt, and with polling off KVM counts it nowhere, so it is
 * left out (the measured share to compare with leaves it out too: caughtOf()).
 * Within a bucket (a factor of 2 wide), where a wake-up lies matters wherever a window cuts the
 * bucket: given KVM's sum of the caught polls (halt_poll_success_ns), their draws are placed to
 * match its mean (tiltFor); without it, log-uniform. The sleeps stay log-uniform: their sum
 * (halt_wait_ns) is one idle vCPU's long sleep more than the short ones that matter here.
 * A sleep's time includes the host's wake-up of the vCPU thread (KVM times it to when the thread
 * runs again), a delay a caught poll never has: delays taken from sleeps are too long by it, so a
 * prediction is sharpest for windows up to the halt-poll-ns the histograms were taken with.
 */
export function wakeDelayDistribution(h: HaltHistograms): WakeDelayDistribution {
  const wait = checkedHist(h.halt_wait_hist, 'halt_wait_hist');
  const success = checkedHist(h.halt_poll_success_hist, 'halt_poll_success_hist');
  const fail = checkedHist(h.halt_poll_fail_hist, 'halt_poll_fail_hist');
  const caught = total(success) - (success[0] ?? 0);
  const blocked = total(wait);
  const missed = total(fail);
  const failNs = h.halt_poll_fail_ns;
  if (failNs != null) checkNs(failNs, 'halt_poll_fail_ns');
  const meanFailedPollNs = missed === 0 ? 0
    : failNs != null ? failNs / missed
      : fail.reduce((s, count, i) => s + count * bucketMeanNs(i, i === fail.length - 1), 0) / missed;
  // A failed poll always ends in a sleep, so missed <= blocked; an interval's edge can cut a halt in two.
  const afterPoll = blocked === 0 ? 0 : Math.min(1, missed / blocked);
  const pieces: DelayPiece[] = [];
  const successTilt = tiltFor(success, h.halt_poll_success_ns, 'halt_poll_success_ns');
  const push = (bucket: number, openEnded: boolean, shiftNs: number, weight: number, tilt: number) => {
    if (weight > 0) pieces.push({ bucket, openEnded, shiftNs, weight, tilt });
  };
  success.forEach((count, i) => { if (i > 0) push(i, i === success.length - 1, 0, count, successTilt); });
  wait.forEach((count, i) => {
    push(i, i === wait.length - 1, meanFailedPollNs, count * afterPoll, 0);
    push(i, i === wait.length - 1, 0, count * (1 - afterPoll), 0);
  });
  return { halts: caught + blocked, caught, blocked, missed, meanFailedPollNs, pieces };
}

/**
 * What KVM measured over the same histograms, to hold a prediction against: the share of halts
 * that waited for a wake-up (a poll caught it, or the vCPU slept) whose wake-up a poll caught;
 * null without such halts. Polls that caught at 0 ns are left out, as wakeDelayDistribution does.
 */
export function caughtOf(h: HaltHistograms): number | null {
  const success = h.halt_poll_success_hist ?? [];
  const caught = total(success) - (success[0] ?? 0);
  const all = caught + total(h.halt_wait_hist ?? []);
  return all > 0 ? caught / all : null;
}

/** The mean wake-up delay of a distribution (0 when it is empty). */
export function meanWakeDelayNs(dist: WakeDelayDistribution): number {
  let weight = 0;
  let sum = 0;
  for (const p of dist.pieces) {
    weight += p.weight;
    sum += p.weight * (p.shiftNs + bucketMeanNs(p.bucket, p.openEnded, p.tilt));
  }
  return weight ? sum / weight : 0;
}

/**
 * `count` wake-up delays drawn from the distribution: a piece by weight, then a duration
 * log-uniform within its bucket (bucket 0 is 0 ns, the open-ended last one 2^bucket ns).
 */
export function sampleWakeDelays(dist: WakeDelayDistribution, count: number, seed = DEFAULT_SEED): number[] {
  if (!Number.isInteger(count) || count < 0) throw new RangeError(`count must be an integer >= 0, got ${count}`);
  const cumulative: number[] = [];
  let sum = 0;
  for (const p of dist.pieces) cumulative.push((sum += p.weight));
  if (!sum) return [];
  const random = seededRandom(seed);
  const out: number[] = [];
  for (let n = 0; n < count; n++) {
    const p = dist.pieces[firstAbove(cumulative, random() * sum)]!;
    out.push(p.shiftNs + drawFromBucket(p.bucket, p.openEnded, random(), p.tilt));
  }
  return out;
}

function drawFromBucket(bucket: number, openEnded: boolean, r: number, tilt = 0): number {
  if (bucket === 0) return 0;
  if (openEnded) return 2 ** bucket;
  // The inverse of the tilted position's distribution function (r itself when the tilt is 0).
  const u = Math.abs(tilt) < 1e-9 ? r : Math.log1p(r * Math.expm1(tilt)) / tilt;
  return 2 ** (bucket - 1 + Math.min(u, 1 - 1e-12)); // a steep tilt may round u up to the next bucket
}

/** The mean of drawFromBucket: 2^(bucket-1) E[2^u]; log-uniform (tilt 0) gives a / ln 2. */
function bucketMeanNs(bucket: number, openEnded: boolean, tilt = 0): number {
  if (bucket === 0) return 0;
  if (openEnded) return 2 ** bucket;
  return 2 ** (bucket - 1) * meanPowerOfTwo(tilt);
}

/** E[2^u] for u in [0, 1) with density proportional to e^(tilt·u): from 1 (tilt -inf) to 2 (+inf). */
function meanPowerOfTwo(tilt: number): number {
  const ratio = (z: number) => (Math.abs(z) < 1e-9 ? 1 : Math.expm1(z) / z); // (e^z - 1) / z
  return ratio(tilt + Math.LN2) / ratio(tilt);
}

/** Tilts beyond this put a bucket's whole weight at one end already; the clamp keeps e^tilt finite. */
const MAX_TILT = 60;

/**
 * The one tilt for a histogram's closed buckets that makes its mean KVM's sum / count: each
 * bucket's log-uniform position leant the same way, by one parameter (not the max-entropy
 * distribution for a mean duration, which would lean each bucket by its own width), so a sum
 * dominated by far longer halts would misplace the short ones: the caught polls' histogram is
 * bounded by the poll window, and no idle vCPU's long sleep weighs on it. Without the
 * sum, or nothing to place, 0. A sum outside what the buckets allow (an interval's edge can split
 * a halt's count and time) takes the nearest end.
 */
function tiltFor(hist: readonly number[], sumNs: number | null | undefined, name: string): number {
  if (sumNs == null) return 0;
  checkNs(sumNs, name);
  let closed = 0; // sum over closed buckets of count * 2^(bucket-1)
  let fixed = 0; // what bucket 0 and the open-ended bucket add whatever the tilt
  hist.forEach((count, i) => {
    if (i === 0 || !count) return;
    if (i === hist.length - 1) fixed += count * 2 ** i;
    else closed += count * 2 ** (i - 1);
  });
  if (closed === 0) return 0;
  const want = (sumNs - fixed) / closed; // the E[2^u] the sum asks for
  if (!(want > meanPowerOfTwo(-MAX_TILT))) return -MAX_TILT;
  if (!(want < meanPowerOfTwo(MAX_TILT))) return MAX_TILT;
  let lo = -MAX_TILT;
  let hi = MAX_TILT;
  for (let k = 0; k < 60; k++) {
    const mid = (lo + hi) / 2;
    if (meanPowerOfTwo(mid) < want) lo = mid;
    else hi = mid;
  }
  return (lo + hi) / 2;
}

/** The first index whose cumulative weight is above x (binary search). */
function firstAbove(cumulative: readonly number[], x: number): number {
  let lo = 0;
  let hi = cumulative.length - 1;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (cumulative[mid]! > x) hi = mid;
    else lo = mid + 1;
  }
  return lo;
}

function checkedHist(hist: readonly number[] | null | undefined, name: string): readonly number[] {
  if (!hist) return [];
  for (const v of hist) {
    if (!Number.isFinite(v) || v < 0) throw new RangeError(`${name} must hold counts >= 0, got ${v}`);
  }
  return hist;
}

function total(xs: readonly number[]): number {
  return xs.reduce((a, b) => a + b, 0);
}

// ---- Predictions, the curve, the recommendation ----

/** Halts simulated per prediction: enough for a share to about half a point. */
export const DEFAULT_HALTS = 20_000;
/** Any fixed seed: every candidate sees the same halts, so a curve is smooth. */
export const DEFAULT_SEED = 0x4a17;

export interface PredictOptions {
  halts?: number;
  seed?: number;
  /** The window the vCPU starts with (0: a new vCPU; max: one that was polling flat out). */
  startWindowNs?: number;
}

/** What one max halt-poll window would do, per vCPU. */
export interface HaltPollPrediction {
  maxPollNs: number;
  /** Halts simulated; 0 when the histograms had none (every share is then 0: nothing predicted). */
  halts: number;
  /** Wake-ups a poll catches, of all halts. */
  caughtShare: number;
  /** Halts that poll at all (the window was above 0). */
  attemptedShare: number;
  /** Host CPU spent polling per second of wall time, as a fraction of one CPU. */
  pollCpuShare: number;
  /** The mean window a halt starts with (0 included). */
  meanWindowNs: number;
}

/**
 * Halts per second per vCPU of a distribution taken over `seconds` of `vcpus` vCPUs (summed): the
 * rate a prediction's CPU share is per second of. The halts are the distribution's (polls caught
 * at 0 ns left out, as everywhere here).
 */
export function haltsPerSecondOf(dist: WakeDelayDistribution, seconds: number, vcpus: number): number {
  return seconds > 0 ? dist.halts / seconds / Math.max(1, vcpus) : 0;
}

export const NOTHING_TO_PREDICT = 'no halts were recorded, so there is nothing to predict';

/** KVM's adaptive polling under `maxPollNs`, on halts drawn from `dist` at `haltsPerSecond` per vCPU. */
export function predictHaltPolling(
  dist: WakeDelayDistribution, maxPollNs: number, params: HaltPollParams, haltsPerSecond: number, opts: PredictOptions = {},
): HaltPollPrediction {
  const delays = sampleWakeDelays(dist, opts.halts ?? DEFAULT_HALTS, opts.seed);
  return predictionOf(maxPollNs, simulateHaltPolling(delays, maxPollNs, params, opts.startWindowNs), haltsPerSecond);
}

/** The same prediction under the naive static model: every halt polls exactly `windowNs`. */
export function predictStaticPolling(
  dist: WakeDelayDistribution, windowNs: number, haltsPerSecond: number, opts: Omit<PredictOptions, 'startWindowNs'> = {},
): HaltPollPrediction {
  const delays = sampleWakeDelays(dist, opts.halts ?? DEFAULT_HALTS, opts.seed);
  return predictionOf(windowNs, simulateStaticPolling(delays, windowNs), haltsPerSecond);
}

/** 0, then 1 µs doubling up to ~2 ms (2.048 ms), and the host's current value when given. */
export function haltPollCandidates(currentNs?: number): number[] {
  const values = [0, ...Array.from({ length: 12 }, (_, i) => 1000 * 2 ** i)];
  if (currentNs !== undefined) values.push(currentNs);
  return [...new Set(values)].sort((a, b) => a - b);
}

/** One prediction per candidate max window, smallest first, all on the same drawn halts. */
export function haltPollCurve(
  dist: WakeDelayDistribution, candidatesNs: readonly number[], params: HaltPollParams, haltsPerSecond: number, opts: PredictOptions = {},
): HaltPollPrediction[] {
  const delays = sampleWakeDelays(dist, opts.halts ?? DEFAULT_HALTS, opts.seed);
  return [...new Set(candidatesNs)].sort((a, b) => a - b)
    .map((max) => predictionOf(max, simulateHaltPolling(delays, max, params, opts.startWindowNs), haltsPerSecond));
}

function predictionOf(maxPollNs: number, o: HaltPollOutcome, haltsPerSecond: number): HaltPollPrediction {
  if (!Number.isFinite(haltsPerSecond) || haltsPerSecond < 0) throw new RangeError(`haltsPerSecond must be a finite number >= 0, got ${haltsPerSecond}`);
  if (o.halts === 0) return { maxPollNs, halts: 0, caughtShare: 0, attemptedShare: 0, pollCpuShare: 0, meanWindowNs: 0 };
  return {
    maxPollNs,
    halts: o.halts,
    caughtShare: o.caught / o.halts,
    attemptedShare: o.polled / o.halts,
    // pollCpuNs over the wall time the halts span: halts / haltsPerSecond seconds.
    pollCpuShare: (o.pollCpuNs / o.halts) * haltsPerSecond / 1e9,
    meanWindowNs: o.windowSumNs / o.halts,
  };
}

export type HaltPollGoal = 'latency' | 'cpu';

export interface HaltPollRecommendation {
  /** The max halt-poll window to set; null when there was nothing to predict. */
  valueNs: number | null;
  /** The prediction for it; null when there was nothing to predict. */
  point: HaltPollPrediction | null;
  goal: HaltPollGoal;
  /** One sentence a user can read. */
  why: string;
}

/** Catch shares this close to the best count as the best: the smaller window wins. */
export const LATENCY_TOLERANCE = 0.02;
/** The CPU budget of the 'cpu' goal: a twentieth of a CPU per vCPU. */
export const DEFAULT_CPU_BUDGET = 0.05;

/**
 * 'latency': the smallest window catching within LATENCY_TOLERANCE of the most any candidate
 * catches. 'cpu': the window catching the most for at most `cpuBudget` of a CPU per vCPU; 0 when
 * nothing within the budget catches anything.
 */
export function recommendHaltPoll(
  curve: readonly HaltPollPrediction[], goal: HaltPollGoal, cpuBudget = DEFAULT_CPU_BUDGET,
): HaltPollRecommendation {
  if (!curve.length || curve.every((p) => p.halts === 0)) return { valueNs: null, point: null, goal, why: `${capitalized(NOTHING_TO_PREDICT)}.` };
  const points = [...curve].sort((a, b) => a.maxPollNs - b.maxPollNs);
  const off = points.find((p) => p.maxPollNs === 0) ?? { ...points[0]!, maxPollNs: 0, caughtShare: 0, attemptedShare: 0, pollCpuShare: 0, meanWindowNs: 0 };
  const largest = points.at(-1)!.maxPollNs;
  if (goal === 'latency') {
    const best = Math.max(...points.map((p) => p.caughtShare));
    const pick = [off, ...points].find((p) => p.caughtShare >= best - LATENCY_TOLERANCE)!;
    const why = pick.maxPollNs > 0 ? `${sentenceOf(pick)}, as many as any longer window to within ${Math.round(LATENCY_TOLERANCE * 100)} points.`
      : best === 0 ? `No window up to ${durationText(largest)} catches a wake-up, so polling is best left off.`
        : `No window up to ${durationText(largest)} catches more than ${shareText(best)} of wake-ups, so polling is best left off.`;
    return { valueNs: pick.maxPollNs, point: pick, goal, why };
  }
  const fits = points.filter((p) => p.pollCpuShare <= cpuBudget && p.caughtShare > 0)
    .sort((a, b) => b.caughtShare - a.caughtShare || a.pollCpuShare - b.pollCpuShare || a.maxPollNs - b.maxPollNs);
  const pick = fits[0];
  if (!pick) {
    return {
      valueNs: 0, point: off, goal,
      why: `No window up to ${durationText(largest)} catches a wake-up for at most ${shareText(cpuBudget)} of a CPU per vCPU, so polling is best left off.`,
    };
  }
  return { valueNs: pick.maxPollNs, point: pick, goal, why: `${sentenceOf(pick)}, the most within a budget of ${shareText(cpuBudget)} of a CPU.` };
}

function sentenceOf(p: HaltPollPrediction): string {
  return `Polling up to ${durationText(p.maxPollNs)} would catch ${shareText(p.caughtShare)} of wake-ups for ${shareText(p.pollCpuShare)} of a CPU per vCPU`;
}

/** A duration in three significant digits: "512 ns", "65.5 µs", "2.05 ms", "1.07 s" (the app's one way). */
export function durationText(ns: number): string {
  if (ns >= 1_000_000_000) return `${+(ns / 1_000_000_000).toPrecision(3)} s`;
  if (ns >= 1_000_000) return `${+(ns / 1_000_000).toPrecision(3)} ms`;
  if (ns >= 1_000) return `${+(ns / 1_000).toPrecision(3)} µs`;
  return `${Math.round(ns)} ns`;
}

/** Two significant digits: "71 %", "3.1 %", "0.42 %". */
function shareText(x: number): string {
  return `${+(x * 100).toPrecision(2)} %`;
}

function capitalized(s: string): string {
  return s.charAt(0).toUpperCase() + s.slice(1);
}

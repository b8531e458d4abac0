// The halt-poll prediction (experiments/halt-poll-model.ts) against what KVM then does, on a guest
// whose wake-ups are known: the probe's timer scenario in live mode (bursts of one-shot LAPIC
// timers PERIOD µs apart, HLT in between, then a sleep to the next burst: short halts and long
// ones, which make KVM's window grow and shrink). In one VM, alternately: polling up to a window
// above the scenario's short halts (512 µs), where the polls that catch time the wake-ups
// exactly, and polling up to a candidate window, where KVM counts the polls that caught a
// wake-up. The prediction from the wide phases, pooled, is held against the candidate phases'
// measurement, pooled (a phase alone varies with the emulated host's hiccups). The histograms
// come with KVM's sum of the caught polls, as the app's do (it places them within their buckets).
// Error bound: 0.35 of the caught share, generous for the nested lane's one-CPU L1 under TCG,
// which wakes a sleeping vCPU thread late: sleeps' times are too long by it, and with that
// kernel's halt_poll_ns_shrink of 0 each one drawn over the max stops polling for the next few
// halts, so the prediction comes out 0.15-0.25 under the measured share on an idle host, and was
// seen 0.32 under on a loaded one (docs/experiments.md). Histograms taken with polling off are a
// worse base still: every halt's time then includes that wake-up.
import { afterEach, describe, expect, it } from 'vitest';
import { StatsReader } from '../../native/kvm/stats.ts';
import {
  caughtOf, haltPollCandidates, haltPollCurve, haltPollParamsOf, predictStaticPolling, sumHaltHistograms, wakeDelayDistribution, type HaltHistograms, type HaltPollParams,
} from '../../electron/experiments/halt-poll-model.ts';
import { hostHaltPollParams } from '../../electron/vmm/host.ts';
import { kvmAvailable, startProbe, type Watched } from '../support/probe.ts';
import { hardwareKvm, NEEDS_HARDWARE } from '../support/kvm-semantics.ts';
import { guestScaled, scaled } from '../support/time-scale.ts';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const ERROR_BOUND = 0.35;
/** The window of the phases the predictions are made from. */
const WIDE_NS = 512_000;
const PAIRS = 5;
/** Halts per phase: enough for a share to a few points. */
const HALTS_PER_PHASE = 1000;

type Snapshot = { t: number; wait: number[]; success: number[]; fail: number[]; failNs: number; successNs: number };

describe.skipIf(!kvmAvailable)('halt-poll prediction against KVM', () => {
  let probe: Watched | undefined;
  afterEach(async () => {
    await probe?.vm.stop();
    probe = undefined;
  });

  it('predicts the share of wake-ups a poll window catches, from the histograms of a wider one', async () => {
    if (!hardwareKvm()) {
      console.log(`skipped: ${NEEDS_HARDWARE} (on the PVM hosts here polls were seen to end within 512 ns, cut short at once, so no model of the window holds)`);
      return;
    }
    probe = await startProbe({ cpus: 1, append: 'scenario=timer live=1 period_us=200 burst=40 interval_ms=20', config: { haltPollNs: WIDE_NS } });
    await probe.waitForEvent('boot');
    const reader = StatsReader.open(probe.vm.statsFds().vcpus[0]!);
    if (!reader.has('halt_wait_hist') || !reader.has('halt_poll_success_hist')) {
      throw new Error("this KVM has binary stats but no halt histograms, which the nested lane's L1 kernel (Linux 6.1) has");
    }
    const params: HaltPollParams = haltPollParamsOf(hostHaltPollParams());
    const snap = (): Snapshot => {
      const s = reader.sample();
      const counts = (name: string) => s.histogram(name).buckets.map((b) => b.count);
      return { t: performance.now(), wait: counts('halt_wait_hist'), success: counts('halt_poll_success_hist'), fail: counts('halt_poll_fail_hist'), failNs: s.value(reader.field('halt_poll_fail_ns')),
        successNs: s.value(reader.field('halt_poll_success_ns')) };
    };
    const delta = (a: Snapshot, b: Snapshot): HaltHistograms & { seconds: number } => ({
      halt_wait_hist: b.wait.map((n, i) => n - a.wait[i]!),
      halt_poll_success_hist: b.success.map((n, i) => n - a.success[i]!),
      halt_poll_fail_hist: b.fail.map((n, i) => n - a.fail[i]!),
      halt_poll_fail_ns: b.failNs - a.failNs,
      halt_poll_success_ns: b.successNs - a.successNs,
      seconds: (b.t - a.t) / 1000,
    });
    const total = (h: readonly number[] | null | undefined) => (h ?? []).reduce((s, n) => s + n, 0);
    /** One phase at `ns`: from the knob's change until HALTS_PER_PHASE halts waited for a wake-up. */
    const phase = async (ns: number) => {
      probe!.vm.setHaltPollNs(ns);
      await sleep(50); // the window left from the last phase settles on its first halts
      const from = snap();
      const deadline = performance.now() + guestScaled(30_000);
      let d = delta(from, snap());
      while (total(d.halt_wait_hist) + total(d.halt_poll_success_hist) < HALTS_PER_PHASE && performance.now() < deadline) {
        await sleep(100);
        d = delta(from, snap());
      }
      return d;
    };

    const rows: string[] = [];
    const wides: HaltHistograms[] = [];
    const ons: HaltHistograms[] = [];
    let wideSeconds = 0;
    let candidate: number | undefined;
    for (let pair = 0; pair < PAIRS; pair++) {
      const wide = await phase(WIDE_NS);
      const dist = wakeDelayDistribution(wide);
      expect(dist.halts, 'the wide phase saw halts that waited').toBeGreaterThan(50);
      // The candidate, below the wide window: the one the first curve says catches about half.
      candidate ??= haltPollCurve(dist, haltPollCandidates(), params, dist.halts / wide.seconds)
        .filter((p) => p.maxPollNs > 0 && p.maxPollNs < WIDE_NS).sort((a, b) => Math.abs(a.caughtShare - 0.5) - Math.abs(b.caughtShare - 0.5))[0]!.maxPollNs;
      const on = await phase(candidate);
      wides.push(wide);
      ons.push(on);
      wideSeconds += wide.seconds;
      const predicted = haltPollCurve(dist, [candidate], params, dist.halts / wide.seconds)[0]!.caughtShare;
      rows.push(`pair ${pair}: predicted ${predicted.toFixed(3)}, measured ${caughtOf(on)!.toFixed(3)}`);
    }
    const pooled = wakeDelayDistribution(sumHaltHistograms(wides));
    const predicted = haltPollCurve(pooled, [candidate!], params, pooled.halts / wideSeconds)[0]!.caughtShare;
    const naive = predictStaticPolling(pooled, candidate!, pooled.halts / wideSeconds).caughtShare;
    // The same from the buckets alone (log-uniform within each), as before KVM's sums placed them.
    const bucketsOnly = wakeDelayDistribution({ ...sumHaltHistograms(wides), halt_poll_success_ns: null });
    const unplaced = haltPollCurve(bucketsOnly, [candidate!], params, bucketsOnly.halts / wideSeconds)[0]!.caughtShare;
    const measured = caughtOf(sumHaltHistograms(ons))!;
    // For the record: the model at the wide window itself, against what KVM measured there. (The
    // change between the two windows is no better a check in L1: there polling wider has been
    // seen to catch less, as it takes the only CPU from the tasks a wake-up waits for.)
    const atWide = haltPollCurve(pooled, [WIDE_NS], params, pooled.halts / wideSeconds)[0]!.caughtShare;
    const measuredWide = caughtOf(sumHaltHistograms(wides))!;
    const summary = `halt-poll-ns ${candidate}: predicted ${predicted.toFixed(3)} (buckets alone ${unplaced.toFixed(3)}, static model ${naive.toFixed(3)}), measured ${measured.toFixed(3)};`
      + ` at ${WIDE_NS}: predicted ${atWide.toFixed(3)}, measured ${measuredWide.toFixed(3)}`
      + ` (grow ${params.grow}, grow_start ${params.growStart}, shrink ${params.shrink}; ${rows.join('; ')})`;
    console.log(`halt-poll prediction: ${summary}`);
    expect(Math.abs(predicted - measured), summary).toBeLessThanOrEqual(ERROR_BOUND);
  }, scaled(240_000));
});

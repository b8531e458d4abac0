// The halt-poll prediction (experiments/halt-poll-model.ts) against what KVM then does, on a guest
// whose wake-ups are known: the probe's timer scenario in live mode (bursts of one-shot LAPIC
// timers PERIOD µs apart, HLT in between, then a sleep to the next burst: short halts and long
// ones, which make KVM's window grow and shrink). In one VM, alternately: polling off, where
// halt_wait_hist is the distribution of wake-up delays, and polling up to a candidate window,
// where KVM counts the polls that caught a wake-up. The prediction from each off phase is held
// against the next on phase's measurement. Error bound: 0.2 of the caught share (stated in
// docs/experiments.md; generous because the nested lane's L1 is emulated and its timer lateness
// varies from phase to phase).
import { afterEach, describe, expect, it } from 'vitest';
import { StatsReader } from '../../native/kvm/stats.ts';
import {
  haltPollCandidates, haltPollCurve, haltPollParamsOf, predictStaticPolling, wakeDelayDistribution, type HaltHistograms, type HaltPollParams,
} from '../../electron/experiments/halt-poll-model.ts';
import { hostHaltPollParams } from '../../electron/vmm/host.ts';
import { kvmAvailable, startProbe, type Watched } from '../support/probe.ts';
import { hardwareKvm, NEEDS_HARDWARE } from '../support/kvm-semantics.ts';
import { guestScaled, scaled } from '../support/time-scale.ts';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const ERROR_BOUND = 0.2;
const PAIRS = 3;
/** Halts per phase: enough for a share to a few points. */
const HALTS_PER_PHASE = 600;

type Snapshot = { t: number; wait: number[]; success: number[]; fail: number[]; failNs: number };

describe.skipIf(!kvmAvailable)('halt-poll prediction against KVM', () => {
  let probe: Watched | undefined;
  afterEach(async () => {
    await probe?.vm.stop();
    probe = undefined;
  });

  it('predicts the share of wake-ups a poll window catches, from the histograms with polling off', async () => {
    if (!hardwareKvm()) {
      console.log(`skipped: ${NEEDS_HARDWARE} (on the PVM hosts here polls were seen to end within 512 ns, cut short at once, so no model of the window holds)`);
      return;
    }
    probe = await startProbe({ cpus: 1, append: 'scenario=timer live=1 period_us=200 burst=40 interval_ms=20', config: { haltPollNs: 0 } });
    await probe.waitForEvent('boot');
    const reader = StatsReader.open(probe.vm.statsFds().vcpus[0]!);
    if (!reader.has('halt_wait_hist') || !reader.has('halt_poll_success_hist')) {
      throw new Error('this KVM has no halt histograms (Linux 5.18+): the nested lane\'s L1 kernel should');
    }
    const params: HaltPollParams = haltPollParamsOf(hostHaltPollParams());
    const snap = (): Snapshot => {
      const s = reader.sample();
      const counts = (name: string) => s.histogram(name).buckets.map((b) => b.count);
      return { t: performance.now(), wait: counts('halt_wait_hist'), success: counts('halt_poll_success_hist'), fail: counts('halt_poll_fail_hist'), failNs: s.value(reader.field('halt_poll_fail_ns')) };
    };
    const delta = (a: Snapshot, b: Snapshot): HaltHistograms & { seconds: number } => ({
      halt_wait_hist: b.wait.map((n, i) => n - a.wait[i]!),
      halt_poll_success_hist: b.success.map((n, i) => n - a.success[i]!),
      halt_poll_fail_hist: b.fail.map((n, i) => n - a.fail[i]!),
      halt_poll_fail_ns: b.failNs - a.failNs,
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
        await sleep(50);
        d = delta(from, snap());
      }
      return d;
    };

    const rows: string[] = [];
    const errors: number[] = [];
    let candidate: number | undefined;
    for (let pair = 0; pair < PAIRS; pair++) {
      const off = await phase(0);
      expect(total(off.halt_poll_success_hist) + total(off.halt_poll_fail_hist), 'no poll with halt-poll-ns=0').toBe(0);
      const dist = wakeDelayDistribution(off);
      expect(dist.halts, 'the off phase saw halts that waited').toBeGreaterThan(50);
      const haltsPerS = dist.halts / off.seconds;
      // The candidate: the window the first curve says catches about half (the most telling test).
      const curve = haltPollCurve(dist, haltPollCandidates(), params, haltsPerS);
      candidate ??= curve.filter((p) => p.maxPollNs > 0).sort((a, b) => Math.abs(a.caughtShare - 0.5) - Math.abs(b.caughtShare - 0.5))[0]!.maxPollNs;
      const predicted = curve.find((p) => p.maxPollNs === candidate)
        ?? haltPollCurve(dist, [candidate], params, haltsPerS)[0]!;
      const on = await phase(candidate);
      const caught = total(on.halt_poll_success_hist);
      const measured = caught / (caught + total(on.halt_wait_hist));
      const naive = predictStaticPolling(dist, candidate, haltsPerS).caughtShare;
      errors.push(Math.abs(predicted.caughtShare - measured));
      rows.push(`pair ${pair}: halt-poll-ns ${candidate}: predicted ${predicted.caughtShare.toFixed(3)} (static model ${naive.toFixed(3)}), measured ${measured.toFixed(3)} of ${caught + total(on.halt_wait_hist)} halts`);
    }
    console.log(`halt-poll prediction (grow ${params.grow}, grow_start ${params.growStart}, shrink ${params.shrink}):\n  ${rows.join('\n  ')}`);
    // The median pair within the bound (one phase may meet a stall of the emulated host).
    errors.sort((a, b) => a - b);
    expect(errors[Math.floor(errors.length / 2)], rows.join('; ')).toBeLessThanOrEqual(ERROR_BOUND);
  }, scaled(240_000));
});

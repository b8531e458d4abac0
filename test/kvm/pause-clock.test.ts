// A pause stops the guest's kvm-clock with its vCPUs, as QEMU's stop/cont does (vm.ts,
// freezeGuestClock): the probe guest reads its kvm-clock and its TSC side by side
// (scenario=kvmclock) while the VM is paused and resumed; across the pause the TSC moves on by
// the pause and kvm-clock does not. (A Linux guest's uptime across a pause: linux-hw.test.ts.)
import { afterEach, describe, expect, it } from 'vitest';
import type { AgentEvent } from '../../electron/vmm/agent/line-protocol.ts';
import { kvmAvailable, startProbe, type Watched } from '../support/probe.ts';
import { scaled } from '../support/time-scale.ts';

let running: Watched | undefined;
afterEach(async () => {
  if (running && running.vm.state !== 'stopped') await running.vm.stop();
  running = undefined;
});

const readings = (g: Watched) => g.events.filter((e) => e.event === 'kvmclock');

async function until(check: () => boolean, ms: number, what: string): Promise<void> {
  const end = performance.now() + ms;
  while (!check()) {
    if (performance.now() > end) throw new Error(`no ${what} within ${ms / 1000} s`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe.skipIf(!kvmAvailable)('pause and the guest\'s clock (probe guest on real KVM)', () => {
  it('across a pause the guest\'s TSC moves on by the pause and its kvm-clock does not', async () => {
    const PAUSE_MS = 1000;
    const g = running = await startProbe({ append: `scenario=kvmclock ms=${scaled(6000)} period_ms=50` });
    await until(() => readings(g).length >= 3, scaled(20_000), 'three kvm-clock readings');
    await g.vm.pause();
    const pausedAt = readings(g).length;
    await new Promise((r) => setTimeout(r, PAUSE_MS));
    expect(readings(g).length, 'a paused guest says nothing').toBe(pausedAt);
    g.vm.resume();
    await until(() => readings(g).length >= pausedAt + 3, scaled(20_000), 'kvm-clock readings after the resume');
    // The widest gap between two readings in a row is the pause's.
    const r = readings(g);
    const gaps = r.slice(1).map((b, i) => ({ tsc: b.fields.tsc_ns! - r[i]!.fields.tsc_ns!, kvm: b.fields.ns! - r[i]!.fields.ns! }));
    const pause = gaps.reduce((a, b) => (b.tsc > a.tsc ? b : a));
    console.log(`pause-clock: across a ${PAUSE_MS} ms pause the TSC moved ${(pause.tsc / 1e6).toFixed(1)} ms, kvm-clock ${(pause.kvm / 1e6).toFixed(1)} ms`);
    expect(pause.tsc / 1e6, 'the TSC ran through the pause').toBeGreaterThan(PAUSE_MS * 0.9);
    expect(pause.kvm / 1e6, 'kvm-clock stood still while paused').toBeLessThan(pause.tsc / 1e6 - PAUSE_MS * 0.5);
    expect(pause.kvm).toBeGreaterThan(0);
    // Everywhere else the two clocks agree: kvm-clock itself was read right.
    const others = gaps.filter((x) => x !== pause);
    for (const x of others) expect(Math.abs(x.kvm - x.tsc) / 1e6, JSON.stringify(x)).toBeLessThan(Math.max(5, x.tsc / 1e6 * 0.1));
  }, scaled(90_000));

  it('without a pause the guest\'s two clocks agree', async () => {
    const g = running = await startProbe({ append: 'scenario=kvmclock ms=400 period_ms=50' });
    const exit = await g.vm.ended;
    expect(exit.kind).toBe('poweroff');
    const r = readings(g);
    expect(r.length).toBeGreaterThanOrEqual(4);
    const span = (f: (e: AgentEvent) => number) => f(r.at(-1)!) - f(r[0]!);
    expect(span((e) => e.fields.ns!) / span((e) => e.fields.tsc_ns!)).toBeGreaterThan(0.9);
    expect(span((e) => e.fields.ns!) / span((e) => e.fields.tsc_ns!)).toBeLessThan(1.1);
  }, scaled(60_000));
});

// The ACPI PM timer (devices/pm-timer.ts): a 24-bit count at 3.579545 MHz of the host's monotonic
// clock. Its rate is measured against that same clock (process.hrtime), never against a fixed
// wall-clock expectation; the wrap is checked with a clock the test sets.
import { describe, expect, it } from 'vitest';
import { attachDevices, createDeviceState, versionedBoard, type BoardConfig, type DeviceIo } from '../../electron/vmm/devices/board.ts';
import { PM_TIMER_HZ, PM_TIMER_MASK, PmTimer, pmTimerTicks } from '../../electron/vmm/devices/pm-timer.ts';

const WRAP = PM_TIMER_MASK + 1;
/** Ticks from `a` to `b` on a 24-bit counter (one wrap at most between them). */
const delta = (a: number, b: number): number => (b - a + WRAP) % WRAP;

describe('ACPI PM timer', () => {
  it('counts ticks of 3.579545 MHz exactly, from seconds and nanoseconds', () => {
    expect(pmTimerTicks(0, 0)).toBe(0);
    expect(pmTimerTicks(0, 999_999_999)).toBe(PM_TIMER_HZ - 1);
    expect(pmTimerTicks(1, 0)).toBe(PM_TIMER_HZ);
    expect(pmTimerTicks(2, 500_000_000)).toBe(Math.floor(2.5 * PM_TIMER_HZ));
    // A host up for years: still exact (the sum stays far below 2^53), low 24 bits only.
    const sec = 4_000_000_000;
    expect(pmTimerTicks(sec, 123_456_789)).toBe(Number((BigInt(sec) * BigInt(PM_TIMER_HZ) + 123_456_789n * BigInt(PM_TIMER_HZ) / 1_000_000_000n) & 0xffffffn));
  });

  it('wraps at 2^24: the count past 0xffffff starts again at 0, and stays within 24 bits', () => {
    // 2^24 ticks take 16777216 / 3579545 s = 4.687 s: find the nanosecond at which the count wraps.
    const wrapNs = Math.ceil((WRAP * 1e9) / PM_TIMER_HZ);
    let now: [number, number] = [4, wrapNs - 4e9 - 1000];
    const t = new PmTimer(() => now);
    const before = t.value();
    expect(before).toBeGreaterThan(PM_TIMER_MASK - 10);
    now = [4, wrapNs - 4e9];
    expect(t.value()).toBe(0);
    now = [4, wrapNs - 4e9 + 1000];
    const after = t.value();
    expect(after).toBeLessThan(10);
    expect(delta(before, after)).toBe(Math.floor((wrapNs + 1000) * PM_TIMER_HZ / 1e9) - Math.floor((wrapNs - 1000) * PM_TIMER_HZ / 1e9));
    for (let s = 0; s < 20; s++) expect(new PmTimer(() => [s, 777]).value()).toBeLessThanOrEqual(PM_TIMER_MASK);
  });

  it('is monotonic on the host clock: successive reads never step back (modulo the wrap)', () => {
    const t = new PmTimer();
    let prev = t.value();
    let moved = 0;
    for (let i = 0; i < 100_000; i++) {
      const v = t.value();
      const d = delta(prev, v);
      expect(d).toBeLessThan(WRAP / 2); // a step back would look like almost a whole wrap
      moved += d;
      prev = v;
    }
    expect(moved).toBeGreaterThan(0);
  });

  it('runs at 3.579545 MHz measured against the clock it derives from', () => {
    const t = new PmTimer();
    const ns = () => process.hrtime.bigint();
    // Bracket each reading by two clock readings, so the error is bounded by the bracket, not guessed.
    const sample = () => {
      const a = ns();
      const v = t.value();
      const b = ns();
      return { v, at: Number(a + b) / 2, halfWidth: Number(b - a) / 2 };
    };
    const first = sample();
    const spin = ns() + 20_000_000n; // 20 ms: far less than one wrap (4.69 s)
    while (ns() < spin);
    const last = sample();
    const elapsedNs = last.at - first.at;
    const ticks = delta(first.v, last.v);
    const uncertaintyNs = first.halfWidth + last.halfWidth;
    // Expected ticks within the bracket's uncertainty, plus one tick for each floor.
    const lo = ((elapsedNs - uncertaintyNs) * PM_TIMER_HZ) / 1e9 - 2;
    const hi = ((elapsedNs + uncertaintyNs) * PM_TIMER_HZ) / 1e9 + 2;
    expect(ticks).toBeGreaterThanOrEqual(Math.floor(lo));
    expect(ticks).toBeLessThanOrEqual(Math.ceil(hi));
  });

  it('a 32-bit read gives the count; narrower and offset reads give its bytes', () => {
    const t = new PmTimer(() => [0, 500_000_000]);
    const v = Math.floor(PM_TIMER_HZ / 2);
    expect(t.read(0, 4)).toBe(v);
    expect(t.read(1, 1) & 0xff).toBe((v >>> 8) & 0xff);
    expect(t.read(3, 1)).toBe(0); // the top byte: 24 bits only
  });
});

describe('ACPI PM timer on the board', () => {
  const nop = () => {};
  const io: DeviceIo = { emitConsole: nop, emitAgent: nop, setIrq: nop, onPowerOff: nop, onDebugExit: nop, onReset: nop };

  it('answers at 0x608 without the bus lock on a board with it (unhalt-1.2); the port is empty otherwise', () => {
    const board: BoardConfig = { virtio: [], ...versionedBoard({ pmTimer: true }, { cpus: 1, ramBytes: 0 }) };
    const sab = createDeviceState(board);
    const bus = attachDevices(sab, io, board);
    // Held by someone else: a locked device would wait here forever; the timer answers.
    const held = attachDevices(sab, io, board);
    const v = held.withLock(() => bus.read(0x608, 4));
    expect(v).toBeLessThanOrEqual(PM_TIMER_MASK);
    expect(delta(v, bus.read(0x608, 4))).toBeLessThan(WRAP / 2);
    const old = attachDevices(createDeviceState(), io, { virtio: [] });
    expect(old.read(0x608, 4)).toBe(0xffffffff);
  });
});

// The Linux guest's own idle and steal time, from its agent (docs/guest-contract.md): the
// `@u1 gidle` lines (one per vCPU at most once a second, differences since the last) as rows, and
// the cpuidle facts of its `ready` / `info` line. Pure: the node tests feed it without a browser.
import { MAX_CPUS } from '../../../electron/vmm/config/limits.ts';
import { attributeShare } from './halt-wait.ts';
import { Rows } from './device-rows.ts';

/**
 * Per-vCPU columns (`${name}#${cpu}`; the guest's cpu N is vCPU N): the shares of each interval
 * the guest spent in its POLL states, in its other idle states (halted) and stolen, and its
 * entries into those states per second.
 */
export const GUEST_IDLE_COLUMNS = ['guest_poll_share', 'guest_halt_share', 'steal_share', 'guest_polls_per_s', 'guest_halts_per_s'] as const;

/** Longest interval or time a line may report (an hour): beyond it the line is a broken guest's. */
const MAX_NS = 3.6e12;
/** KVM_FEATURE_STEAL_TIME in CPUID 0x40000001 EAX (the ready line's kvm_features). */
const STEAL_TIME_BIT = 1 << 5;

/** What the agent's ready / info line says about the guest's idle. */
export interface GuestIdleFacts {
  /** A cpuidle driver runs; null where the agent is too old to say (no gidle lines either). */
  cpuidle: boolean | null;
  /** That driver is cpuidle-haltpoll. */
  haltpoll: boolean;
  /** The haltpoll governor decides (only then does guest_halt_poll_ns apply). */
  haltpollGov: boolean;
  /** haltpoll.guest_halt_poll_ns; null where the kernel has no such parameter. */
  guestHaltPollNs: number | null;
  /** The guest has kvm-steal-time: without it its steal is always 0 and says nothing. */
  stealTime: boolean;
}

type Fields = Readonly<Record<string, unknown>>;

/** The facts of a ready / info line (null for any other event). */
export function guestIdleFacts(event: string, f: Fields): GuestIdleFacts | null {
  if (event !== 'ready' && event !== 'info') return null;
  const haltpoll = flag(f.haltpoll) === true;
  const features = f.kvm_features;
  const gns = f.guest_halt_poll_ns;
  return {
    cpuidle: flag(f.cpuidle) ?? (haltpoll ? true : null),
    haltpoll,
    haltpollGov: flag(f.haltpoll_gov) === true,
    guestHaltPollNs: isNs(gns) ? gns : null,
    stealTime: f.kvm === 0 ? false : isCount(features) ? (features & STEAL_TIME_BIT) !== 0 : true,
  };
}

/** The guest's idle rows: one row per probe round, the lines of its vCPUs side by side. */
export class GuestIdleRows {
  readonly rows = new Rows();
  /** The newest ready / info line's facts. */
  facts: GuestIdleFacts | null = null;
  /** x of the row the current round's lines join; NaN after a break. */
  private roundX = NaN;

  /**
   * A guest metric at x (epoch seconds): a gidle line becomes a row, a ready / info line the facts,
   * and a (re)started agent or probe breaks the line (its next lines count from there). Whether
   * anything changed.
   */
  addMetric(event: string, f: Fields, x: number): boolean {
    if (event === 'gidle') return this.add(f, x);
    if (event === 'probe' || event === 'ready') this.breakLine();
    const facts = guestIdleFacts(event, f);
    if (facts) this.facts = facts;
    return facts !== null;
  }

  /** One gidle line at x (epoch seconds); false when it is not believable (nothing is kept of it). */
  add(f: Fields, x: number): boolean {
    const cpu = f.cpu;
    const interval = f.interval_ns;
    if (!isCount(cpu) || cpu >= MAX_CPUS || !isNs(interval) || interval <= 0) return false;
    const row = this.rowFor(cpu, x, interval / 1e9);
    const r = this.rows;
    const intervalCol = r.col(`guest_interval_ns#${cpu}`);
    // Idle time is added when a state is left, steal at ticks: a long halt lands in one line, so
    // each is spread back over the intervals it covered (halt-wait.ts), never above 100 %.
    const share = (key: string, ns: unknown) => {
      if (isNs(ns)) attributeShare(r.col(`${key}#${cpu}`), intervalCol, row, ns, interval);
    };
    const perSec = (key: string, count: unknown) => {
      if (isCount(count) && count <= interval) r.col(`${key}#${cpu}`)[row] = count / (interval / 1e9);
    };
    // Without a cpuidle driver the guest halts uncounted: its zeros are no measurement.
    if (f.cpuidle !== 0) {
      share('guest_poll_share', f.poll_ns);
      share('guest_halt_share', f.halt_ns);
      perSec('guest_polls_per_s', f.poll_count);
      perSec('guest_halts_per_s', f.halt_count);
    }
    if (this.facts?.stealTime !== false) share('steal_share', f.steal_ns);
    intervalCol[row] = interval;
    return true;
  }

  /** The probe or the agent (re)started: nothing joins or is spread across this point. */
  breakLine(): void {
    const r = this.rows;
    if (r.length) r.push(r.x[r.length - 1]! + 5e-4);
    this.roundX = NaN;
  }

  clear(): void {
    this.rows.clear();
    this.facts = null;
    this.roundX = NaN;
  }

  /** The round's row for this cpu's line, or a new one (after a gap row where the probe was off). */
  private rowFor(cpu: number, x: number, intervalSec: number): number {
    const r = this.rows;
    const n = r.length;
    const last = n ? r.x[n - 1]! : -Infinity;
    // A round's lines come within milliseconds; a cpu already in the row starts the next round.
    const taken = !Number.isNaN(r.cols.get(`guest_interval_ns#${cpu}`)?.[n - 1] ?? NaN);
    if (n && last === this.roundX && Math.abs(x - last) < intervalSec / 2 && !taken) return n - 1;
    if (n && x - last > 2 * intervalSec + 1) r.push(last + 5e-4);
    const prev = r.length ? r.x[r.length - 1]! : -Infinity;
    const at = x > prev ? x : prev + 1e-3;
    this.roundX = at;
    return r.push(at);
  }
}

/** What the charts' series need of the store: how many vCPUs to draw (VmTelemetry.vcpuSeries). */
type Vcpus = { vcpuSeries(): number };

/** Per vCPU its polling and halted share, side by side in the legend. */
export function guestIdleSeries(t: Vcpus): { key: string; label: string }[] {
  return Array.from({ length: t.vcpuSeries() }, (_, v) => [
    { key: `guest_poll_share#${v}`, label: `vCPU ${v} polling` },
    { key: `guest_halt_share#${v}`, label: `vCPU ${v} halted` },
  ]).flat();
}

/** Per vCPU its steal share. */
export function stealSeries(t: Vcpus): { key: string; label: string }[] {
  return Array.from({ length: t.vcpuSeries() }, (_, v) => ({ key: `steal_share#${v}`, label: `vCPU ${v}` }));
}

/** 1 / 0 as a flag; anything else unknown. */
function flag(v: unknown): boolean | null {
  return v === 1 ? true : v === 0 ? false : null;
}

/** A time in ns a guest may report: finite, not negative, at most an hour. */
function isNs(v: unknown): v is number {
  return typeof v === 'number' && Number.isFinite(v) && v >= 0 && v <= MAX_NS;
}

function isCount(v: unknown): v is number {
  return typeof v === 'number' && Number.isSafeInteger(v) && v >= 0;
}

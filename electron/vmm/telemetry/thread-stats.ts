// A vCPU thread as the host scheduler sees it: CPU time (utime+stime from /proc/self/task/TID/stat),
// context switches (/proc/self/task/TID/status) and, where the kernel has schedstat, its exact run
// time and run-queue wait in ns (utime+stime moves in 10 ms ticks, coarse for a 100 ms interval;
// the run-queue wait is what an overcommitted vCPU loses). The files stay open and are re-read
// with a pread at offset 0 (seq_file regenerates them) into preallocated buffers and parsed as
// bytes: one syscall per file per sample, no strings.
import { RawFile } from '../../../native/kvm/raw-file.ts';
import { THREAD_COUNTERS } from './fields.ts';

/** Values read() writes per thread, in THREAD_COUNTERS order. */
export const THREAD_FIELDS = THREAD_COUNTERS.length;

/** USER_HZ, the unit of utime/stime: fixed at 100 by the Linux ABI on x86 and arm64. */
export const CLOCK_TICKS_PER_S = 100;
const NS_PER_TICK = 1e9 / CLOCK_TICKS_PER_S;

const VOLUNTARY = Buffer.from('\nvoluntary_ctxt_switches:');
const NONVOLUNTARY = Buffer.from('\nnonvoluntary_ctxt_switches:');

/** Parses a decimal integer at `at`, skipping leading blanks; NaN if there is none. */
function parseUint(b: Uint8Array, at: number, end: number): number {
  while (at < end && (b[at] === 0x20 || b[at] === 0x09)) at++;
  let n = 0;
  let digits = 0;
  for (; at < end; at++, digits++) {
    const c = b[at]! - 0x30;
    if (c < 0 || c > 9) break;
    n = n * 10 + c;
  }
  return digits ? n : NaN;
}

/** utime + stime in clock ticks from a /proc/.../stat line (fields 14 and 15); NaN if malformed. */
export function parseStatCpuTicks(b: Uint8Array, length = b.length): number {
  // comm (field 2) may hold spaces and parentheses: count fields from the last ')'.
  let at = b.lastIndexOf(0x29, length - 1);
  if (at < 0) return NaN;
  at++;
  // After ')' come " state(3) ppid(4) … utime(14) stime(15)": utime is the 12th blank-separated field.
  for (let field = 3; field < 14; field++) {
    at = b.indexOf(0x20, at + 1);
    if (at < 0 || at >= length) return NaN;
  }
  const utime = parseUint(b, at, length);
  const next = b.indexOf(0x20, at + 1);
  if (next < 0 || next >= length) return NaN;
  return utime + parseUint(b, next, length);
}

function fieldAfter(b: Buffer, length: number, key: Buffer): number {
  const at = b.indexOf(key);
  return at < 0 || at >= length ? NaN : parseUint(b, at + key.length, length);
}

/** [run ns, run-queue wait ns] from /proc/.../schedstat ("run wait timeslices"); NaN if malformed. */
export function parseSchedstat(b: Uint8Array, length = b.length): [number, number] {
  const run = parseUint(b, 0, length);
  const space = b.indexOf(0x20, 0);
  return [run, space < 0 || space >= length ? NaN : parseUint(b, space, length)];
}

/** [voluntary, nonvoluntary] context switches from /proc/.../status; NaN where missing. */
export function parseStatusSwitches(b: Buffer, length = b.length): [number, number] {
  return [fieldAfter(b, length, VOLUNTARY), fieldAfter(b, length, NONVOLUNTARY)];
}

export class ThreadStatsReader {
  readonly tid: number;
  private readonly stat: RawFile;
  private readonly status: RawFile;
  /** null without CONFIG_SCHED_INFO. */
  private readonly schedstat: RawFile | null;

  private constructor(tid: number, stat: RawFile, status: RawFile, schedstat: RawFile | null) {
    this.tid = tid;
    this.stat = stat;
    this.status = status;
    this.schedstat = schedstat;
  }

  /** Opens a thread of this process; null if it does not exist (or has already exited). */
  static open(tid: number): ThreadStatsReader | null {
    if (!(tid > 0)) return null;
    const dir = `/proc/self/task/${tid}`;
    const stat = RawFile.open(`${dir}/stat`, 1024);
    const status = stat && RawFile.open(`${dir}/status`, 4096);
    if (!stat || !status) {
      stat?.close();
      return null;
    }
    return new ThreadStatsReader(tid, stat, status, RawFile.open(`${dir}/schedstat`, 256));
  }

  /**
   * Writes THREAD_COUNTERS (host_cpu_ns, voluntary and nonvoluntary switches, host_run_ns,
   * host_runqueue_wait_ns) to out[at..at+5); NaN for whatever cannot be read. Returns false once
   * the thread is gone (ESRCH).
   */
  read(out: Float64Array, at: number): boolean {
    if (this.stat.read() < 0 || this.status.read() < 0) {
      out.fill(NaN, at, at + THREAD_FIELDS);
      return false;
    }
    out[at] = parseStatCpuTicks(this.stat.bytes, this.stat.length) * NS_PER_TICK;
    const [vol, invol] = parseStatusSwitches(this.status.bytes, this.status.length);
    out[at + 1] = vol;
    out[at + 2] = invol;
    if (this.schedstat && this.schedstat.read() > 0) {
      const [run, wait] = parseSchedstat(this.schedstat.bytes, this.schedstat.length);
      out[at + 3] = run;
      out[at + 4] = wait;
    } else {
      out[at + 3] = out[at + 4] = NaN;
    }
    return true;
  }

  close(): void {
    this.stat.close();
    this.status.close();
    this.schedstat?.close();
  }
}

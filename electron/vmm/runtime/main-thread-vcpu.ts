// vCPU 0 on the main thread at start (`unhalt run`): a Node worker costs tens of ms and MiB to
// boot, more than a guest that ends at once lives, so the main thread runs vCPU 0 itself in short
// slices with the event loop turning in between, and hands it to its worker only if the guest
// lives on (docs/architecture.md, "Threads").
import { availableParallelism } from 'node:os';
import type { Vcpu } from '../../../native/kvm/kvm.ts';
import { libc } from '../../../native/kvm/libc.ts';
import { ThreadTimer } from '../../../native/kvm/thread-timer.ts';
import type { MachineSpec } from '../machine-spec.ts';
import { COMMAND, END, type VmControl } from '../shared/control.ts';
import { createVcpuDriver, type DriverReturn, type VcpuThreadData } from '../vcpu/vcpu-driver.ts';

/**
 * vCPU 0 runs on the main thread in slices (a timer signal ends each), returning to the event loop
 * in between: console output, input and signals wait at most a slice. A slice is at least
 * MIN_SLICE_MS and, where a turn of the event loop is slow (a slow host, an emulated one), long
 * enough that the turns take at most TURN_SHARE of vCPU 0's time, up to MAX_SLICE_MS
 * (sliceAfterTurns).
 */
const MIN_SLICE_MS = 2;
const MAX_SLICE_MS = 50;
const TURN_SHARE = 0.05;
/** Weight of the newest turn in the mean: a few turns, so one GC pause does not set a long slice. */
const TURN_WEIGHT = 1 / 8;

/**
 * The next slice's length in ms, from the turns measured so far (ms each, the event loop's time
 * between two KVM_RUNs, an exponentially weighted mean): on a fast host 2 ms, in an emulated one
 * where a turn takes a millisecond or more, up to 50 ms, so vCPU 0 keeps ~95% of its thread.
 */
export function sliceAfterTurns(meanTurnMs: number): number {
  if (!(meanTurnMs > 0)) return MIN_SLICE_MS;
  return Math.min(MAX_SLICE_MS, Math.max(MIN_SLICE_MS, meanTurnMs / TURN_SHARE));
}

/**
 * ...and its worker is started only once the guest has lived this long: a Node worker costs
 * tens of ms of CPU and MiB of memory to boot, which a guest that ends sooner never pays.
 * UNHALT_HANDOVER_AFTER_MS overrides it (tests, benchmarks).
 */
const HANDOVER_AFTER_MS = 500;

/**
 * Whether vCPU 0 may start on the main thread: one vCPU (an SMP guest's APs must all have threads
 * before the BSP runs: the start barrier), unpinned (the main thread is never pinned), no virtio
 * devices (their I/O thread contends for the bus lock, which the main thread never waits for), and
 * a second host CPU for this process: with one, the worker that takes vCPU 0 over boots on the
 * guest's only CPU (in the nested lane's L1, seconds of it), so there the worker boots first.
 */
export function firstVcpuCanRunOnMainThread(spec: Pick<MachineSpec, 'cpus' | 'pin' | 'virtio' | 'disks'>, hostCpus = availableParallelism()): boolean {
  return spec.cpus === 1 && spec.pin === undefined && !spec.virtio?.length && !spec.disks?.length && hostCpus > 1;
}

function handoverAfterMs(): number {
  const v = Number(process.env.UNHALT_HANDOVER_AFTER_MS);
  return process.env.UNHALT_HANDOVER_AFTER_MS && Number.isFinite(v) && v >= 0 ? v : HANDOVER_AFTER_MS;
}

/** What the VM gives the main thread's run of vCPU 0. */
export interface MainThreadVcpuHost {
  readonly control: VmControl;
  /** What a thread needs to drive vCPU 0. */
  threadData(): VcpuThreadData;
  /** The end message of an end this thread's vCPU recorded (the first one stays). */
  noteEnd(message: string): void;
  /** vCPU 0 could not start here: record the end (crash) with `message` and begin the teardown. */
  fail(message: string): void;
  /** Begins the teardown (the guest's own end, or a failure). */
  teardown(): void;
  /** Starts vCPU 0's worker, told to take the vCPU over from thread `tid` once it is loaded. */
  startWorker(tid: number): void;
}

/**
 * Runs vCPU 0 on this thread in slices (sliceAfterTurns), each ended by a timer signal (or
 * any kick), with the event loop turning in between; after HANDOVER_AFTER_MS its worker is started
 * and, once loaded, takes the vCPU over between two KVM_RUNs (VmControl's handover). Resolves when
 * this thread is done with the vCPU: the VM ended, or the worker has it.
 */
export async function runVcpu0OnMainThread(vcpu: Vcpu, host: MainThreadVcpuHost): Promise<void> {
  const control = host.control;
  const tid = libc.gettid();
  let timer: ThreadTimer | undefined;
  let driver: ReturnType<typeof createVcpuDriver>;
  try {
    timer = new ThreadTimer();
    // Its end is recorded in the control block; the loop below starts the teardown.
    driver = createVcpuDriver(host.threadData(), (_code, message) => host.noteEnd(message), vcpu);
  } catch (e) {
    timer?.close();
    host.fail(`vCPU 0 could not start on the main thread: ${(e as Error).message}`);
    return;
  }
  control.setTid(0, tid);
  control.markRunning(1);
  const handoverTimer = setTimeout(() => host.startWorker(tid), handoverAfterMs());
  try {
    // One vCPU: the barrier opens at once (it only records the start times); false if already stopped.
    if (!control.arriveAtStart(0)) return;
    // The event loop's time between two KVM_RUNs (ms, weighted mean; undefined until measured).
    let meanTurnMs: number | undefined;
    for (;;) {
      if (control.handoverRequested) {
        // Everything KVM needs is in kvm_run now; the worker runs the vCPU from here on.
        vcpu.commitPendingIn();
        control.setTid(0, 0);
        control.grantHandover();
        return;
      }
      timer.arm(sliceAfterTurns(meanTurnMs ?? 0));
      let why: DriverReturn;
      try {
        why = driver.run({ blockOnPause: false, yieldOnKick: () => true });
      } finally {
        timer.disarm();
      }
      if (why === 'ended') return;
      if (why === 'paused') {
        await control.waitWhilePausedAsync();
        if (control.command === COMMAND.run) vcpu.kvmclockStopped(); // as a worker does (vcpu-driver.ts)
      }
      else {
        const from = performance.now();
        await new Promise((r) => setImmediate(r));
        const turn = performance.now() - from;
        meanTurnMs = meanTurnMs === undefined ? turn : meanTurnMs + TURN_WEIGHT * (turn - meanTurnMs);
      }
    }
  } finally {
    clearTimeout(handoverTimer);
    timer.close();
    if (control.tid(0) === tid) control.setTid(0, 0);
    control.markRunning(-1);
    // The guest's own end (or a failure) starts the teardown, as a worker's 'ended' does.
    if (control.endCode !== END.none && control.endCode !== END.stopped) host.teardown();
  }
}

// vCPU 0 on the main thread at start (`unhalt run`): a Node worker costs tens of ms and MiB to
// boot, more than a guest that ends at once lives, so the main thread runs vCPU 0 itself in short
// slices with the event loop turning in between, and hands it to its worker only if the guest
// lives on (docs/architecture.md, "Threads").
import type { Vcpu } from '../../../native/kvm/kvm.ts';
import { libc } from '../../../native/kvm/libc.ts';
import { ThreadTimer } from '../../../native/kvm/thread-timer.ts';
import type { MachineSpec } from '../machine-spec.ts';
import { COMMAND, END, type VmControl } from '../shared/control.ts';
import { createVcpuDriver, type DriverReturn, type VcpuThreadData } from '../vcpu/vcpu-driver.ts';

/**
 * vCPU 0 runs on the main thread in slices this long (a timer signal ends each), returning to the
 * event loop in between: console output, input and signals wait at most this long.
 */
const MAIN_THREAD_SLICE_MS = 2;
/**
 * ...and its worker is started only once the guest has lived this long: a Node worker costs
 * tens of ms of CPU and MiB of memory to boot, which a guest that ends sooner never pays.
 * UNHALT_HANDOVER_AFTER_MS overrides it (tests, benchmarks).
 */
const HANDOVER_AFTER_MS = 500;

/**
 * Whether vCPU 0 may start on the main thread: one vCPU (an SMP guest's APs must all have threads
 * before the BSP runs: the start barrier), unpinned (the main thread is never pinned) and no
 * virtio devices (their I/O thread contends for the bus lock, which the main thread never waits for).
 */
export function firstVcpuCanRunOnMainThread(spec: Pick<MachineSpec, 'cpus' | 'pin' | 'virtio' | 'disks'>): boolean {
  return spec.cpus === 1 && spec.pin === undefined && !spec.virtio?.length && !spec.disks?.length;
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
 * Runs vCPU 0 on this thread in slices of MAIN_THREAD_SLICE_MS, each ended by a timer signal (or
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
    for (;;) {
      if (control.handoverRequested) {
        // Everything KVM needs is in kvm_run now; the worker runs the vCPU from here on.
        vcpu.commitPendingIn();
        control.setTid(0, 0);
        control.grantHandover();
        return;
      }
      timer.arm(MAIN_THREAD_SLICE_MS);
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
      else await new Promise((r) => setImmediate(r));
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

// One vCPU thread: loops on KVM_RUN and handles port and MMIO exits right here, without a round
// trip to the main thread (a round trip costs more than the exit); the loop and the devices are
// vcpu-driver.ts's. Device state is shared with the other vCPUs through SharedArrayBuffers;
// console bytes go to shared rings that the main thread drains, so nothing waits for a later exit
// to be seen.
//
// The thread outlives its vCPU: once it has left one VM it waits for a vCPU of the next
// (worker-pool.ts keeps it). Each VM therefore finds it as it was when it was loaded: named for
// its vCPU, on the host CPUs it started with, with no KVM_RUN stub and no reference to an earlier
// VM's shared memory. Only a worker whose clean-up all succeeded says so (`clean`) and is reused.
import { parentPort } from 'node:worker_threads';
import { libc } from '../../../native/kvm/libc.ts';
import { kickThread } from '../../../native/kvm/kick.ts';
import { allowedHostCpus, pinCurrentThread, setThreadAffinity } from '../../../native/kvm/affinity.ts';
import { returnFreedMallocMemory } from '../../../native/kvm/malloc-trim.ts';
import { nameCurrentThread } from '../../../native/kvm/thread-name.ts';
import { END, type EndCode } from '../shared/control.ts';
import { createVcpuDriver, type VcpuThreadData } from './vcpu-driver.ts';
import { IDLE_VCPU_THREAD_NAME, IDLE_WORKER_CLEANUP_MS } from './worker-pool.ts';

export interface VcpuWorkerData extends VcpuThreadData {
  /** Host CPU to pin this thread to, if any. */
  hostCpu?: number;
  /**
   * The main thread is running this vCPU already (runtime/main-thread-vcpu.ts, `unhalt run`): take it over (ask, kick
   * the main thread out of KVM_RUN, wait for the grant) instead of starting it at the barrier.
   */
  takeOverFrom?: { tid: number };
}

export type WorkerMessage =
  | { type: 'loaded' }
  | { type: 'ready'; vcpu: number; tid: number }
  | { type: 'ended'; vcpu: number; code: EndCode; message: string }
  /**
   * The thread has left its vCPU for good; `clean`: its state is back as it was before the VM
   * (it may drive a vCPU of another VM).
   */
  | { type: 'exited'; vcpu: number; clean: boolean };

const post = (m: WorkerMessage) => parentPort!.postMessage(m);
/** The host CPUs this thread started on (the process's): where it goes back to after a pinned VM. */
const homeCpus = allowedHostCpus();

/**
 * A full collection of this isolate, so that an idle worker holds nothing of the VM it left (the
 * shared buffers' memory goes when the last isolate's reference is collected, and an idle isolate
 * would not collect on its own). `gc` is there where the process started with --expose-gc: the
 * long-lived ones (bin/v8-flags.mjs: `unhalt serve`, the app, the tests); elsewhere V8's own
 * collections take the left VM's objects later.
 */
function collectGarbage(): void {
  (globalThis as { gc?: () => void }).gc?.();
}

/** Takes the vCPU over from the main thread; false if the VM ended first (then it was never ours). */
function takeOver(driver: ReturnType<typeof createVcpuDriver>, from: { tid: number }): boolean {
  const { control, vcpu } = driver;
  if (!control.requestHandover()) return false;
  // Out of KVM_RUN now rather than at the end of its slice (either half of a kick alone can miss;
  // the main thread also looks between slices).
  vcpu.setImmediateExit(true);
  kickThread(from.tid);
  return control.waitForHandover();
}

/** Drives one vCPU until its VM ends; then puts the thread back as it found it. True if that succeeded. */
function driveVcpu(data: VcpuWorkerData): boolean {
  // Cosmetic (ps, top, the tests): a name that cannot be set never fails the VM.
  try { nameCurrentThread(`vcpu-${data.vcpu.id}`); } catch { /* keeps its old name */ }
  const driver = createVcpuDriver(data, (code, message) => post({ type: 'ended', vcpu: driver.id, code, message }));
  const { control, id, vcpu } = driver;
  if (data.takeOverFrom && !takeOver(driver, data.takeOverFrom)) return leave(() => {});
  control.setTid(id, libc.gettid());
  control.markRunning(1);
  try {
    // Pinned, or on the thread's home CPUs, set afresh each VM: a live setPin of the previous VM
    // (by tid, from the main thread) could land after leave() restored them.
    if (data.hostCpu !== undefined) pinCurrentThread(data.hostCpu);
    else setThreadAffinity(0, homeCpus);
    post({ type: 'ready', vcpu: id, tid: control.tid(id) });
    // No vCPU runs before every vCPU thread is here (control.ts, arriveAtStart); a vCPU taken over
    // is past that barrier already.
    if (data.takeOverFrom || control.arriveAtStart(id)) driver.run();
  } catch (e) {
    if (control.end(END.crash, id)) post({ type: 'ended', vcpu: id, code: END.crash, message: `vCPU ${id}: ${(e as Error).message}` });
  }
  return leave(() => {
    vcpu.close(); // this thread's KVM_RUN stub (the fd and kvm_run are the main thread's)
    control.setTid(id, 0);
    control.markRunning(-1);
  });
}

/**
 * Gives up the vCPU (`release`), then undoes what the VM did to the thread: a pin (by its spec or
 * a live setPin from the main thread, by tid), the name. False if any of it failed.
 */
function leave(release: () => void): boolean {
  let clean = true;
  for (const step of [release, () => setThreadAffinity(0, homeCpus), () => nameCurrentThread(IDLE_VCPU_THREAD_NAME)]) {
    try { step(); } catch { clean = false; }
  }
  return clean;
}

// Every module (koffi's native addon among them) is loaded by now. Until this message a spare
// worker keeps the process alive (worker-pool.ts): a process that ends while a thread is still
// loading koffi can die in koffi's initialisation (a fatal napi_throw, exit 134).
post({ type: 'loaded' });

let cleanupTimer: ReturnType<typeof setTimeout> | undefined;

/**
 * What the worker does between VMs, once idle: the left VM's objects go, and with them its shared
 * buffers (the memory of one goes when the last isolate's reference is collected), then the memory
 * malloc keeps free in the threads' arenas.
 */
function cleanUp(): void {
  cleanupTimer = undefined;
  collectGarbage();
  returnFreedMallocMemory();
}

/**
 * The worker is spawned before its vCPU exists (module loading overlaps VM construction), so each
 * vCPU arrives in a message; between two the thread sleeps in its event loop.
 * Waits for a vCPU, drives it, says 'exited'; resolves with whether the thread may be reused.
 */
async function serveNextVcpu(): Promise<boolean> {
  const data = await new Promise<VcpuWorkerData>((resolve) => parentPort!.once('message', resolve));
  clearTimeout(cleanupTimer);
  const clean = driveVcpu(data);
  post({ type: 'exited', vcpu: data.vcpu.id, clean });
  return clean;
}

// The clean-up is scheduled outside serveNextVcpu so that no frame still holds the VM's data. A
// worker that is not clean is ended by the main thread; it waits for nothing more.
while (await serveNextVcpu()) cleanupTimer = setTimeout(cleanUp, IDLE_WORKER_CLEANUP_MS);

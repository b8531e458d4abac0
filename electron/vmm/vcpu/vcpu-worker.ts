// One vCPU thread: loops on KVM_RUN and handles port and MMIO exits right here, without a round
// trip to the main thread (a round trip costs more than the exit); the loop and the devices are
// vcpu-driver.ts's. Device state is shared with the other vCPUs through SharedArrayBuffers;
// console bytes go to shared rings that the main thread drains, so nothing waits for a later exit
// to be seen.
import { parentPort } from 'node:worker_threads';
import { libc } from '../../../native/kvm/libc.ts';
import { kickThread } from '../../../native/kvm/kick.ts';
import { pinCurrentThread } from '../../../native/kvm/affinity.ts';
import { END, type EndCode } from './control.ts';
import { createVcpuDriver, type VcpuThreadData } from './vcpu-driver.ts';

export interface VcpuWorkerData extends VcpuThreadData {
  /** Host CPU to pin this thread to, if any. */
  hostCpu?: number;
  /**
   * The main thread is running this vCPU already (vm.ts, `unhalt run`): take it over (ask, kick
   * the main thread out of KVM_RUN, wait for the grant) instead of starting it at the barrier.
   */
  takeOverFrom?: { tid: number };
}

export type WorkerMessage =
  | { type: 'loaded' }
  | { type: 'ready'; vcpu: number; tid: number }
  | { type: 'ended'; vcpu: number; code: EndCode; message: string }
  | { type: 'exited'; vcpu: number };

// Every module (koffi's native addon among them) is loaded by now. Until this message a spare
// worker keeps the process alive (worker-pool.ts): a process that ends while a thread is still
// loading koffi can die in koffi's initialisation (a fatal napi_throw, exit 134).
parentPort!.postMessage({ type: 'loaded' } satisfies WorkerMessage);
// The worker is spawned before its vCPU exists (module loading overlaps VM construction), so its
// vCPU arrives in the first message.
const data = await new Promise<VcpuWorkerData>((resolve) => parentPort!.once('message', resolve));
const post = (m: WorkerMessage) => parentPort!.postMessage(m);
const driver = createVcpuDriver(data, (code, message) => post({ type: 'ended', vcpu: driver.id, code, message }));
const { control, id, vcpu } = driver;

/** Takes the vCPU over from the main thread; false if the VM ended first (then it was never ours). */
function takeOver(from: { tid: number }): boolean {
  if (!control.requestHandover()) return false;
  // Out of KVM_RUN now rather than at the end of its slice (either half of a kick alone can miss;
  // the main thread also looks between slices).
  vcpu.setImmediateExit(true);
  kickThread(from.tid);
  return control.waitForHandover();
}

if (data.takeOverFrom && !takeOver(data.takeOverFrom)) {
  post({ type: 'exited', vcpu: id });
} else {
  control.setTid(id, libc.gettid());
  control.markRunning(1);
  try {
    if (data.hostCpu !== undefined) pinCurrentThread(data.hostCpu);
    post({ type: 'ready', vcpu: id, tid: control.tid(id) });
    // No vCPU runs before every vCPU thread is here (control.ts, arriveAtStart); a vCPU taken over
    // is past that barrier already.
    if (data.takeOverFrom || control.arriveAtStart(id)) driver.run();
  } catch (e) {
    if (control.end(END.workerError, id)) post({ type: 'ended', vcpu: id, code: END.workerError, message: `vCPU ${id}: ${(e as Error).message}` });
  } finally {
    vcpu.close(); // this thread's KVM_RUN stub (the fd and kvm_run are the main thread's)
    control.setTid(id, 0);
    control.markRunning(-1);
    post({ type: 'exited', vcpu: id });
  }
}

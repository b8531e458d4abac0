// vCPU worker threads, started ahead of need and reused across VMs. A worker takes ~60-90 ms to
// boot a Node isolate and load its modules; `unhalt run` starts its workers once the options are
// resolved (when vCPU 0 cannot start on the main thread, runtime/main-thread-vcpu.ts) so that
// this overlaps the build, and a long-lived service (the app, `unhalt serve`) keeps a few loaded
// at all times (keepVcpuWorkersWarm), so that a start finds its threads ready.
//
// A worker that has left its VM cleanly (said 'exited' with `clean`, vcpu-worker.ts) comes back
// here (returnVcpuWorker) and waits for its next vCPU instead of ending: ending a Node worker
// thread leaves memory behind (measured: 400 workers created and ended grew RSS by ~10 MiB, more
// with koffi loaded), and on hosts with memory protection keys every isolate that is created and
// ended is another turn of V8's JIT-page registry, which has aborted a process here once. At most
// idleLimit() idle workers are kept; one more is ended. An idle worker is unref'd (once loaded),
// so it never keeps the process alive.
import type { Worker } from 'node:worker_threads';
import { entryUrl } from '../../entry-url.ts';

export const VCPU_WORKER_URL = entryUrl(new URL('./vcpu-worker.ts', import.meta.url));

/** Spares a long-lived service keeps loaded: enough for a 2-vCPU VM; more vCPUs start fresh threads. */
export const SERVICE_SPARE_VCPU_WORKERS = 2;
/**
 * Idle workers kept for reuse unless setIdleVcpuWorkerLimit says otherwise: a service's spares
 * plus the workers of a 2-vCPU VM just stopped, so that a service starting and stopping such a VM
 * again and again neither starts nor ends a thread. An idle loaded worker costs ~3-6 MiB.
 */
export const DEFAULT_IDLE_VCPU_WORKERS = SERVICE_SPARE_VCPU_WORKERS + 2;
/** The thread name of a worker that is in no VM (a VM's worker is named `vcpu-N`, its vCPU's). */
export const IDLE_VCPU_THREAD_NAME = 'vcpu-idle';
/**
 * How long a worker that left its VM waits idle before it collects its isolate and trims malloc's
 * arenas (vcpu-worker.ts's cleanUp): a full collection of the isolate takes ~5-20 ms of CPU here, which done at once
 * would compete with the stop it follows (the other vCPUs leaving, the VM's release) on a host with
 * few CPUs. A worker taken for a VM before then skips it; the VM's own allocations collect it then.
 */
export const IDLE_WORKER_CLEANUP_MS = 200;
/**
 * How long after a taken worker got its vCPU the spares are replaced: a worker's boot is ~60 ms
 * of CPU, which should not compete with the start that took one (its guest's first output).
 */
const REFILL_DELAY_MS = 150;

/** Workers in no VM, loaded or loading: taken first in, first out. */
const idle: Worker[] = [];
const loadedSignals = new WeakMap<Worker, Promise<void>>();
/** Per idle worker: removes the listeners that drop it from `idle` if it ends there. */
const idleListeners = new WeakMap<Worker, () => void>();
/** Per lent worker: removes the pool's own listeners of that loan (the refill's). */
const loanListeners = new WeakMap<Worker, () => void>();
let keepWarm = 0;
let idleLimit = DEFAULT_IDLE_VCPU_WORKERS;
let refillTimer: ReturnType<typeof setTimeout> | undefined;

/** A vCPU worker, with a signal for when its modules (koffi's addon among them) are loaded. */
function newVcpuWorker(): Worker {
  // node:worker_threads on first use: a start whose guest ends on the main thread never loads it.
  const { Worker } = process.getBuiltinModule('node:worker_threads');
  // The worker names its thread itself for every vCPU it drives (vcpu-N) and again when it leaves.
  const w = new Worker(VCPU_WORKER_URL, { name: IDLE_VCPU_THREAD_NAME });
  loadedSignals.set(w, new Promise((resolve) => {
    const done = () => { w.off('message', onMessage); w.off('exit', done); w.off('error', done); resolve(); };
    const onMessage = (m: { type?: string }) => { if (m?.type === 'loaded') done(); };
    w.on('message', onMessage);
    w.once('exit', done);
    w.once('error', done);
  }));
  return w;
}

/**
 * Resolves once the worker has loaded its modules (or ended). Terminating a worker while it
 * is still loading koffi's addon can kill the whole process in koffi's initialisation (a fatal
 * napi_throw), so every terminate waits for this first.
 */
export function whenLoaded(worker: Worker): Promise<void> {
  return loadedSignals.get(worker) ?? Promise.resolve();
}

/** Puts `w` among the idle workers: unref'd once loaded, dropped from the list if it ends. */
function keepIdle(w: Worker): void {
  // Unref'd only once its modules are loaded: a process that ended while this thread was still
  // loading koffi's addon could die in koffi's initialisation (exit 134 instead of its own code).
  void whenLoaded(w).then(() => { if (idle.includes(w)) w.unref(); });
  // A worker that fails or ends while idle is simply dropped; a VM then takes another or a fresh one.
  const drop = () => { forgetIdle(w); const at = idle.indexOf(w); if (at >= 0) idle.splice(at, 1); };
  w.once('error', drop);
  w.once('exit', drop);
  idleListeners.set(w, () => { w.off('error', drop); w.off('exit', drop); });
  idle.push(w);
}

function forgetIdle(w: Worker): void {
  idleListeners.get(w)?.();
  idleListeners.delete(w);
}

export function prewarmVcpuWorkers(count: number): void {
  for (let i = 0; i < count; i++) keepIdle(newVcpuWorker());
}

/**
 * Keeps `count` spare workers loaded from now on (0: stop replacing them; see also
 * releaseSpareVcpuWorkers). For a process that starts VMs again and again: the app, `unhalt serve`.
 */
export function keepVcpuWorkersWarm(count: number): void {
  keepWarm = count;
  refill();
}

/**
 * How many idle workers a returning worker may join (at least the spares keepVcpuWorkersWarm asks
 * for); 0: a worker that leaves its VM is ended (`unhalt run`: one VM, then the process ends).
 * Spares started ahead (prewarmVcpuWorkers) do not count against it.
 */
export function setIdleVcpuWorkerLimit(count: number): void {
  idleLimit = count;
}

function refill(): void {
  clearTimeout(refillTimer);
  refillTimer = undefined;
  if (idle.length < keepWarm) prewarmVcpuWorkers(keepWarm - idle.length);
}

/** Ends `w` (once loaded: whenLoaded says why). */
async function end(w: Worker): Promise<void> {
  await whenLoaded(w);
  await w.terminate();
}

/** Ends the idle workers beyond the first `keep` (the newest first: the oldest are loaded). */
async function endIdleBeyond(keep: number): Promise<void> {
  const extra = idle.splice(keep);
  extra.forEach(forgetIdle);
  await Promise.all(extra.map(end));
}

/** Stops keeping spares and ends every idle worker (each once loaded: whenLoaded says why). */
export async function releaseSpareVcpuWorkers(): Promise<void> {
  keepWarm = 0;
  clearTimeout(refillTimer);
  refillTimer = undefined;
  await endIdleBeyond(0);
}

/** How many idle workers there are now (spares and reused, loaded or loading): for diagnostics and tests. */
export function spareVcpuWorkerCount(): number {
  return idle.length;
}

/** A worker waiting for its vCPU: an idle one if there is one, else a new one. */
export function takeVcpuWorker(): Worker {
  const spare = idle.shift();
  let w: Worker;
  if (spare) {
    forgetIdle(spare);
    spare.ref();
    w = spare;
  } else {
    w = newVcpuWorker();
  }
  if (keepWarm > 0) refillAfterStart(w);
  return w;
}

/**
 * Takes back a worker that left its VM cleanly: it has said 'exited' with `clean` (its thread is
 * back in its initial state: affinity, name, no KVM_RUN stub, vcpu-worker.ts) and its VM has
 * removed every listener it added. Kept idle up to the limit, else ended; resolves once either is done.
 */
export async function returnVcpuWorker(w: Worker): Promise<void> {
  loanListeners.get(w)?.();
  loanListeners.delete(w);
  if (idle.length >= Math.max(idleLimit, keepWarm)) return end(w);
  keepIdle(w);
}

/** Schedules the refill for a while after `w` has its vCPU (the start is then all but done) or ended. */
function refillAfterStart(w: Worker): void {
  const onMessage = (m: { type?: string }) => { if (m?.type === 'ready') schedule(); };
  const stopListening = () => { w.off('message', onMessage); w.off('exit', schedule); loanListeners.delete(w); };
  const schedule = () => {
    stopListening();
    if (keepWarm === 0 || refillTimer !== undefined) return;
    refillTimer = setTimeout(refill, REFILL_DELAY_MS);
    refillTimer.unref();
  };
  w.on('message', onMessage);
  w.once('exit', schedule);
  loanListeners.set(w, stopListening);
}

// vCPU worker threads started ahead of need. A worker takes ~60-90 ms to boot a Node isolate and
// load its modules; `unhalt run` starts its workers once the options are resolved (when vCPU 0
// cannot start on the main thread, vm.ts) so that this overlaps the build, and a long-lived service (the app, `unhalt
// serve`) keeps a few loaded at all times (keepVcpuWorkersWarm), so that a start finds its
// threads ready. A spare worker waits for its vCPU in its first message and, once loaded, is
// unref'd until taken, so an unused one never keeps the process alive.
import type { Worker } from 'node:worker_threads';
import { entryUrl } from '../../entry-url.ts';

export const VCPU_WORKER_URL = entryUrl(new URL('./vcpu-worker.ts', import.meta.url));

/** Spares a long-lived service keeps loaded: enough for a 2-vCPU VM; more vCPUs start fresh threads. */
export const SERVICE_SPARE_VCPU_WORKERS = 2;
/**
 * How long after a taken worker got its vCPU the spares are replaced: a worker's boot is ~60 ms
 * of CPU, which should not compete with the start that took one (its guest's first output).
 */
const REFILL_DELAY_MS = 150;

const spares: Worker[] = [];
const loadedSignals = new WeakMap<Worker, Promise<void>>();
let keepWarm = 0;
let refillTimer: ReturnType<typeof setTimeout> | undefined;

/** A vCPU worker, with a signal for when its modules (koffi's addon among them) are loaded. */
function newVcpuWorker(name: string): Worker {
  // node:worker_threads on first use: a start whose guest ends on the main thread never loads it.
  const { Worker } = process.getBuiltinModule('node:worker_threads');
  const w = new Worker(VCPU_WORKER_URL, { name });
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

export function prewarmVcpuWorkers(count: number): void {
  for (let i = 0; i < count; i++) {
    // Named for the vCPU it will most likely drive (spares are taken in order).
    const w = newVcpuWorker(`vcpu-${spares.length}`);
    // Unref'd only once its modules are loaded: a process that ended while this thread was still
    // loading koffi's addon could die in koffi's initialisation (exit 134 instead of its own code).
    void whenLoaded(w).then(() => { if (spares.includes(w)) w.unref(); });
    // A spare that fails to load is simply dropped; the VM then starts a fresh worker.
    const drop = () => { const at = spares.indexOf(w); if (at >= 0) spares.splice(at, 1); };
    w.once('error', drop);
    w.once('exit', drop);
    spares.push(w);
  }
}

/**
 * Keeps `count` spare workers loaded from now on (0: stop replacing them; see also
 * releaseSpareVcpuWorkers). For a process that starts VMs again and again: the app, `unhalt serve`.
 */
export function keepVcpuWorkersWarm(count: number): void {
  keepWarm = count;
  refill();
}

function refill(): void {
  clearTimeout(refillTimer);
  refillTimer = undefined;
  if (spares.length < keepWarm) prewarmVcpuWorkers(keepWarm - spares.length);
}

/** Stops keeping spares and ends the ones there are (each once loaded: whenLoaded says why). */
export async function releaseSpareVcpuWorkers(): Promise<void> {
  keepWarm = 0;
  clearTimeout(refillTimer);
  refillTimer = undefined;
  const all = spares.splice(0);
  await Promise.all(all.map(async (w) => {
    await whenLoaded(w);
    await w.terminate();
  }));
}

/** How many spare workers there are now (loaded or loading): for diagnostics and tests. */
export function spareVcpuWorkerCount(): number {
  return spares.length;
}

/** A worker waiting for its vCPU: a spare if one is ready, else a new one. */
export function takeVcpuWorker(name: string): Worker {
  const spare = spares.shift();
  let w: Worker;
  if (spare) {
    spare.removeAllListeners('error');
    spare.removeAllListeners('exit');
    spare.ref();
    w = spare;
  } else {
    w = newVcpuWorker(name);
  }
  if (keepWarm > 0) refillAfterStart(w);
  return w;
}

/** Schedules the refill for a while after `w` has its vCPU (the start is then all but done) or ended. */
function refillAfterStart(w: Worker): void {
  const onMessage = (m: { type?: string }) => { if (m?.type === 'ready') schedule(); };
  const schedule = () => {
    w.off('message', onMessage);
    w.off('exit', schedule);
    if (keepWarm === 0 || refillTimer !== undefined) return;
    refillTimer = setTimeout(refill, REFILL_DELAY_MS);
    refillTimer.unref();
  };
  w.on('message', onMessage);
  w.once('exit', schedule);
}

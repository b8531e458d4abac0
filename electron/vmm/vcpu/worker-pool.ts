// vCPU worker threads started ahead of need. A worker takes ~60-90 ms to boot a Node isolate and
// load its modules; `unhalt run` starts one at process start so that this overlaps the main
// thread's own loading instead of following it. A spare worker waits for its vCPU in its first
// message and, once loaded, is unref'd until taken, so an unused one never keeps the process alive.
import { Worker } from 'node:worker_threads';
import { entryUrl } from '../../entry-url.ts';

export const VCPU_WORKER_URL = entryUrl(new URL('./vcpu-worker.ts', import.meta.url));

const spares: Worker[] = [];
const loadedSignals = new WeakMap<Worker, Promise<void>>();

/** A vCPU worker, with a signal for when its modules (koffi's addon among them) are loaded. */
function newVcpuWorker(name: string): Worker {
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
    const w = newVcpuWorker(`vcpu-${i}`);
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

/** A worker waiting for its vCPU: a spare if one is ready, else a new one. */
export function takeVcpuWorker(name: string): Worker {
  const spare = spares.shift();
  if (spare) {
    spare.removeAllListeners('error');
    spare.removeAllListeners('exit');
    spare.ref();
    return spare;
  }
  return newVcpuWorker(name);
}

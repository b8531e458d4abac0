// vCPU worker threads started ahead of need. A worker takes ~60-90 ms to boot a Node isolate and
// load its modules; `unhalt run` starts one at process start so that this overlaps the main
// thread's own loading instead of following it. A spare worker waits for its vCPU in its first
// message and, once loaded, is unref'd until taken, so an unused one never keeps the process alive.
import { extname } from 'node:path';
import { Worker } from 'node:worker_threads';

export const VCPU_WORKER_URL = new URL(`./vcpu-worker${extname(new URL(import.meta.url).pathname)}`, import.meta.url);

const spares: Worker[] = [];

export function prewarmVcpuWorkers(count: number): void {
  for (let i = 0; i < count; i++) {
    // Named for the vCPU it will most likely drive (spares are taken in order).
    const w = new Worker(VCPU_WORKER_URL, { name: `vcpu-${i}` });
    // Unref'd only once its modules are loaded: a process that ended while this thread was still
    // loading koffi's addon could die in koffi's initialisation (exit 134 instead of its own code).
    w.on('message', function loaded(m: { type?: string }) {
      if (m?.type !== 'loaded') return;
      w.off('message', loaded);
      if (spares.includes(w)) w.unref();
    });
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
  return new Worker(VCPU_WORKER_URL, { name });
}

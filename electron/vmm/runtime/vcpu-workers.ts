// The vCPU worker threads one VM has on loan from the pool (vcpu/worker-pool.ts): taking them,
// handing each its vCPU, waiting for all at the start barrier, knowing when each has left its
// vCPU for good, and giving back at the end those that left cleanly (the others are ended).
import type { Worker } from 'node:worker_threads';
import { returnVcpuWorker, takeVcpuWorker, whenLoaded } from '../vcpu/worker-pool.ts';
import type { VcpuWorkerData, WorkerMessage } from '../vcpu/vcpu-worker.ts';

/** How long a release waits for workers still loading their modules (seconds under emulation). */
const WORKER_LOAD_WAIT_MS = 30_000;

/** What a VM did with a worker it took from the pool: whether the worker may go back to it. */
interface WorkerLoan {
  /** It was given its vCPU (a worker that never was is untouched). */
  handedOut: boolean;
  /** It said 'exited' with its thread back in its initial state (vcpu-worker.ts). */
  leftCleanly: boolean;
  /** It crashed, ended or was terminated. */
  spoiled: boolean;
  /** Removes every listener this VM added to it. */
  detach: (() => void)[];
}

/** What the VM hears of its workers. */
export interface WorkerEvents {
  message(m: WorkerMessage): void;
  /** vCPU `vcpu`'s thread ended (without saying so first, unless the VM is ending). */
  exit(vcpu: number, code: number): void;
  /** vCPU `vcpu`'s thread crashed after the start (before it, the start fails with the error). */
  crash(vcpu: number, e: Error): void;
  /** The VM has not finished starting. */
  starting(): boolean;
}

export class VcpuWorkers {
  /** The workers on loan, in the order taken (worker i for vCPU i at start). */
  private readonly list: Worker[] = [];
  /** Per worker: what this VM did with it (see WorkerLoan), for its return to the pool. */
  private readonly loans = new Map<Worker, WorkerLoan>();
  /** Per thread that drives a vCPU: it has left its vCPU for good (said 'exited', or its thread ended). */
  private readonly left: Promise<void>[] = [];
  /** Workers that have left their vCPU (the main thread running vCPU 0 is not one). */
  private workersLeft = 0;
  private readonly events: WorkerEvents;

  constructor(events: WorkerEvents) {
    this.events = events;
  }

  /**
   * Takes a worker from the pool for vCPU `i` and records when it has left its vCPU for good:
   * said 'exited' (and whether clean), or its thread ended.
   */
  lend(i: number): Worker {
    const worker = takeVcpuWorker();
    const loan: WorkerLoan = { handedOut: false, leftCleanly: false, spoiled: false, detach: [] };
    this.list.push(worker);
    this.loans.set(worker, loan);
    const listen = <A extends unknown[]>(event: string, fn: (...a: A) => void) => {
      worker.on(event, fn as (...a: unknown[]) => void);
      loan.detach.push(() => worker.off(event, fn as (...a: unknown[]) => void));
    };
    this.left.push(new Promise<void>((resolve) => {
      listen('exit', (code: number) => { loan.spoiled = true; this.events.exit(i, code); resolve(); });
      listen('message', (m: WorkerMessage) => {
        if (m.type === 'exited') { loan.leftCleanly = m.clean; resolve(); }
        this.events.message(m);
      });
      // From the first KVM_RUN on, a crash ends the VM (before that, the start fails with it).
      listen('error', (e: Error) => { loan.spoiled = true; if (!this.events.starting()) this.events.crash(i, e); });
    }).then(() => { this.workersLeft++; }));
    return worker;
  }

  /** Hands `worker` its vCPU. */
  handOut(worker: Worker, data: VcpuWorkerData): void {
    this.loans.get(worker)!.handedOut = true;
    worker.postMessage(data);
  }

  /** The teardown also waits for `left`: another thread's leaving its vCPU (the main thread's, vCPU 0). */
  alsoAwait(left: Promise<void>): void {
    this.left.push(left);
  }

  /**
   * Hands worker i its vCPU (data[i]) and waits (asynchronously: this thread never blocks) until
   * every one has reached the start barrier; the workers themselves hold each other there until
   * the last one arrives (VmControl.arriveAtStart).
   */
  async launch(data: VcpuWorkerData[]): Promise<void> {
    const ready = data.map((d, i) => {
      const worker = this.list[i]!;
      const started = new Promise<void>((resolve, reject) => {
        const onError = (e: Error) => { done(); reject(new Error(`vCPU ${i} thread failed to start: ${e.message}`)); };
        const onExit = (code: number) => { done(); reject(new Error(`vCPU ${i} thread exited (code ${code}) before it was ready`)); };
        const onMessage = (m: WorkerMessage) => {
          if (m.type === 'loaded') return; // its modules are in; 'ready' (or 'ended') follows
          done();
          resolve();
        };
        const done = () => { worker.off('message', onMessage); worker.off('error', onError); worker.off('exit', onExit); };
        worker.once('error', onError);
        worker.once('exit', onExit);
        worker.on('message', onMessage);
      });
      this.handOut(worker, d);
      return started;
    });
    await Promise.all(ready);
  }

  /** Every thread that drove a vCPU has left it for good (out of KVM_RUN, never to enter again). */
  allLeft(): Promise<unknown> {
    return Promise.all(this.left);
  }

  /** The last resort for workers stuck in a native call: terminated (and never reused). */
  terminateAll(): void {
    for (const w of this.list) { this.loans.get(w)!.spoiled = true; void w.terminate(); }
  }

  /**
   * Gives the workers back to the pool or ends them. Resolves when the machine may be released
   * (no worker is still in its vCPU), with `threadsEnded`: the ended threads' ends and the returns
   * to the pool (wrapped, so that resolving this does not wait for it).
   */
  async release(): Promise<{ threadsEnded: Promise<unknown> }> {
    // Reused: a worker that left its vCPU cleanly, or never got one (a start that failed before).
    // Ended: one that crashed, ended, was terminated or did not leave cleanly.
    const reusable = (w: Worker) => {
      const loan = this.loans.get(w)!;
      return !loan.spoiled && (loan.handedOut ? loan.leftCleanly : true);
    };
    for (const loan of this.loans.values()) loan.detach.forEach((off) => off());
    const ending = this.list.filter((w) => !reusable(w));
    // Never terminate a worker still loading its modules (whenLoaded says why); bounded, as a
    // worker that cannot load ends by itself.
    let loadWait: ReturnType<typeof setTimeout> | undefined;
    await Promise.race([Promise.all(ending.map(whenLoaded)), new Promise((r) => { loadWait = setTimeout(r, WORKER_LOAD_WAIT_MS); })]);
    clearTimeout(loadWait);
    const threadsEnded = Promise.all([
      ...ending.map((w) => w.terminate()),
      // The pool ends those beyond its limit.
      ...this.list.filter(reusable).map(returnVcpuWorker),
    ]);
    // A worker that has not left its vCPU (a start that failed: it may be at the start barrier)
    // is gone before its vCPU's run page is unmapped.
    if (this.workersLeft < this.list.length) await threadsEnded;
    return { threadsEnded };
  }
}

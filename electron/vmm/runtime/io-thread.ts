// The VM's I/O thread (devices/virtio/io-worker.ts) as the main thread drives it: started before
// any vCPU runs, woken through its eventfd to read the control block again (a pause, a resume,
// its stop), and ended at teardown. One per VM with virtio devices (docs/virtio.md, "Threads").
import type { Worker } from 'node:worker_threads';
import { entryUrl } from '../../entry-url.ts';
import { EventFdWriter } from '../../../native/kvm/eventfd.ts';
import type { BuiltMachine } from '../builder/build-machine.ts';
import type { IoWorkerData, IoWorkerMessage } from '../devices/virtio/io-worker.ts';
import type { VmControl } from '../shared/control.ts';

const IO_WORKER_URL = entryUrl(new URL('../devices/virtio/io-worker.ts', import.meta.url));
/** How long stop() waits for the thread to end by itself before it terminates it. */
const IO_EXIT_DEADLINE_MS = 5000;

export class IoThread {
  /** Resolves once the thread sleeps on the devices' eventfds: no notification can be missed. */
  readonly ready: Promise<void>;
  private readonly worker: Worker;
  private readonly control: VmControl;
  private readonly ended: Promise<void>;
  /** The thread has ended (a pause then waits for no acknowledgement of it). */
  private gone = false;
  private stopping = false;
  private wakeFd: number;

  /**
   * Starts the I/O thread when the machine has virtio devices (none otherwise). `fail` is told
   * when a started thread fails; before `ready`, `ready` rejects instead.
   */
  static start(machine: BuiltMachine, control: VmControl, fail: (message: string) => void): IoThread | undefined {
    return machine.board.virtio.length ? new IoThread(machine, control, fail) : undefined;
  }

  private constructor(machine: BuiltMachine, control: VmControl, fail: (message: string) => void) {
    this.control = control;
    this.wakeFd = machine.ioWakeFd;
    const data: IoWorkerData = {
      deviceSab: machine.deviceSab, board: machine.board, ram: machine.memory.ramHandle(), vmFd: machine.vm.fd,
      controlSab: control.sab, cpus: control.cpus, wakeFd: machine.ioWakeFd,
    };
    const { Worker } = process.getBuiltinModule('node:worker_threads');
    const worker = new Worker(IO_WORKER_URL, { name: 'virtio-io', workerData: data });
    this.worker = worker;
    this.ended = new Promise((resolve) => worker.once('exit', () => { this.gone = true; resolve(); }));
    let started = false;
    this.ready = new Promise<void>((resolve, reject) => {
      // A back end that fails ends the VM, as a vCPU worker's failure does.
      worker.on('error', (e) => (started ? fail(`the I/O thread crashed: ${e.message}`) : reject(new Error(`the I/O thread failed to start: ${e.message}`))));
      worker.once('exit', (code) => { if (!started) reject(new Error(`the I/O thread exited (code ${code}) before it was ready`)); });
      worker.on('message', (m: IoWorkerMessage) => {
        if (m.type === 'ready') {
          started = true;
          resolve();
        } else if (m.type === 'failed') {
          // Before `ready`: a back end that could not open (a port taken since the preflight, a
          // tap gone): the start fails with its line.
          if (started) fail(`the I/O thread failed: ${m.message}`);
          else reject(new Error(m.message));
        }
      });
    });
  }

  /** It serves nothing until the command changes: it acknowledged the pause, is ended or ending. */
  get paused(): boolean {
    return this.stopping || this.gone || this.control.ioPaused;
  }

  /** Tells the thread to read its control words again (a pause, a resume, its stop). */
  wake(): void {
    if (this.wakeFd >= 0) new EventFdWriter().signal(this.wakeFd);
  }

  /**
   * Wakes the thread out of poll and waits for it to end (bounded: then it is terminated). Before
   * the machine closes: the wake-up eventfd is the machine's, and is not used after this.
   */
  async stop(): Promise<void> {
    if (this.stopping) return;
    this.stopping = true;
    this.control.requestIoStop();
    this.wake();
    this.wakeFd = -1;
    let timer: ReturnType<typeof setTimeout> | undefined;
    await Promise.race([this.ended, new Promise((r) => { timer = setTimeout(r, IO_EXIT_DEADLINE_MS); })]);
    clearTimeout(timer);
    await this.worker.terminate();
  }
}

// The runtime of one virtual machine: runs a machine the builder made (builder/build-machine.ts)
// with one worker thread per vCPU, drains console output, takes input, applies live knob changes
// (explicit state: LiveKnobs, never an edit of the spec), and tears everything down however it
// ends. The main thread only dispatches here: it never blocks on a device lock, a worker or a
// file (docs/architecture.md, "Threads").
import { EventEmitter } from 'node:events';
import type { Worker } from 'node:worker_threads';
import { entryUrl } from '../entry-url.ts';
import { EventFdWriter } from '../../native/kvm/eventfd.ts';
import { attachPci, type PciDeviceName } from './devices/board.ts';
import type { VirtioCounters } from './devices/virtio/virtio-pci.ts';
import type { IoWorkerData, IoWorkerMessage } from './devices/virtio/io-worker.ts';
import { checkNetBackEnd } from './devices/virtio/net-preflight.ts';
import { returnVcpuWorker, takeVcpuWorker, whenLoaded } from './vcpu/worker-pool.ts';
import { CAP } from '../../native/kvm/abi.ts';
import { kickThread } from '../../native/kvm/kick.ts';
import { libc } from '../../native/kvm/libc.ts';
import { ThreadTimer } from '../../native/kvm/thread-timer.ts';
import { allowedHostCpus, setThreadAffinity } from '../../native/kvm/affinity.ts';
import { AgentLineReader, type AgentEvent } from './agent/line-protocol.ts';
import { buildMachineFromFiles, type BuiltMachine } from './builder/build-machine.ts';
import { ByteRing } from './devices/byte-ring.ts';
import { PowerButton, SerialInput } from './devices/board.ts';
import { InputQueue } from './devices/input-queue.ts';
import type { LiveKnobs, MachineSpec } from './machine-spec.ts';
import { COMMAND, END, type EndCode, VmControl, type VcpuStartTimes } from './shared/control.ts';
import type { VcpuWorkerData, WorkerMessage } from './vcpu/vcpu-worker.ts';
import { traceStep } from './start-trace.ts';
import { createVcpuDriver, type VcpuThreadData } from './vcpu/vcpu-driver.ts';
import type { Vcpu } from '../../native/kvm/kvm.ts';

export type { LiveKnobs, MachineSpec, VmTestHooks } from './machine-spec.ts';
export { memoryMap } from './builder/guest-image.ts';

export type VmState = 'starting' | 'running' | 'paused' | 'stopping' | 'stopped';

/** 'guest-fault': the guest reported an unhandled exception on ttyS1 (`@u1 fault ...`), then shut down. */
export type ExitKind = 'poweroff' | 'reset' | 'guest-fault' | 'triple-fault' | 'internal-error' | 'fail-entry' | 'crash' | 'stopped';

export interface VmExit {
  kind: ExitKind;
  /** One line a user can read. */
  message: string;
  vcpu?: number;
}

const END_KIND: Record<EndCode, ExitKind> = {
  [END.none]: 'stopped',
  [END.powerOff]: 'poweroff',
  [END.reset]: 'reset',
  [END.tripleFault]: 'triple-fault',
  [END.internalError]: 'internal-error',
  [END.failEntry]: 'fail-entry',
  [END.workerError]: 'crash',
  [END.stopped]: 'stopped',
};

/** Guest exits that mean "the guest shut itself down" (exit code 0). */
export function isCleanExit(kind: ExitKind): boolean {
  return kind === 'poweroff' || kind === 'reset';
}

const EXCEPTION_NAMES: Record<number, string> = {
  0: '#DE divide error', 1: '#DB debug', 3: '#BP breakpoint', 4: '#OF overflow', 5: '#BR bound range', 6: '#UD invalid opcode',
  7: '#NM device not available', 8: '#DF double fault', 10: '#TS invalid TSS', 11: '#NP segment not present',
  12: '#SS stack fault', 13: '#GP general protection', 14: '#PF page fault', 16: '#MF x87 error', 17: '#AC alignment check',
  18: '#MC machine check', 19: '#XM SIMD error',
};

/** One line for a `@u1 fault vector=N error_code=N rip=N cpu=N` event. */
export function describeGuestFault(f: Record<string, number>): string {
  const vector = f.vector;
  const name = vector === undefined ? 'an exception' : `${EXCEPTION_NAMES[vector] ?? 'exception'} (vector ${vector})`;
  const rip = f.rip === undefined ? '' : ` at rip 0x${BigInt.asUintN(64, BigInt(f.rip)).toString(16)}`;
  const code = f.error_code ? `, error code 0x${f.error_code.toString(16)}` : '';
  const cpu = f.cpu === undefined ? '' : ` on CPU ${f.cpu}`;
  return `the guest reported an unhandled ${name}${rip}${code}${cpu}`;
}

export { MIN_MEMORY_MIB } from './vm-limits.ts';
const WORKER_EXIT_DEADLINE_MS = 5000;
const IO_WORKER_URL = entryUrl(new URL('./devices/virtio/io-worker.ts', import.meta.url));
/** How long a release waits for workers still loading their modules (seconds under emulation). */
const WORKER_LOAD_WAIT_MS = 30_000;
/** How long pause() waits for the vCPU threads to acknowledge before it kicks them again. */
const PAUSE_REKICK_MS = 50;
/**
 * A VM started with `firstVcpuOnMainThread` runs vCPU 0 on the main thread in slices this long
 * (a timer signal ends each), returning to the event loop in between: console output, input and
 * signals wait at most this long.
 */
const MAIN_THREAD_SLICE_MS = 2;
/**
 * ...and starts vCPU 0's worker only once the guest has lived this long: a Node worker costs
 * tens of ms of CPU and MiB of memory to boot, which a guest that ends sooner never pays.
 * UNHALT_HANDOVER_AFTER_MS overrides it (tests, benchmarks).
 */
const HANDOVER_AFTER_MS = 500;
/** Console input waiting for a guest that does not read it: at most this much is kept. */
export const MAX_PENDING_INPUT = 1024 * 1024;

export interface VmEvents {
  console: [bytes: Uint8Array];
  agent: [event: AgentEvent];
  'agent-bytes': [bytes: Uint8Array];
  state: [state: VmState];
  exit: [exit: VmExit];
}

export interface StartOptions {
  /**
   * Run vCPU 0 on this thread from the start, until its worker has booted (`unhalt run`: a process
   * with one VM, whose guest may be gone before any worker would be ready). Only where
   * firstVcpuCanRunOnMainThread(spec) holds; otherwise ignored.
   */
  firstVcpuOnMainThread?: boolean;
}

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

export class VirtualMachine extends EventEmitter<VmEvents> {
  /** The spec it was built from, never changed (live changes: knobs). */
  readonly spec: Readonly<MachineSpec>;
  state: VmState = 'starting';
  /** Resolves once the VM is stopped and every resource is released. */
  readonly exited: Promise<VmExit>;
  readonly control: VmControl;
  readonly agentReader: AgentLineReader;
  startedAt = 0;
  private resolveExited!: (e: VmExit) => void;
  /** The built machine while it runs; dropped at release so guest RAM can be collected. */
  private machine?: BuiltMachine;
  /** The live knobs' current values (start: the spec's). */
  private live: LiveKnobs;
  private workers: Worker[] = [];
  /** Per worker: what this VM did with it (see WorkerLoan), for its return to the pool. */
  private readonly loans = new Map<Worker, WorkerLoan>();
  /** Per worker: it has left its vCPU for good (said 'exited', or its thread ended). */
  private workerLeft: Promise<void>[] = [];
  private workersLeft = 0;
  /** The I/O thread serving the virtio devices' queues (none without virtio devices). */
  private ioWorker?: Worker;
  private ioWorkerExited?: Promise<void>;
  /** The I/O thread has ended (a pause then waits for no acknowledgement of it). */
  private ioWorkerGone = false;
  /** The virtio counters as the VM ended (its device state goes with the machine). */
  private finalVirtioCounters?: Partial<Record<PciDeviceName, VirtioCounters>>;
  private counterView?: { machine: object; virtio: { name: PciDeviceName; device: { counters(): VirtioCounters } }[] };
  private readonly consoleRingSab = ByteRing.create(64 * 1024);
  private readonly agentRingSab = ByteRing.create(64 * 1024);
  private readonly consoleRing = new ByteRing(this.consoleRingSab);
  private readonly agentRing = new ByteRing(this.agentRingSab);
  private consoleInput?: SerialInput;
  private powerButton?: PowerButton;
  /** Host input for ttyS0 and ttyS1, paced by each UART's receive FIFO and bounded. */
  private readonly consoleQueue = new InputQueue((b) => this.consoleInput?.inject(0, b) ?? 0, MAX_PENDING_INPUT);
  private readonly agentQueue = new InputQueue((b) => this.consoleInput?.inject(1, b) ?? 0, MAX_PENDING_INPUT);
  private draining = true;
  private endMessage?: string;
  /** The first unhandled exception the guest reported (docs/guest-contract.md): its power-off after that is a failure. */
  private guestFault?: Record<string, number>;
  private tearingDown?: Promise<VmExit>;
  /** The guest's kvm-clock as the pause stopped it (freezeGuestClock), until resume(). */
  private pausedGuestClock?: bigint;
  /** The pending pause's acknowledgement (see pause()), until resume(). */
  private pausing?: Promise<void>;
  /** vCPU 0 runs on this thread until its worker takes it over (StartOptions.firstVcpuOnMainThread). */
  private readonly vcpu0OnMainThread: boolean;
  private handoverTimer?: ReturnType<typeof setTimeout>;

  private constructor(spec: MachineSpec, opts: StartOptions = {}) {
    super();
    this.spec = spec;
    this.vcpu0OnMainThread = opts.firstVcpuOnMainThread === true && firstVcpuCanRunOnMainThread(spec);
    this.live = { haltPollNs: spec.haltPollNs, pin: spec.pin ? [...spec.pin] : undefined };
    this.control = new VmControl(spec.cpus);
    this.agentReader = new AgentLineReader((e) => {
      if (e.event === 'fault') this.guestFault ??= e.fields;
      this.emit('agent', e);
    });
    this.exited = new Promise((r) => { this.resolveExited = r; });
  }

  /** Builds and starts a VM. Throws (with every resource released) if it cannot start. */
  static async start(spec: MachineSpec, opts: StartOptions = {}): Promise<VirtualMachine> {
    const vm = new VirtualMachine(spec, opts);
    // Workers load their modules (tens of ms) while this thread builds the machine.
    if (!vm.vcpu0OnMainThread) vm.spawnWorkers();
    return vm.launch(() => buildMachineFromFiles(spec));
  }

  /** Runs a machine the builder made (it is the VM's from now on: released when the VM ends). */
  static async run(machine: BuiltMachine): Promise<VirtualMachine> {
    if (machine.isClosed) throw new Error('this machine was closed: build another');
    const vm = new VirtualMachine(machine.spec);
    vm.spawnWorkers();
    return vm.launch(async () => machine);
  }

  private async launch(build: () => Promise<BuiltMachine>): Promise<VirtualMachine> {
    try {
      // What the network back end needs from the host, before anything is built.
      await checkNetBackEnd(this.spec.net);
      traceStep('vm: network back end checked');
      this.attach(await build());
      traceStep('vm: machine built');
      await this.startIoWorker();
      if (!this.vcpu0OnMainThread) await this.launchWorkers();
      traceStep('vm: vCPU threads at the start barrier');
    } catch (e) {
      this.draining = false;
      // Workers already at the start barrier leave it without entering KVM_RUN.
      this.control.setCommand(COMMAND.stop);
      await (await this.release());
      throw e;
    }
    this.startedAt = performance.now();
    // A vCPU thread that failed at the start barrier has already begun the teardown.
    if (this.state === 'starting') this.setState('running');
    // vCPU 0 on this thread counts as a worker for the teardown from now on, although its first
    // slice comes only with the drains (a stop() before then finds it not started, and it never runs).
    let vcpu0Done: (() => void) | undefined;
    // Not a worker: release() counts only workers that have left (workersLeft), so this one is not counted.
    if (this.vcpu0OnMainThread) this.workerLeft.push(new Promise<void>((resolve) => { vcpu0Done = resolve; }));
    // Drain from the next macrotask: the caller's `await` continuation attaches its listeners first,
    // so the guest's first bytes (already in the rings) are never emitted to nobody.
    setImmediate(() => {
      void this.drain(this.consoleRing, (b) => this.emit('console', b));
      void this.drain(this.agentRing, (b) => { this.emit('agent-bytes', b); this.agentReader.push(b); });
      if (vcpu0Done) void this.runVcpu0Here().finally(vcpu0Done);
    });
    return this;
  }

  /** What a thread needs to drive `vcpu` (its worker, or this thread). */
  private threadData(vcpu: Vcpu): VcpuThreadData {
    const machine = this.machine!;
    return {
      vcpu: vcpu.handle(), vmFd: machine.vm.fd, cpus: this.spec.cpus, controlSab: this.control.sab,
      deviceSab: machine.deviceSab, board: machine.board, consoleRingSab: this.consoleRingSab, agentRingSab: this.agentRingSab,
    };
  }

  /**
   * Runs vCPU 0 on this thread (StartOptions.firstVcpuOnMainThread) in slices of
   * MAIN_THREAD_SLICE_MS, each ended by a timer signal (or any kick), with the event loop turning
   * in between; after HANDOVER_AFTER_MS its worker is started and, once loaded, takes the vCPU over
   * between two KVM_RUNs (VmControl's handover). Its end counts as a worker's exit for the teardown.
   */
  private async runVcpu0Here(): Promise<void> {
    const control = this.control;
    if (this.tearingDown || !this.machine) return;
    const vcpu = this.machine.vcpus[0]!;
    const tid = libc.gettid();
    let timer: ThreadTimer | undefined;
    let driver: ReturnType<typeof createVcpuDriver>;
    try {
      timer = new ThreadTimer();
      // Its end is recorded in the control block; the loop below starts the teardown.
      driver = createVcpuDriver(this.threadData(vcpu), (_code, message) => { this.endMessage ??= message; }, vcpu);
    } catch (e) {
      timer?.close();
      if (control.end(END.workerError, 0)) this.endMessage = `vCPU 0 could not start on the main thread: ${(e as Error).message}`;
      void this.teardown();
      return;
    }
    control.setTid(0, tid);
    control.markRunning(1);
    this.handoverTimer = setTimeout(() => this.startVcpu0Worker(tid), handoverAfterMs());
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
        let outcome;
        try {
          outcome = driver.run({ blockOnPause: false, yieldOnKick: () => true });
        } finally {
          timer.disarm();
        }
        if (outcome === 'ended') return;
        if (outcome === 'paused') {
          await control.waitWhilePausedAsync();
          if (control.command === COMMAND.run) vcpu.kvmclockStopped(); // as a worker does (vcpu-driver.ts)
        }
        else await new Promise((r) => setImmediate(r));
      }
    } finally {
      clearTimeout(this.handoverTimer);
      timer.close();
      if (control.tid(0) === tid) control.setTid(0, 0);
      control.markRunning(-1);
      // The guest's own end (or a failure) starts the teardown, as a worker's 'ended' does.
      if (control.endCode !== END.none && control.endCode !== END.stopped) void this.teardown();
    }
  }

  /**
   * Takes a worker from the pool for vCPU `i` and records when it has left its vCPU for good:
   * said 'exited' (and whether clean), or its thread ended.
   */
  private lendWorker(i: number): Worker {
    const worker = takeVcpuWorker();
    const loan: WorkerLoan = { handedOut: false, leftCleanly: false, spoiled: false, detach: [] };
    this.workers.push(worker);
    this.loans.set(worker, loan);
    const listen = <A extends unknown[]>(event: string, fn: (...a: A) => void) => {
      worker.on(event, fn as (...a: unknown[]) => void);
      loan.detach.push(() => worker.off(event, fn as (...a: unknown[]) => void));
    };
    this.workerLeft.push(new Promise<void>((resolve) => {
      listen('exit', (code: number) => { loan.spoiled = true; this.onWorkerExit(i, code); resolve(); });
      listen('message', (m: WorkerMessage) => {
        if (m.type === 'exited') { loan.leftCleanly = m.clean; resolve(); }
        this.onWorkerMessage(m);
      });
      // From the first KVM_RUN on, a crash ends the VM (before that, the start fails with it).
      listen('error', (e: Error) => { loan.spoiled = true; if (this.state !== 'starting') this.onWorkerCrash(i, e); });
    }).then(() => { this.workersLeft++; }));
    return worker;
  }

  /** Hands `worker` its vCPU. */
  private handOut(worker: Worker, data: VcpuWorkerData): void {
    this.loans.get(worker)!.handedOut = true;
    worker.postMessage(data);
  }

  /** vCPU 0's worker, told to take the vCPU over from this thread (`mainTid`) once it is loaded. */
  private startVcpu0Worker(mainTid: number): void {
    this.handoverTimer = undefined;
    if (this.tearingDown || this.control.endCode !== END.none || this.control.command === COMMAND.stop) return;
    const worker = this.lendWorker(0);
    this.handOut(worker, { ...this.threadData(this.machine!.vcpus[0]!), hostCpu: this.live.pin?.[0], takeOverFrom: { tid: mainTid } });
  }

  private setState(s: VmState): void {
    this.state = s;
    this.emit('state', s);
  }

  /** Takes the built machine: the host side of its devices, then the test seam before any KVM_RUN. */
  private attach(machine: BuiltMachine): void {
    this.machine = machine;
    const setIrq = (line: number, level: boolean) => machine.irq.set(line, level);
    this.consoleInput = new SerialInput(machine.deviceSab, setIrq);
    this.powerButton = new PowerButton(machine.deviceSab, setIrq);
    const hooks = this.spec.testHooks;
    if (hooks?.beforeFirstRun) {
      hooks.beforeFirstRun({ vcpus: machine.vcpus, memory: machine.memory, virtioEventFds: Object.fromEntries(machine.board.virtio.map((d) => [d.name, d.eventFd])) });
    }
  }

  /**
   * Starts the I/O thread when the board has virtio devices, and waits (asynchronously) until it
   * sleeps on their eventfds: from then on no notification of the guest's can be missed.
   */
  private async startIoWorker(): Promise<void> {
    const machine = this.machine!;
    if (machine.board.virtio.length === 0) return;
    const data: IoWorkerData = {
      deviceSab: machine.deviceSab, board: machine.board, ram: machine.memory.ramHandle(), vmFd: machine.vm.fd,
      controlSab: this.control.sab, cpus: this.control.cpus, wakeFd: machine.ioWakeFd,
    };
    const { Worker } = process.getBuiltinModule('node:worker_threads');
    const worker = new Worker(IO_WORKER_URL, { name: 'virtio-io', workerData: data });
    this.ioWorker = worker;
    this.ioWorkerExited = new Promise((resolve) => worker.once('exit', () => { this.ioWorkerGone = true; resolve(); }));
    let started = false;
    // A back end that fails ends the VM, as a vCPU worker's failure does.
    const fail = (message: string) => {
      if (this.control.end(END.workerError, -1)) this.endMessage = message;
      void this.teardown();
    };
    await new Promise<void>((resolve, reject) => {
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

  /** Wakes the I/O thread out of poll and waits for it to end (bounded: then it is terminated). */
  private async stopIoWorker(): Promise<void> {
    const worker = this.ioWorker;
    if (!worker || !this.machine) return;
    this.ioWorker = undefined;
    this.control.requestIoStop();
    this.wakeIoWorker();
    let timer: ReturnType<typeof setTimeout> | undefined;
    await Promise.race([this.ioWorkerExited, new Promise((r) => { timer = setTimeout(r, WORKER_EXIT_DEADLINE_MS); })]);
    clearTimeout(timer);
    await worker.terminate();
  }

  /** Tells the I/O thread to read its control words again (a pause, a resume, its stop). */
  private wakeIoWorker(): void {
    const fd = this.machine?.ioWakeFd ?? -1;
    if (fd >= 0) new EventFdWriter().signal(fd);
  }

  /** Counters of each virtio device (notifications by kind, interrupts, requests, bytes), read without the lock. */
  virtioCounters(): Partial<Record<PciDeviceName, VirtioCounters>> {
    const m = this.machine;
    if (!m) return this.finalVirtioCounters ?? {};
    // This thread's view of the functions, made once per machine: telemetry reads it 10 times a second.
    if (this.counterView?.machine !== m) {
      const noIo = { signalMsi: () => {}, signalEventFd: () => {}, setIoeventfd: () => {} };
      this.counterView = { machine: m, virtio: attachPci(m.deviceSab, m.board, noIo).virtio };
    }
    const out: Partial<Record<PciDeviceName, VirtioCounters>> = {};
    for (const v of this.counterView.virtio) out[v.name] = v.device.counters();
    return out;
  }

  private spawnWorkers(): void {
    for (let i = 0; i < this.spec.cpus; i++) this.lendWorker(i);
  }

  /**
   * Hands each worker its vCPU and waits (asynchronously: this thread never blocks) until every
   * one has reached the start barrier; the workers themselves hold each other there until the
   * last one arrives (VmControl.arriveAtStart).
   */
  private async launchWorkers(): Promise<void> {
    const machine = this.machine!;
    const ready = machine.vcpus.map((vcpu, i) => {
      const worker = this.workers[i]!;
      const data: VcpuWorkerData = { ...this.threadData(vcpu), hostCpu: this.live.pin?.[vcpu.id] };
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
      this.handOut(worker, data);
      return started;
    });
    await Promise.all(ready);
  }

  private onWorkerMessage(m: WorkerMessage): void {
    if (m.type === 'ended') {
      this.endMessage ??= m.message;
      void this.teardown();
    } else if (m.type === 'exited' && this.state === 'running' && this.control.runningWorkers === 0) {
      void this.teardown();
    }
  }

  /**
   * A worker that ends without saying so (terminated, its isolate out of memory, its thread
   * gone) ends its VM, never the process: the other vCPUs are stopped and the reason recorded.
   * A worker that ended normally has said 'ended' or 'exited' first, or the teardown has begun.
   */
  private onWorkerExit(vcpu: number, code: number): void {
    if (this.tearingDown || this.state === 'starting' || this.state === 'stopped') return;
    if (this.control.end(END.workerError, vcpu)) this.endMessage = `vCPU ${vcpu} worker exited unexpectedly (exit code ${code})`;
    void this.teardown();
  }

  private onWorkerCrash(vcpu: number, e: Error): void {
    if (this.control.end(END.workerError, vcpu)) this.endMessage = `vCPU ${vcpu} worker crashed: ${e.message}`;
    void this.teardown();
  }

  /** Sends bytes to the guest's console UART (ttyS0), as fast as its receive FIFO takes them. */
  sendConsole(bytes: Uint8Array | string): void {
    if (this.state === 'stopped' || this.state === 'stopping') return;
    this.consoleQueue.push(typeof bytes === 'string' ? new TextEncoder().encode(bytes) : bytes);
  }

  /**
   * Sends bytes to the guest's agent UART (ttyS1, COM2): command lines for the Linux agent
   * (`run pipe loops=1000\n`, native/guest/linux/agent/agent.c). Paced by the receive FIFO and
   * bounded like sendConsole (bytes past MAX_PENDING_INPUT are dropped and counted).
   */
  sendAgent(bytes: Uint8Array | string): void {
    if (this.state === 'stopped' || this.state === 'stopping') return;
    this.agentQueue.push(typeof bytes === 'string' ? new TextEncoder().encode(bytes) : bytes);
  }

  /** ttyS1 input bytes dropped because the guest did not read its UART (see MAX_PENDING_INPUT). */
  get droppedAgentInputBytes(): number {
    return this.agentQueue.dropped;
  }

  /**
   * Presses the ACPI power button (a graceful shutdown request). Returns whether the guest had
   * enabled power-button events; a guest without ACPI support ignores it (stop it with stop()).
   */
  async pressPowerButton(): Promise<boolean> {
    if (this.state !== 'running' || !this.powerButton) return false;
    return this.powerButton.press();
  }

  /** Changes the VM's maximum halt-polling time while it runs (KVM_CAP_HALT_POLL). */
  setHaltPollNs(ns: number): void {
    if (!this.machine) throw new Error('the VM is not running');
    this.machine.vm.enableCap(CAP.HALT_POLL, [ns]);
    this.live = { ...this.live, haltPollNs: ns };
  }

  /** Re-pins the vCPU threads while the VM runs (vCPU i -> hostCpus[i % length]); empty = unpinned. */
  setPin(hostCpus: readonly number[]): void {
    const all = allowedHostCpus();
    const vcpus = this.machine?.vcpus ?? [];
    vcpus.forEach((v, i) => {
      const tid = this.control.tid(v.id);
      // Never the main thread (running vCPU 0 at start): its worker takes the pin when it takes over.
      if (tid && tid !== process.pid) setThreadAffinity(tid, hostCpus.length ? [hostCpus[i % hostCpus.length]!] : all);
    });
    this.live = { ...this.live, pin: hostCpus.length ? vcpus.map((_, i) => hostCpus[i % hostCpus.length]!) : undefined };
  }

  /** The live knobs' current values: the spec's, as changed by setHaltPollNs and setPin since. */
  get knobs(): Readonly<LiveKnobs> {
    return this.live;
  }

  /**
   * Pauses the VM, as QEMU's `stop` does: every vCPU and the virtio I/O thread. The state reads
   * 'paused' at once; the promise resolves only when every vCPU thread has acknowledged it out of
   * KVM_RUN (VmControl.waitWhilePaused) and the I/O thread between two passes over its queues
   * (VmControl.acknowledgeIoPause), so from then on the guest makes no progress: no exits, no
   * console bytes, no virtio request served, no ring written, no interrupt sent, no received
   * frame written into the guest, and the guest's kvm-clock stands still (freezeGuestClock); every
   * console and agent byte the guest wrote before it stopped has been delivered (flushRings).
   * It also resolves if resume() or the VM's end comes first.
   */
  pause(): Promise<void> {
    if (this.state === 'paused') return this.pausing ?? Promise.resolve();
    if (this.state !== 'running') return Promise.resolve();
    this.control.setCommand(COMMAND.pause);
    this.kickAll();
    this.wakeIoWorker();
    this.setState('paused');
    this.pausing = this.pauseAcknowledged();
    return this.pausing;
  }

  /** Every thread that runs the guest has acknowledged the pause (the I/O thread where there is one). */
  private get pauseComplete(): boolean {
    return this.control.allWorkersPaused && (!this.ioWorker || this.ioWorkerGone || this.control.ioPaused);
  }

  private async pauseAcknowledged(): Promise<void> {
    while (this.control.command === COMMAND.pause && !this.pauseComplete) {
      await this.control.pausedCountChange(PAUSE_REKICK_MS);
      // A signal that lands while its thread is between KVM_RUNs is lost; immediate_exit catches
      // most of those, and kicking again until every thread answers catches the rest. The I/O
      // thread needs no second wake-up: its eventfd keeps the first until it polls (it may be in a
      // long disk request, which it finishes first).
      if (this.control.command === COMMAND.pause && !this.control.allWorkersPaused) this.kickAll();
    }
    if (this.control.command === COMMAND.pause && this.pauseComplete) {
      this.freezeGuestClock();
      // What the guest wrote before it stopped is delivered before pause() resolves: a caller
      // that counts output at the pause sees all of it, and nothing more comes until resume.
      this.flushRings();
    }
  }

  /**
   * Stops the guest's kvm-clock with its vCPUs, as QEMU's kvmclock does at `stop`: read now,
   * set back at resume, so a guest timing with kvm-clock (Linux on KVM without invariant TSC)
   * sees no time pass while paused — no jump of its monotonic clock, no timers all firing at
   * once. Each vCPU also tells its guest it was stopped (KVM_KVMCLOCK_CTRL, from its own thread
   * when it resumes: vcpu-driver.ts), so the guest's watchdog does not report the pause as a
   * lockup. A guest timing with the TSC itself still sees the pause, as under QEMU. Best effort:
   * where KVM cannot adjust the clock, or refuses, the guest's time runs on — the pause is no
   * less a pause.
   */
  private freezeGuestClock(): void {
    const vm = this.machine?.vm;
    try {
      if (vm && vm.checkExtension(CAP.ADJUST_CLOCK) > 0) this.pausedGuestClock = vm.getClock();
    } catch (e) {
      traceStep(`vm: the guest's clock runs on while paused (${(e as Error).message})`);
    }
  }

  /** At resume, before any vCPU runs: the guest's clock goes on from where the pause stopped it. */
  private thawGuestClock(): void {
    const clock = this.pausedGuestClock;
    this.pausedGuestClock = undefined;
    if (clock === undefined || !this.machine) return;
    try {
      this.machine.vm.setClock(clock);
    } catch (e) {
      traceStep(`vm: the guest's clock was not set back at resume (${(e as Error).message})`);
    }
  }

  /**
   * Runs the VM again: the vCPUs re-enter KVM_RUN, and the I/O thread serves what waited (the
   * notifications that came during the pause are still on the devices' eventfds, the frames
   * received meanwhile in the network back end's backlog).
   */
  resume(): void {
    if (this.state !== 'paused') return;
    this.pausing = undefined;
    this.thawGuestClock();
    this.control.setCommand(COMMAND.run);
    this.wakeIoWorker();
    this.setState('running');
  }

  /** Stops the VM at once (no guest cooperation) and releases everything. */
  stop(): Promise<VmExit> {
    this.control.end(END.stopped, -1);
    return this.teardown();
  }

  private kickAll(): void {
    for (const vcpu of this.machine?.vcpus ?? []) {
      vcpu.setImmediateExit(true);
      const tid = this.control.tid(vcpu.id);
      if (tid) kickThread(tid);
    }
  }

  private teardown(): Promise<VmExit> {
    this.tearingDown ??= (async () => {
      this.setState('stopping');
      traceStep('vm: stop begins');
      for (const t of this.control.startTimeline()) if (t.enteredAt) traceStep(`vcpu ${t.vcpu}: first KVM_RUN`, t.enteredAt);
      this.control.setCommand(COMMAND.stop);
      this.kickAll();
      const deadline = setTimeout(() => {
        // A worker stuck in a native call cannot be interrupted; terminating it is the last resort
        // (and it is never reused).
        for (const w of this.workers) { this.loans.get(w)!.spoiled = true; void w.terminate(); }
      }, WORKER_EXIT_DEADLINE_MS);
      // Keep kicking until every worker is out: a kick can land just before KVM_RUN is entered.
      const rekick = setInterval(() => this.kickAll(), 50);
      // Out of KVM_RUN for good is enough to close the vCPUs: the threads' own ends (an isolate's
      // teardown, ~5 ms) overlap the release (see release()).
      await Promise.all(this.workerLeft);
      traceStep('vm: every vCPU out of KVM_RUN');
      clearInterval(rekick);
      clearTimeout(deadline);
      this.draining = false;
      this.flushRings();
      const code = this.control.endCode;
      const faulted = this.guestFault !== undefined && isCleanExit(END_KIND[code]);
      const exit: VmExit = {
        kind: faulted ? 'guest-fault' : END_KIND[code],
        message: faulted ? describeGuestFault(this.guestFault!) : this.endMessage ?? (code === END.stopped ? 'stopped by the user' : 'the VM stopped'),
        ...(this.control.endVcpu >= 0 && code !== END.stopped ? { vcpu: this.control.endVcpu } : {}),
      };
      const threadsEnded = await this.release();
      // Every fd closed and guest RAM returned: the VM is stopped. `exited` (and stop()) also wait
      // for the worker threads that are not reused to have ended, so a caller that awaits them
      // finds no thread of this VM left: the others are idle in the pool (named vcpu-idle).
      this.setState('stopped');
      traceStep('vm: fds closed, guest RAM returned');
      this.emit('exit', exit);
      await threadsEnded;
      this.resolveExited(exit);
      return exit;
    })();
    return this.tearingDown;
  }

  /**
   * Gives the workers back to the pool or ends them, and releases the machine (fds, guest RAM).
   * Resolves once the machine is released, with a promise for the ended threads' ends: a worker
   * that has left its vCPU needs nothing of the machine any more, so its isolate's teardown
   * overlaps the release.
   */
  private async release(): Promise<Promise<unknown>> {
    this.consoleQueue.close();
    this.agentQueue.close();
    // Reused: a worker that left its vCPU cleanly, or never got one (a start that failed before).
    // Ended: one that crashed, ended, was terminated or did not leave cleanly.
    const reusable = (w: Worker) => {
      const loan = this.loans.get(w)!;
      return !loan.spoiled && (loan.handedOut ? loan.leftCleanly : true);
    };
    for (const loan of this.loans.values()) loan.detach.forEach((off) => off());
    const ending = this.workers.filter((w) => !reusable(w));
    // Never terminate a worker still loading its modules (whenLoaded says why); bounded, as a
    // worker that cannot load ends by itself.
    let loadWait: ReturnType<typeof setTimeout> | undefined;
    await Promise.race([Promise.all(ending.map(whenLoaded)), new Promise((r) => { loadWait = setTimeout(r, WORKER_LOAD_WAIT_MS); })]);
    clearTimeout(loadWait);
    const threadsEnded = Promise.all([
      ...ending.map((w) => w.terminate()),
      // The pool ends those beyond its limit.
      ...this.workers.filter(reusable).map(returnVcpuWorker),
    ]);
    // A worker that has not left its vCPU (a start that failed: it may be at the start barrier)
    // is gone before its vCPU's run page is unmapped.
    if (this.workersLeft < this.workers.length) await threadsEnded;
    await this.stopIoWorker();
    if (this.machine?.board.virtio.length) this.finalVirtioCounters = this.virtioCounters();
    await this.machine?.close();
    this.counterView = undefined;
    // Guest RAM's SAB goes with the last reference: this one, then the workers'.
    this.machine = undefined;
    this.consoleInput = undefined;
    this.powerButton = undefined;
    return threadsEnded;
  }

  private flushRings(): void {
    const c = this.consoleRing.drain();
    if (c.length) this.emit('console', c);
    const a = this.agentRing.drain();
    if (a.length) { this.emit('agent-bytes', a); this.agentReader.push(a); }
  }

  /** KVM binary stats fds of the VM and each vCPU (-1: the host's KVM has no binary stats). */
  statsFds(): { vm: number; vcpus: readonly number[] } {
    return this.machine?.statsFds ?? { vm: -1, vcpus: [] };
  }

  /**
   * When each vCPU thread reached the start barrier and when it left it for its first KVM_RUN
   * (absolute ms, VcpuStartTimes): start-up latency per vCPU, and the evidence that no vCPU ran
   * before every thread was ready.
   */
  startTimeline(): VcpuStartTimes[] {
    return this.control.startTimeline();
  }

  /** Host thread ids of the vCPU workers (0 once a worker has exited). */
  vcpuThreadIds(): number[] {
    return (this.machine?.vcpus ?? []).map((v) => this.control.tid(v.id));
  }

  /** Console input bytes dropped because the guest did not read its UART (see MAX_PENDING_INPUT). */
  get droppedConsoleInputBytes(): number {
    return this.consoleQueue.dropped;
  }

  /** Console bytes dropped because nobody drained them fast enough. */
  get droppedConsoleBytes(): number {
    return this.consoleRing.dropped();
  }

  private async drain(ring: ByteRing, sink: (b: Uint8Array) => void): Promise<void> {
    while (this.draining) {
      const bytes = ring.drain();
      if (bytes.length) {
        sink(bytes);
        // While output streams, collect it for a millisecond before draining again: waking this
        // thread from a vCPU costs tens of µs, so this caps wake-ups at about 1000 per second.
        await new Promise((r) => setTimeout(r, 1));
      } else {
        await ring.waitForData(100);
      }
    }
  }

}

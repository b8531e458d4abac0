// The runtime of one virtual machine, its life cycle: runs a machine the builder made
// (builder/build-machine.ts) with one worker thread per vCPU, applies live knob changes (explicit
// state: LiveKnobs, never an edit of the spec), pauses and resumes it, and tears everything down
// however it ends. The pieces it drives are runtime/'s: the workers on loan, vCPU 0 on the main
// thread, the I/O thread, the serial channels, the pause, how a VM ended. The main thread only
// dispatches here: it never blocks on a device lock, a worker or a file (docs/architecture.md).
import { EventEmitter } from 'node:events';
import { CAP } from '../../native/kvm/abi.ts';
import { allowedHostCpus, setThreadAffinity } from '../../native/kvm/affinity.ts';
import { kickThread } from '../../native/kvm/kick.ts';
import type { AgentEvent, AgentLineReader } from './agent/line-protocol.ts';
import { buildMachineFromFiles, type BuiltMachine } from './builder/build-machine.ts';
import { PowerButton } from './devices/board.ts';
import { checkNetBackEnd } from './devices/virtio/net-preflight.ts';
import type { LiveKnobs, MachineSpec } from './machine-spec.ts';
import { GuestChannels } from './runtime/guest-channels.ts';
import type { GuestFault } from './runtime/guest-fault.ts';
import { IoThread } from './runtime/io-thread.ts';
import { firstVcpuCanRunOnMainThread, runVcpu0OnMainThread } from './runtime/main-thread-vcpu.ts';
import { GuestClockFreeze, pauseTakesHold } from './runtime/pause.ts';
import { VcpuWorkers } from './runtime/vcpu-workers.ts';
import { VirtioCounterReader, type VirtioCountersByDevice } from './runtime/virtio-counters.ts';
import { vmEnd, type VmEnd } from './runtime/vm-end.ts';
import { traceStep } from './start-trace.ts';
import { COMMAND, END, type EndCode, VmControl, type VcpuStartTimes } from './shared/control.ts';
import type { VcpuThreadData } from './vcpu/vcpu-driver.ts';
import type { WorkerMessage } from './vcpu/vcpu-worker.ts';
import type { Vcpu } from '../../native/kvm/kvm.ts';

export type VmState = 'starting' | 'running' | 'paused' | 'stopping' | 'stopped';

/** How long the teardown waits for the vCPU threads to leave KVM_RUN before it terminates them. */
const WORKER_EXIT_DEADLINE_MS = 5000;

export interface VmEvents {
  console: [bytes: Uint8Array];
  agent: [event: AgentEvent];
  'agent-bytes': [bytes: Uint8Array];
  state: [state: VmState];
  end: [end: VmEnd];
}

export interface StartOptions {
  /**
   * Run vCPU 0 on this thread from the start, until its worker has booted (`unhalt run`: a process
   * with one VM, whose guest may be gone before any worker would be ready). Only where
   * firstVcpuCanRunOnMainThread(spec) holds; otherwise ignored.
   */
  firstVcpuOnMainThread?: boolean;
}

export class VirtualMachine extends EventEmitter<VmEvents> {
  /** The spec it was built from, never changed (live changes: knobs). */
  readonly spec: Readonly<MachineSpec>;
  state: VmState = 'starting';
  /** Resolves once the VM is stopped and every resource is released. */
  readonly ended: Promise<VmEnd>;
  readonly control: VmControl;
  startedAt = 0;
  private resolveEnded!: (e: VmEnd) => void;
  /** The built machine while it runs; dropped at release so guest RAM can be collected. */
  private machine?: BuiltMachine;
  /** The live knobs' current values (start: the spec's). */
  private live: LiveKnobs;
  private readonly workers: VcpuWorkers;
  /** The I/O thread serving the virtio devices' queues (none without virtio devices). */
  private io?: IoThread;
  private readonly channels: GuestChannels;
  private powerButton?: PowerButton;
  private readonly virtio = new VirtioCounterReader();
  private endMessage?: string;
  /** The first unhandled exception the guest reported (docs/guest-contract.md): its power-off after that is a failure. */
  private guestFault?: GuestFault;
  private tearingDown?: Promise<VmEnd>;
  private readonly clock = new GuestClockFreeze();
  /** The pending pause's acknowledgement (see pause()), until resume(). */
  private pausing?: Promise<void>;
  /** vCPU 0 runs on this thread until its worker takes it over (StartOptions.firstVcpuOnMainThread). */
  private readonly vcpu0OnMainThread: boolean;

  private constructor(spec: MachineSpec, opts: StartOptions = {}) {
    super();
    this.spec = spec;
    this.vcpu0OnMainThread = opts.firstVcpuOnMainThread === true && firstVcpuCanRunOnMainThread(spec);
    this.live = { haltPollNs: spec.haltPollNs, pin: spec.pin ? [...spec.pin] : undefined };
    this.control = new VmControl(spec.cpus);
    this.channels = new GuestChannels({
      console: (b) => this.emit('console', b),
      agentBytes: (b) => this.emit('agent-bytes', b),
      agentEvent: (e) => {
        if (e.event === 'fault') this.guestFault ??= e.fields;
        this.emit('agent', e);
      },
    });
    this.workers = new VcpuWorkers({
      message: (m) => this.onWorkerMessage(m),
      exit: (vcpu, code) => this.onWorkerExit(vcpu, code),
      crash: (vcpu, e) => this.endWith(END.crash, vcpu, `vCPU ${vcpu} worker crashed: ${e.message}`),
      starting: () => this.state === 'starting',
    });
    this.ended = new Promise((r) => { this.resolveEnded = r; });
  }

  /** Builds and starts a VM. Throws (with every resource released) if it cannot start. */
  static async start(spec: MachineSpec, opts: StartOptions = {}): Promise<VirtualMachine> {
    const vm = new VirtualMachine(spec, opts);
    // Workers load their modules (tens of ms) while this thread builds the machine.
    if (!vm.vcpu0OnMainThread) vm.lendWorkers();
    return vm.launch(() => buildMachineFromFiles(spec));
  }

  /** Runs a machine the builder made (it is the VM's from now on: released when the VM ends). */
  static async run(machine: BuiltMachine): Promise<VirtualMachine> {
    if (machine.isClosed) throw new Error('this machine was closed: build another');
    const vm = new VirtualMachine(machine.spec);
    vm.lendWorkers();
    return vm.launch(async () => machine);
  }

  /** The parser of the agent's lines (ttyS1), with its count of malformed ones. */
  get agentReader(): AgentLineReader {
    return this.channels.agentReader;
  }

  private async launch(build: () => Promise<BuiltMachine>): Promise<VirtualMachine> {
    try {
      // What the network back end needs from the host, before anything is built.
      await checkNetBackEnd(this.spec.net);
      traceStep('vm: network back end checked');
      this.attach(await build());
      traceStep('vm: machine built');
      this.io = IoThread.start(this.machine!, this.control, (message) => this.endWith(END.crash, -1, message));
      await this.io?.ready;
      if (!this.vcpu0OnMainThread) {
        await this.workers.launch(this.machine!.vcpus.map((vcpu) => ({ ...this.threadData(vcpu), hostCpu: this.live.pin?.[vcpu.id] })));
      }
      traceStep('vm: vCPU threads at the start barrier');
    } catch (e) {
      this.channels.stopDraining();
      // Workers already at the start barrier leave it without entering KVM_RUN.
      this.control.setCommand(COMMAND.stop);
      await (await this.release());
      throw e;
    }
    this.startedAt = performance.now();
    // A vCPU thread that failed at the start barrier has already begun the teardown.
    if (this.state === 'starting') this.setState('running');
    // vCPU 0 on this thread counts as a vCPU thread for the teardown from now on, although its first
    // slice comes only with the drains (a stop() before then finds it not started, and it never runs).
    let vcpu0Done: (() => void) | undefined;
    if (this.vcpu0OnMainThread) this.workers.alsoAwait(new Promise<void>((resolve) => { vcpu0Done = resolve; }));
    // Drain from the next macrotask: the caller's `await` continuation attaches its listeners first,
    // so the guest's first bytes (already in the rings) are never emitted to nobody.
    setImmediate(() => {
      this.channels.startDraining();
      if (vcpu0Done) void this.runVcpu0Here().finally(vcpu0Done);
    });
    return this;
  }

  /** What a thread needs to drive `vcpu` (its worker, or this thread). */
  private threadData(vcpu: Vcpu): VcpuThreadData {
    const machine = this.machine!;
    return {
      vcpu: vcpu.handle(), vmFd: machine.vm.fd, cpus: this.spec.cpus, controlSab: this.control.sab, deviceSab: machine.deviceSab,
      board: machine.board, consoleRingSab: this.channels.consoleRingSab, agentRingSab: this.channels.agentRingSab,
    };
  }

  /** vCPU 0 on this thread until its worker takes it over (runtime/main-thread-vcpu.ts). */
  private async runVcpu0Here(): Promise<void> {
    if (this.tearingDown || !this.machine) return;
    const vcpu = this.machine.vcpus[0]!;
    await runVcpu0OnMainThread(vcpu, {
      control: this.control,
      threadData: () => this.threadData(vcpu),
      noteEnd: (message) => { this.endMessage ??= message; },
      fail: (message) => this.endWith(END.crash, 0, message),
      teardown: () => void this.teardown(),
      startWorker: (tid) => {
        if (this.tearingDown || this.control.endCode !== END.none || this.control.command === COMMAND.stop) return;
        const worker = this.workers.lend(0);
        this.workers.handOut(worker, { ...this.threadData(this.machine!.vcpus[0]!), hostCpu: this.live.pin?.[0], takeOverFrom: { tid } });
      },
    });
  }

  private lendWorkers(): void {
    for (let i = 0; i < this.spec.cpus; i++) this.workers.lend(i);
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
    this.endWith(END.crash, vcpu, `vCPU ${vcpu} worker exited unexpectedly (exit code ${code})`);
  }

  /** Records how the VM ended, unless something else ended it first, and begins the teardown. */
  private endWith(code: EndCode, vcpu: number, message: string): void {
    if (this.control.end(code, vcpu)) this.endMessage = message;
    void this.teardown();
  }

  /** Sends bytes to the guest's console UART (ttyS0), as fast as its receive FIFO takes them. */
  sendConsole(bytes: Uint8Array | string): void {
    if (this.state === 'stopped' || this.state === 'stopping') return;
    this.channels.sendConsole(bytes);
  }

  /**
   * Sends bytes to the guest's agent UART (ttyS1, COM2): command lines for the Linux agent
   * (`run pipe loops=1000\n`, native/guest/linux/agent/agent.c). Paced by the receive FIFO and
   * bounded like sendConsole (bytes past MAX_PENDING_INPUT are dropped and counted).
   */
  sendAgent(bytes: Uint8Array | string): void {
    if (this.state === 'stopped' || this.state === 'stopping') return;
    this.channels.sendAgent(bytes);
  }

  /** ttyS1 input bytes dropped because the guest did not read its UART (see MAX_PENDING_INPUT). */
  get droppedAgentInputBytes(): number {
    return this.channels.droppedAgentInputBytes;
  }

  /** Console input bytes dropped because the guest did not read its UART (see MAX_PENDING_INPUT). */
  get droppedConsoleInputBytes(): number {
    return this.channels.droppedConsoleInputBytes;
  }

  /** Console bytes dropped because nobody drained them fast enough. */
  get droppedConsoleBytes(): number {
    return this.channels.droppedConsoleBytes;
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
   * frame written into the guest, and the guest's kvm-clock stands still (GuestClockFreeze); every
   * console and agent byte the guest wrote before it stopped has been delivered.
   * It also resolves if resume() or the VM's end comes first.
   */
  pause(): Promise<void> {
    if (this.state === 'paused') return this.pausing ?? Promise.resolve();
    if (this.state !== 'running') return Promise.resolve();
    this.control.setCommand(COMMAND.pause);
    this.kickAll();
    this.io?.wake();
    this.setState('paused');
    this.pausing = this.pauseAcknowledged();
    return this.pausing;
  }

  private async pauseAcknowledged(): Promise<void> {
    if (await pauseTakesHold(this.control, () => !this.io || this.io.paused, () => this.kickAll())) {
      this.clock.freeze(this.machine?.vm);
      // What the guest wrote before it stopped is delivered before pause() resolves: a caller
      // that counts output at the pause sees all of it, and nothing more comes until resume.
      this.channels.flush();
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
    this.clock.thaw(this.machine?.vm);
    this.control.setCommand(COMMAND.run);
    this.io?.wake();
    this.setState('running');
  }

  /** Stops the VM at once (no guest cooperation) and releases everything. */
  stop(): Promise<VmEnd> {
    this.control.end(END.stopped, -1);
    return this.teardown();
  }

  /** Out of KVM_RUN, every vCPU: immediate_exit for one about to enter, a signal for one inside. */
  private kickAll(): void {
    for (const vcpu of this.machine?.vcpus ?? []) {
      vcpu.setImmediateExit(true);
      const tid = this.control.tid(vcpu.id);
      if (tid) kickThread(tid);
    }
  }

  private setState(s: VmState): void {
    this.state = s;
    this.emit('state', s);
  }

  /** Takes the built machine: the host side of its devices, then the test seam before any KVM_RUN. */
  private attach(machine: BuiltMachine): void {
    this.machine = machine;
    const setIrq = (line: number, level: boolean) => machine.irq.set(line, level);
    this.channels.connect(machine.deviceSab, setIrq);
    this.powerButton = new PowerButton(machine.deviceSab, setIrq);
    const hooks = this.spec.testHooks;
    if (hooks?.beforeFirstRun) {
      hooks.beforeFirstRun({ vcpus: machine.vcpus, memory: machine.memory, virtioEventFds: Object.fromEntries(machine.board.virtio.map((d) => [d.name, d.eventFd])) });
    }
  }

  private teardown(): Promise<VmEnd> {
    this.tearingDown ??= (async () => {
      this.setState('stopping');
      traceStep('vm: stop begins');
      for (const t of this.control.startTimeline()) if (t.enteredAt) traceStep(`vcpu ${t.vcpu}: first KVM_RUN`, t.enteredAt);
      this.control.setCommand(COMMAND.stop);
      this.kickAll();
      // A worker stuck in a native call cannot be interrupted; terminating it is the last resort.
      const deadline = setTimeout(() => this.workers.terminateAll(), WORKER_EXIT_DEADLINE_MS);
      // Keep kicking until every worker is out: a kick can land just before KVM_RUN is entered.
      const rekick = setInterval(() => this.kickAll(), 50);
      // Out of KVM_RUN for good is enough to close the vCPUs: the threads' own ends (an isolate's
      // teardown, ~5 ms) overlap the release (see release()).
      await this.workers.allLeft();
      traceStep('vm: every vCPU out of KVM_RUN');
      clearInterval(rekick);
      clearTimeout(deadline);
      this.channels.stopDraining();
      this.channels.flush();
      const end = vmEnd(this.control.endCode, this.control.endVcpu, this.endMessage, this.guestFault, this.control.endValue);
      const threadsEnded = await this.release();
      // Every fd closed and guest RAM returned: the VM is stopped. `ended` (and stop()) also wait
      // for the worker threads that are not reused to have ended, so a caller that awaits them
      // finds no thread of this VM left: the others are idle in the pool (named vcpu-idle).
      this.setState('stopped');
      traceStep('vm: fds closed, guest RAM returned');
      this.emit('end', end);
      await threadsEnded;
      this.resolveEnded(end);
      return end;
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
    this.channels.closeInput();
    const { threadsEnded } = await this.workers.release();
    await this.io?.stop();
    if (this.machine) this.virtio.keepFinal(this.machine);
    await this.machine?.close();
    this.virtio.forget();
    // Guest RAM's SAB goes with the last reference: this one, then the workers'.
    this.machine = undefined;
    this.channels.disconnect();
    this.powerButton = undefined;
    return threadsEnded;
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

  /** Counters of each virtio device (notifications by kind, interrupts, requests, bytes), read without the lock. */
  virtioCounters(): VirtioCountersByDevice {
    return this.virtio.read(this.machine);
  }
}

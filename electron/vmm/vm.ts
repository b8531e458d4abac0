// One running virtual machine: builds it (memory, firmware tables, kernel, vCPUs), runs one
// worker thread per vCPU, drains console output, and tears everything down however it ends.
import { EventEmitter } from 'node:events';
import type { Worker } from 'node:worker_threads';
import { takeVcpuWorker, whenLoaded } from './vcpu/worker-pool.ts';
import { CAP } from '../../native/kvm/abi.ts';
import { missingCapability } from './machine/required-caps.ts';
import { IrqLine, Kvm, type Vcpu, type Vm } from '../../native/kvm/kvm.ts';
import { installKickHandler, kickThread } from '../../native/kvm/kick.ts';
import { closeFd } from '../../native/kvm/libc.ts';
import { allowedHostCpus, setThreadAffinity } from '../../native/kvm/affinity.ts';
import { AgentLineReader, type AgentEvent } from './agent/line-protocol.ts';
import { type BootPlan } from './boot/boot-plan.ts';
import { describeUnknownKernel, detectKernelFormat } from './boot/kernel-format.ts';
import { E820_RAM, E820_RESERVED, type E820Entry, LAYOUT } from './boot/layout.ts';
import { loadBzImage, parseSetupHeader } from './boot/bzimage.ts';
import { loadPvh } from './boot/pvh.ts';
import { readBootFiles, type BootFiles } from './boot/boot-files.ts';
import { checkInitrd } from './boot/initrd.ts';
import { buildCpuid, hostKvmFeatures } from './cpu/cpuid.ts';
import { setBootCpuState, setBootMsrs, setLapicLints } from './cpu/boot-state.ts';
import { ByteRing } from './devices/byte-ring.ts';
import { PowerButton, SerialInput, createDeviceState } from './devices/board.ts';
import { InputQueue } from './devices/input-queue.ts';
import { buildAcpiTables } from './firmware/acpi.ts';
import { GuestMemory, HIGH_MEMORY_START, MiB } from './memory/guest-memory.ts';
import { COMMAND, END, type EndCode, VmControl, type VcpuStartTimes } from './vcpu/control.ts';
import type { VcpuWorkerData, WorkerMessage } from './vcpu/vcpu-worker.ts';

/** Everything needed to start a machine, already validated and resolved (see config/). */
export interface MachineSpec {
  name: string;
  cpus: number;
  memoryMiB: number;
  kernelPath: string;
  initrdPath?: string;
  cmdline: string;
  /** CPUID 0x40000001 EAX / EDX; by default what the host's KVM supports. */
  kvmFeatures?: number;
  kvmHints?: number;
  /** Host CPU per vCPU (round-robin already applied), or none. */
  pin?: number[];
  haltPollNs?: number;
  memLock?: boolean;
  /** KVM_X86_DISABLE_EXITS mask (cpu-pm=on), enabled before any vCPU is created. */
  disableExits?: number;
  /** Advertise MONITOR/MWAIT (only when MWAIT exits are disabled). */
  mwait?: boolean;
  /** Tests only (never set from a config): ways to make a guest fail on purpose. */
  testHooks?: VmTestHooks;
}

/**
 * Test seam for guest faults (test/kvm/faults.test.ts): the host then produces the fault for real
 * and it goes through the real exit handling, the VM's teardown and its exit record. Exits no
 * host can be made to produce are unit-tested at the dispatch instead (exit-dispatch.test.ts).
 */
export interface VmTestHooks {
  /**
   * Main thread, after the machine is built and before any vCPU first enters KVM_RUN: put a
   * vCPU into a state the boot code never would (invalid KVM_SET_SREGS, code the host's
   * instruction emulator lacks) so that the host produces the fault for real.
   */
  beforeFirstRun?(ctx: { vcpus: readonly Vcpu[]; memory: GuestMemory }): void;
}

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
/** How long a release waits for workers still loading their modules (seconds under emulation). */
const WORKER_LOAD_WAIT_MS = 30_000;
/** How long pause() waits for the vCPU threads to acknowledge before it kicks them again. */
const PAUSE_REKICK_MS = 50;
/** Console input waiting for a guest that does not read it: at most this much is kept. */
export const MAX_PENDING_INPUT = 1024 * 1024;

export interface VmEvents {
  console: [bytes: Uint8Array];
  agent: [event: AgentEvent];
  'agent-bytes': [bytes: Uint8Array];
  state: [state: VmState];
  exit: [exit: VmExit];
}

export class VirtualMachine extends EventEmitter<VmEvents> {
  readonly spec: MachineSpec;
  state: VmState = 'starting';
  /** Resolves once the VM is stopped and every resource is released. */
  readonly exited: Promise<VmExit>;
  readonly control: VmControl;
  readonly agentReader: AgentLineReader;
  startedAt = 0;
  private resolveExited!: (e: VmExit) => void;
  private kvm?: Kvm;
  private vm?: Vm;
  private memory?: GuestMemory;
  private vcpus: Vcpu[] = [];
  /** KVM binary stats fds, taken before any vCPU first enters KVM_RUN (-1 where unavailable). */
  private vcpuStatsFds: number[] = [];
  private vmStatsFd = -1;
  private workers: Worker[] = [];
  private workerExited: Promise<void>[] = [];
  private readonly consoleRingSab = ByteRing.create(64 * 1024);
  private readonly agentRingSab = ByteRing.create(64 * 1024);
  private readonly consoleRing = new ByteRing(this.consoleRingSab);
  private readonly agentRing = new ByteRing(this.agentRingSab);
  private readonly deviceSab: SharedArrayBuffer;
  private consoleInput?: SerialInput;
  private powerButton?: PowerButton;
  /** Host input for ttyS0 and ttyS1, paced by each UART's receive FIFO and bounded. */
  private readonly consoleQueue = new InputQueue((b) => this.consoleInput?.inject(0, b) ?? 0, MAX_PENDING_INPUT);
  private readonly agentQueue = new InputQueue((b) => this.consoleInput?.inject(1, b) ?? 0, MAX_PENDING_INPUT);
  /** ttyS1 input (sendAgent), paced and bounded like the console's. */
  private draining = true;
  private endMessage?: string;
  /** The first unhandled exception the guest reported (docs/guest-contract.md): its power-off after that is a failure. */
  private guestFault?: Record<string, number>;
  private tearingDown?: Promise<VmExit>;
  /** The pending pause's acknowledgement (see pause()), until resume(). */
  private pausing?: Promise<void>;

  private constructor(spec: MachineSpec) {
    super();
    this.spec = spec;
    this.control = new VmControl(spec.cpus);
    this.deviceSab = createDeviceState();
    this.agentReader = new AgentLineReader((e) => {
      if (e.event === 'fault') this.guestFault ??= e.fields;
      this.emit('agent', e);
    });
    this.exited = new Promise((r) => { this.resolveExited = r; });
  }

  /** Builds and starts a VM. Throws (with every resource released) if it cannot start. */
  static async start(spec: MachineSpec): Promise<VirtualMachine> {
    const vm = new VirtualMachine(spec);
    // Workers load their modules (tens of ms) while this thread builds the machine.
    vm.spawnWorkers();
    try {
      // Read asynchronously: this thread also answers the service's clients.
      const files = await readBootFiles(spec);
      if (files.initrd) await checkInitrd(files.initrd, spec.initrdPath!);
      vm.build(files);
      await vm.launchWorkers();
    } catch (e) {
      vm.draining = false;
      // Workers already at the start barrier leave it without entering KVM_RUN.
      vm.control.setCommand(COMMAND.stop);
      await vm.release();
      throw e;
    }
    vm.startedAt = performance.now();
    // A vCPU thread that failed at the start barrier has already begun the teardown.
    if (vm.state === 'starting') vm.setState('running');
    // Drain from the next macrotask: the caller's `await` continuation attaches its listeners first,
    // so the guest's first bytes (already in the rings) are never emitted to nobody.
    setImmediate(() => {
      void vm.drain(vm.consoleRing, (b) => vm.emit('console', b));
      void vm.drain(vm.agentRing, (b) => { vm.emit('agent-bytes', b); vm.agentReader.push(b); });
    });
    return vm;
  }

  private setState(s: VmState): void {
    this.state = s;
    this.emit('state', s);
  }

  private build(files: BootFiles): void {
    const spec = this.spec;
    const kernel = files.kernel.bytes;
    const initrd = files.initrd;
    const format = detectKernelFormat(kernel);
    if (format === 'bzimage') parseSetupHeader(kernel, spec.kernelPath); // refuse a bad bzImage before KVM is touched
    if (format === 'unknown') throw new Error(`${spec.kernelPath}: ${describeUnknownKernel(kernel, files.kernel.fileSize)}`);

    const kvm = this.kvm = Kvm.open();
    const missing = missingCapability((cap) => kvm.checkExtension(cap));
    if (missing) throw new Error(missing);
    installKickHandler();

    const vm = this.vm = kvm.createVm();
    vm.setTssAddr(LAYOUT.tssAddr);
    vm.setIdentityMapAddr(LAYOUT.identityMap);
    vm.createIrqchip();
    vm.createPit2();
    if (spec.haltPollNs !== undefined) vm.enableCap(CAP.HALT_POLL, [spec.haltPollNs]);
    // KVM accepts this only before the first vCPU exists.
    if (spec.disableExits) vm.enableCap(CAP.X86_DISABLE_EXITS, [spec.disableExits]);

    const mem = this.memory = new GuestMemory(spec.memoryMiB * MiB);
    if (spec.memLock) mem.lock();
    for (const r of mem.regions) {
      vm.setUserMemoryRegion({ slot: r.slot, guestPhysAddr: r.guestPhysAddr, memorySize: r.size, userspaceAddr: r.hostAddress });
    }

    const acpi = buildAcpiTables({ cpus: spec.cpus, baseAddress: LAYOUT.acpi });
    mem.write(LAYOUT.acpi, acpi.bytes);
    const bootInput = { kernel, initrd, cmdline: spec.cmdline, rsdpAddress: acpi.rsdpAddress, e820: memoryMap(mem) };
    const plan: BootPlan = format === 'bzimage' ? loadBzImage(mem, bootInput) : loadPvh(mem, bootInput);

    const statsEnabled = kvm.checkExtension(CAP.BINARY_STATS_FD) > 0;
    if (statsEnabled) this.vmStatsFd = vm.statsFd();
    const supported = kvm.supportedCpuid();
    const host = hostKvmFeatures(supported);
    const kvmFeatures = spec.kvmFeatures ?? host.features;
    const kvmHints = spec.kvmHints ?? host.hints;
    const tscDeadline = kvm.checkExtension(CAP.TSC_DEADLINE_TIMER) > 0;
    for (let i = 0; i < spec.cpus; i++) {
      const vcpu = vm.createVcpu(i);
      this.vcpus.push(vcpu);
      this.vcpuStatsFds.push(statsEnabled ? vcpu.statsFd() : -1);
      vcpu.setCpuid2(buildCpuid(supported, { vcpuId: i, cpus: spec.cpus, kvmFeatures, kvmHints, tscDeadline, mwait: spec.mwait ?? false }));
      setBootMsrs(vcpu);
      setLapicLints(vcpu);
      if (i === 0) setBootCpuState(vcpu, mem, plan);
    }
    const irq = new IrqLine(vm.fd);
    this.consoleInput = new SerialInput(this.deviceSab, (line, level) => irq.set(line, level));
    this.powerButton = new PowerButton(this.deviceSab, (line, level) => irq.set(line, level));
    spec.testHooks?.beforeFirstRun?.({ vcpus: this.vcpus, memory: mem });
  }

  private spawnWorkers(): void {
    for (let i = 0; i < this.spec.cpus; i++) {
      const worker = takeVcpuWorker(`vcpu-${i}`);
      this.workers.push(worker);
      this.workerExited.push(new Promise((resolve) => worker.once('exit', () => resolve())));
      worker.on('message', (m: WorkerMessage) => this.onWorkerMessage(m));
    }
  }

  /**
   * Hands each worker its vCPU and waits (asynchronously: this thread never blocks) until every
   * one has reached the start barrier; the workers themselves hold each other there until the
   * last one arrives (VmControl.arriveAtStart).
   */
  private async launchWorkers(): Promise<void> {
    const ready = this.vcpus.map((vcpu, i) => {
      const worker = this.workers[i]!;
      const data: VcpuWorkerData = {
        vcpu: vcpu.handle(), vmFd: this.vm!.fd, cpus: this.spec.cpus, controlSab: this.control.sab,
        deviceSab: this.deviceSab, consoleRingSab: this.consoleRingSab, agentRingSab: this.agentRingSab,
        hostCpu: this.spec.pin?.[vcpu.id],
      };
      const started = new Promise<void>((resolve, reject) => {
        const onError = (e: Error) => reject(new Error(`vCPU ${i} thread failed to start: ${e.message}`));
        worker.once('error', onError);
        const onMessage = (m: WorkerMessage) => {
          if (m.type === 'loaded') return; // its modules are in; 'ready' (or 'ended') follows
          worker.off('message', onMessage);
          worker.off('error', onError);
          resolve();
        };
        worker.on('message', onMessage);
      });
      worker.postMessage(data);
      return started;
    });
    await Promise.all(ready);
    this.workers.forEach((w, i) => w.on('error', (e) => this.onWorkerCrash(i, e)));
  }

  private onWorkerMessage(m: WorkerMessage): void {
    if (m.type === 'ended') {
      this.endMessage ??= m.message;
      void this.teardown();
    } else if (m.type === 'exited' && this.state === 'running' && this.control.runningWorkers === 0) {
      void this.teardown();
    }
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
  pressPowerButton(): boolean {
    if (this.state !== 'running' || !this.powerButton) return false;
    return this.powerButton.press();
  }

  /** Changes the VM's maximum halt-polling time while it runs (KVM_CAP_HALT_POLL). */
  setHaltPollNs(ns: number): void {
    if (!this.vm) throw new Error('the VM is not running');
    this.vm.enableCap(CAP.HALT_POLL, [ns]);
    this.spec.haltPollNs = ns;
  }

  /** Re-pins the vCPU threads while the VM runs (vCPU i -> hostCpus[i % length]); empty = unpinned. */
  setPin(hostCpus: readonly number[]): void {
    const all = allowedHostCpus();
    this.vcpus.forEach((v, i) => {
      const tid = this.control.tid(v.id);
      if (tid) setThreadAffinity(tid, hostCpus.length ? [hostCpus[i % hostCpus.length]!] : all);
    });
    this.spec.pin = hostCpus.length ? this.vcpus.map((_, i) => hostCpus[i % hostCpus.length]!) : undefined;
  }

  /**
   * Pauses every vCPU. The state reads 'paused' at once; the promise resolves only when every
   * vCPU thread has acknowledged it out of KVM_RUN (VmControl.waitWhilePaused), so from then on
   * the guest makes no progress: no exits, no console bytes. It also resolves if resume() or the
   * VM's end comes first.
   */
  pause(): Promise<void> {
    if (this.state === 'paused') return this.pausing ?? Promise.resolve();
    if (this.state !== 'running') return Promise.resolve();
    this.control.setCommand(COMMAND.pause);
    this.kickAll();
    this.setState('paused');
    this.pausing = this.pauseAcknowledged();
    return this.pausing;
  }

  private async pauseAcknowledged(): Promise<void> {
    while (this.control.command === COMMAND.pause && !this.control.allWorkersPaused) {
      await this.control.pausedCountChange(PAUSE_REKICK_MS);
      // A signal that lands while its thread is between KVM_RUNs is lost; immediate_exit catches
      // most of those, and kicking again until every thread answers catches the rest.
      if (this.control.command === COMMAND.pause && !this.control.allWorkersPaused) this.kickAll();
    }
  }

  resume(): void {
    if (this.state !== 'paused') return;
    this.pausing = undefined;
    this.control.setCommand(COMMAND.run);
    this.setState('running');
  }

  /** Stops the VM at once (no guest cooperation) and releases everything. */
  stop(): Promise<VmExit> {
    this.control.end(END.stopped, -1);
    return this.teardown();
  }

  private kickAll(): void {
    for (const vcpu of this.vcpus) {
      vcpu.setImmediateExit(true);
      const tid = this.control.tid(vcpu.id);
      if (tid) kickThread(tid);
    }
  }

  private teardown(): Promise<VmExit> {
    this.tearingDown ??= (async () => {
      this.setState('stopping');
      this.control.setCommand(COMMAND.stop);
      this.kickAll();
      const deadline = setTimeout(() => {
        // A worker stuck in a native call cannot be interrupted; terminating it is the last resort.
        for (const w of this.workers) void w.terminate();
      }, WORKER_EXIT_DEADLINE_MS);
      // Keep kicking until every worker is out: a kick can land just before KVM_RUN is entered.
      const rekick = setInterval(() => this.kickAll(), 50);
      await Promise.all(this.workerExited);
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
      await this.release();
      this.setState('stopped');
      this.emit('exit', exit);
      this.resolveExited(exit);
      return exit;
    })();
    return this.tearingDown;
  }

  private async release(): Promise<void> {
    this.consoleQueue.close();
    this.agentQueue.close();
    // Never terminate a worker still loading its modules (whenLoaded says why); bounded, as a
    // worker that cannot load ends by itself.
    let loadWait: ReturnType<typeof setTimeout> | undefined;
    await Promise.race([Promise.all(this.workers.map(whenLoaded)), new Promise((r) => { loadWait = setTimeout(r, WORKER_LOAD_WAIT_MS); })]);
    clearTimeout(loadWait);
    for (const w of this.workers) await w.terminate();
    for (const fd of [...this.vcpuStatsFds, this.vmStatsFd]) if (fd >= 0) closeFd(fd);
    this.vcpuStatsFds = [];
    this.vmStatsFd = -1;
    for (const v of this.vcpus) v.close();
    this.vcpus = [];
    this.vm?.close();
    this.kvm?.close();
    this.vm = undefined;
    this.kvm = undefined;
    if (this.memory?.isLocked) this.memory.unlock();
    this.memory = undefined; // the SAB goes with the last worker reference
  }

  private flushRings(): void {
    const c = this.consoleRing.drain();
    if (c.length) this.emit('console', c);
    const a = this.agentRing.drain();
    if (a.length) { this.emit('agent-bytes', a); this.agentReader.push(a); }
  }

  /** KVM binary stats fds of the VM and each vCPU (-1: the host's KVM has no binary stats). */
  statsFds(): { vm: number; vcpus: readonly number[] } {
    return { vm: this.vmStatsFd, vcpus: this.vcpuStatsFds };
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
    return this.vcpus.map((v) => this.control.tid(v.id));
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

/** The guest's physical memory map (E820 / PVH memmap). */
export function memoryMap(mem: GuestMemory): E820Entry[] {
  const map: E820Entry[] = [
    { addr: 0, size: LAYOUT.lowEnd, type: E820_RAM },
    { addr: LAYOUT.acpi, size: LAYOUT.acpiEnd - LAYOUT.acpi, type: E820_RESERVED },
    { addr: LAYOUT.kernelMin, size: mem.lowMemoryEnd - LAYOUT.kernelMin, type: E820_RAM },
  ];
  const high = mem.regions[1];
  if (high) map.push({ addr: HIGH_MEMORY_START, size: high.size, type: E820_RAM });
  return map;
}

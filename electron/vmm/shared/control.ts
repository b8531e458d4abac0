// The shared control block of one VM: what the main thread asks the vCPU workers and the virtio
// I/O thread to do, how the VM ended, each worker's thread id (for kicks), the start barrier, and
// per-vCPU exit counters and start-up times. It lives in a SharedArrayBuffer so a worker blocked
// in KVM_RUN (or waiting at the barrier, or the I/O thread in poll) never has to receive a
// message to obey it.

export const COMMAND = { run: 0, pause: 1, stop: 2 } as const;

/**
 * vCPU 0 may start on the main thread (`unhalt run`) and move to its worker once that is loaded:
 * the worker asks (requested), the main thread answers between two KVM_RUNs (granted), or the
 * VM ended first (cancelled: the worker leaves without touching the vCPU).
 */
export const HANDOVER = { none: 0, requested: 1, granted: 2, cancelled: 3 } as const;

// Atomics.waitAsync (Node 16+) is typed only from lib es2024, above this project's es2023.
const waitAsync = (Atomics as unknown as {
  waitAsync(ta: Int32Array, index: number, value: number, timeoutMs: number): { async: boolean; value: Promise<string> | string };
}).waitAsync;

/**
 * How a VM ended, as the code a thread writes into the control block (the first writer wins);
 * named as the EndKind the runtime reports for it (runtime/vm-end.ts). `crash`: a thread of the
 * VM failed (a worker crashed or ended, the I/O thread failed, a vCPU threw).
 */
export const END = {
  none: 0,
  poweroff: 1,
  reset: 2,
  tripleFault: 3,
  internalError: 4,
  failEntry: 5,
  crash: 6,
  stopped: 7,
  /** A guest write to a configured isa-debug-exit; the value it wrote is END_VALUE. */
  debugExit: 8,
} as const;
export type EndCode = (typeof END)[keyof typeof END];

/** Userspace exit counters kept per vCPU. */
export const COUNTER = {
  exits: 0,
  io: 1,
  mmio: 2,
  hlt: 3,
  intr: 4,
  other: 5,
} as const;
export const COUNTER_NAMES = Object.keys(COUNTER) as (keyof typeof COUNTER)[];
const COUNTERS_PER_VCPU = COUNTER_NAMES.length;

const CMD = 0;
const END_CODE = 1;
const END_VCPU = 2;
const PAUSED = 3;
const RUNNING = 4;
/** Start barrier: vCPU threads arrived so far, plus START_ABANDONED once the VM ends before it opens. */
const START = 5;
/** vCPU 0's move from the main thread to its worker (HANDOVER below). */
const HANDOVER_WORD = 6;
/**
 * Bumped after every change of CMD or END_CODE: a worker reads this one word per exit and the
 * other two only when it moved (an Atomics.load is a builtin call, tens of ns on this path).
 */
const CHANGES = 7;
/**
 * The I/O thread's acknowledgement of a pause: the CHANGES value under which it saw the pause
 * command and stopped serving (0: none yet; CHANGES is past 0 after the first command).
 */
const IO_PAUSE_ACK = 8;
/** Set by the main thread when the I/O thread is to end (after every vCPU has left KVM_RUN). */
const IO_STOP = 9;
/** What the ending thread reported with its end code (the value a guest wrote to isa-debug-exit). */
const END_VALUE = 10;
const TID_BASE = 16;
// Far above any vCPU count, so an abandoned barrier never reads as "everyone arrived".
const START_ABANDONED = 1 << 30;
/** Float64 slots per vCPU after the counters: when its thread reached the barrier, when it left it. */
const TIMES_PER_VCPU = 2;

/**
 * When one vCPU thread started, as absolute times in ms (performance.timeOrigin + now(), since
 * each worker has its own time origin). readyAt: the thread reached the start barrier, ready to
 * enter KVM_RUN; enteredAt: it left the barrier for its first KVM_RUN (0: not yet, or never).
 */
export interface VcpuStartTimes {
  vcpu: number;
  readyAt: number;
  enteredAt: number;
}

export class VmControl {
  readonly sab: SharedArrayBuffer;
  readonly cpus: number;
  private readonly words: Int32Array;
  readonly counters: Float64Array;
  private readonly startTimes: Float64Array;

  constructor(cpusOrSab: number | SharedArrayBuffer, cpus?: number) {
    if (typeof cpusOrSab === 'number') {
      this.cpus = cpusOrSab;
      this.sab = new SharedArrayBuffer((TID_BASE + this.cpus) * 4 + 8 + this.cpus * (COUNTERS_PER_VCPU + TIMES_PER_VCPU) * 8);
    } else {
      this.sab = cpusOrSab;
      this.cpus = cpus!;
    }
    const wordBytes = (TID_BASE + this.cpus) * 4;
    this.words = new Int32Array(this.sab, 0, TID_BASE + this.cpus);
    const countersAt = Math.ceil(wordBytes / 8) * 8;
    this.counters = new Float64Array(this.sab, countersAt, this.cpus * COUNTERS_PER_VCPU);
    this.startTimes = new Float64Array(this.sab, countersAt + this.cpus * COUNTERS_PER_VCPU * 8, this.cpus * TIMES_PER_VCPU);
  }

  get command(): number { return Atomics.load(this.words, CMD); }
  /**
   * Moves whenever the command or the end code changes (after the change is visible): a worker
   * that saw the same value before has nothing new to obey.
   */
  get changes(): number { return Atomics.load(this.words, CHANGES); }
  setCommand(cmd: number): void {
    Atomics.store(this.words, CMD, cmd);
    Atomics.add(this.words, CHANGES, 1);
    Atomics.notify(this.words, CMD);
    if (cmd === COMMAND.stop) this.abandonStart();
  }
  /**
   * Blocks a worker while the VM is paused (and until the command changes). A worker calls it
   * only out of KVM_RUN, so the count it raises is its acknowledgement of the pause.
   */
  waitWhilePaused(): void {
    Atomics.add(this.words, PAUSED, 1);
    Atomics.notify(this.words, PAUSED);
    while (Atomics.load(this.words, CMD) === COMMAND.pause) Atomics.wait(this.words, CMD, COMMAND.pause, 1000);
    Atomics.sub(this.words, PAUSED, 1);
    Atomics.notify(this.words, PAUSED);
  }
  /** waitWhilePaused for the main thread (running vCPU 0 at start): the event loop turns meanwhile. */
  async waitWhilePausedAsync(): Promise<void> {
    Atomics.add(this.words, PAUSED, 1);
    Atomics.notify(this.words, PAUSED);
    while (Atomics.load(this.words, CMD) === COMMAND.pause) await this.commandChange(COMMAND.pause, 1000);
    Atomics.sub(this.words, PAUSED, 1);
    Atomics.notify(this.words, PAUSED);
  }
  get pausedWorkers(): number { return Atomics.load(this.words, PAUSED); }

  /** Every live worker has acknowledged the pause: none of them is in KVM_RUN. */
  get allWorkersPaused(): boolean {
    return Atomics.load(this.words, PAUSED) >= Atomics.load(this.words, RUNNING);
  }

  /**
   * Main thread: resolves when the paused-worker count changes or after `timeoutMs`, whichever is
   * first. It never blocks (Atomics.waitAsync), so the main thread keeps dispatching meanwhile.
   */
  async pausedCountChange(timeoutMs: number): Promise<void> {
    const seen = Atomics.load(this.words, PAUSED);
    const r = waitAsync(this.words, PAUSED, seen, timeoutMs);
    if (r.async) await r.value;
  }

  /**
   * I/O thread: it has seen `changes` (read before the command) with the pause command and serves
   * nothing until the command changes. Wakes pausedCountChange, as a vCPU's acknowledgement does.
   */
  acknowledgeIoPause(changes: number): void {
    if (Atomics.load(this.words, IO_PAUSE_ACK) === changes) return;
    Atomics.store(this.words, IO_PAUSE_ACK, changes);
    Atomics.notify(this.words, PAUSED);
  }

  /**
   * The I/O thread has acknowledged the latest command, a pause: it serves no queue, writes no
   * ring and sends no interrupt until the command changes. An acknowledgement of an earlier pause
   * (before a resume) does not count, as CHANGES moved since.
   */
  get ioPaused(): boolean {
    return Atomics.load(this.words, CMD) === COMMAND.pause && Atomics.load(this.words, IO_PAUSE_ACK) === Atomics.load(this.words, CHANGES);
  }

  /** Main thread: the I/O thread is to end at its next wake-up. */
  requestIoStop(): void { Atomics.store(this.words, IO_STOP, 1); }
  get ioStopRequested(): boolean { return Atomics.load(this.words, IO_STOP) !== 0; }

  /** Records how the VM ended (and the value that goes with it); returns false if another vCPU already did. */
  end(code: EndCode, vcpu: number, value = 0): boolean {
    if (Atomics.compareExchange(this.words, END_CODE, END.none, code) !== END.none) return false;
    // Only the winner writes it; the main thread reads it after every vCPU thread has left.
    Atomics.store(this.words, END_VALUE, value);
    Atomics.add(this.words, CHANGES, 1);
    Atomics.store(this.words, END_VCPU, vcpu);
    this.abandonStart();
    return true;
  }

  /**
   * The start barrier (as QEMU and Firecracker have): a vCPU thread calls this when it is ready to
   * enter KVM_RUN and blocks until every vCPU thread of the VM is, so that the boot CPU never
   * sends its SIPIs to an AP whose thread does not exist yet. Only workers wait here; the main
   * thread never does. The last thread to arrive opens it without waiting (a 1-vCPU VM never
   * waits). Returns false if the VM was stopped or ended before the barrier opened: the thread
   * must then leave without entering KVM_RUN.
   */
  arriveAtStart(vcpu: number): boolean {
    this.startTimes[vcpu * TIMES_PER_VCPU] = performance.timeOrigin + performance.now();
    let seen = Atomics.add(this.words, START, 1) + 1;
    if (seen === this.cpus) Atomics.notify(this.words, START);
    // The word changes on every arrival and on abandonment, so no wake-up is lost between the
    // check and the wait; the bounded wait is only a second line of defence.
    while (seen < this.cpus) {
      Atomics.wait(this.words, START, seen, 1000);
      seen = Atomics.load(this.words, START);
    }
    if (seen >= START_ABANDONED) return false;
    this.startTimes[vcpu * TIMES_PER_VCPU + 1] = performance.timeOrigin + performance.now();
    return true;
  }

  /** Releases every thread waiting at the start barrier (or for a handover), telling it not to run. */
  private abandonStart(): void {
    Atomics.or(this.words, START, START_ABANDONED);
    Atomics.notify(this.words, START);
    if (Atomics.compareExchange(this.words, HANDOVER_WORD, HANDOVER.none, HANDOVER.cancelled) !== HANDOVER.none) {
      Atomics.compareExchange(this.words, HANDOVER_WORD, HANDOVER.requested, HANDOVER.cancelled);
    }
    Atomics.notify(this.words, HANDOVER_WORD);
  }

  /** Worker: asks the main thread for vCPU 0 (false: the VM has already ended). */
  requestHandover(): boolean {
    return Atomics.compareExchange(this.words, HANDOVER_WORD, HANDOVER.none, HANDOVER.requested) === HANDOVER.none;
  }

  /** Worker: blocks until the main thread grants vCPU 0 (true) or the VM ends first (false). */
  waitForHandover(): boolean {
    for (;;) {
      const state = Atomics.load(this.words, HANDOVER_WORD);
      if (state !== HANDOVER.requested) return state === HANDOVER.granted;
      // Bounded, as a second line of defence: every change of the word is notified.
      Atomics.wait(this.words, HANDOVER_WORD, HANDOVER.requested, 1000);
    }
  }

  get handoverRequested(): boolean {
    return Atomics.load(this.words, HANDOVER_WORD) === HANDOVER.requested;
  }

  /** Main thread: vCPU 0 is the worker's from now on (the main thread no longer runs it). */
  grantHandover(): boolean {
    const ok = Atomics.compareExchange(this.words, HANDOVER_WORD, HANDOVER.requested, HANDOVER.granted) === HANDOVER.requested;
    Atomics.notify(this.words, HANDOVER_WORD);
    return ok;
  }

  /**
   * Main thread: resolves when the command changes from `seen` or after `timeoutMs`, without
   * blocking (Atomics.waitAsync).
   */
  async commandChange(seen: number, timeoutMs: number): Promise<void> {
    const r = waitAsync(this.words, CMD, seen, timeoutMs);
    if (r.async) await r.value;
  }

  /** How each vCPU thread reached and left the start barrier (see VcpuStartTimes). */
  startTimeline(): VcpuStartTimes[] {
    return Array.from({ length: this.cpus }, (_, vcpu) => ({
      vcpu,
      readyAt: this.startTimes[vcpu * TIMES_PER_VCPU]!,
      enteredAt: this.startTimes[vcpu * TIMES_PER_VCPU + 1]!,
    }));
  }
  get endCode(): EndCode { return Atomics.load(this.words, END_CODE) as EndCode; }
  get endVcpu(): number { return Atomics.load(this.words, END_VCPU); }
  /** The value recorded with the end code (END.debugExit: what the guest wrote), unsigned. */
  get endValue(): number { return Atomics.load(this.words, END_VALUE) >>> 0; }

  setTid(vcpu: number, tid: number): void { Atomics.store(this.words, TID_BASE + vcpu, tid); }
  tid(vcpu: number): number { return Atomics.load(this.words, TID_BASE + vcpu); }

  markRunning(delta: 1 | -1): void { Atomics.add(this.words, RUNNING, delta); }
  get runningWorkers(): number { return Atomics.load(this.words, RUNNING); }

  counterBase(vcpu: number): number { return vcpu * COUNTERS_PER_VCPU; }
  counter(vcpu: number, which: number): number { return this.counters[vcpu * COUNTERS_PER_VCPU + which]!; }
}

// The shared control block of one VM: what the main thread asks the vCPU workers to do, how the
// VM ended, each worker's thread id (for kicks), and per-vCPU exit counters. It lives in a
// SharedArrayBuffer so a worker blocked in KVM_RUN never has to receive a message to obey it.

export const COMMAND = { run: 0, pause: 1, stop: 2 } as const;

/** Why a VM ended; the first writer wins. */
export const END = {
  none: 0,
  powerOff: 1,
  reset: 2,
  tripleFault: 3,
  internalError: 4,
  failEntry: 5,
  workerError: 6,
  stopped: 7,
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
  ioConsole: 6,
  ioUnhandled: 7,
} as const;
export const COUNTER_NAMES = Object.keys(COUNTER) as (keyof typeof COUNTER)[];
const COUNTERS_PER_VCPU = 8;

const CMD = 0;
const END_CODE = 1;
const END_VCPU = 2;
const PAUSED = 3;
const RUNNING = 4;
const TID_BASE = 16;

export class VmControl {
  readonly sab: SharedArrayBuffer;
  readonly cpus: number;
  private readonly words: Int32Array;
  readonly counters: Float64Array;

  constructor(cpusOrSab: number | SharedArrayBuffer, cpus?: number) {
    if (typeof cpusOrSab === 'number') {
      this.cpus = cpusOrSab;
      this.sab = new SharedArrayBuffer((TID_BASE + this.cpus) * 4 + 8 + this.cpus * COUNTERS_PER_VCPU * 8);
    } else {
      this.sab = cpusOrSab;
      this.cpus = cpus!;
    }
    const wordBytes = (TID_BASE + this.cpus) * 4;
    this.words = new Int32Array(this.sab, 0, TID_BASE + this.cpus);
    const countersAt = Math.ceil(wordBytes / 8) * 8;
    this.counters = new Float64Array(this.sab, countersAt, this.cpus * COUNTERS_PER_VCPU);
  }

  get command(): number { return Atomics.load(this.words, CMD); }
  setCommand(cmd: number): void {
    Atomics.store(this.words, CMD, cmd);
    Atomics.notify(this.words, CMD);
  }
  /** Blocks a worker while the VM is paused (and until the command changes). */
  waitWhilePaused(): void {
    Atomics.add(this.words, PAUSED, 1);
    Atomics.notify(this.words, PAUSED);
    while (Atomics.load(this.words, CMD) === COMMAND.pause) Atomics.wait(this.words, CMD, COMMAND.pause, 1000);
    Atomics.sub(this.words, PAUSED, 1);
  }
  get pausedWorkers(): number { return Atomics.load(this.words, PAUSED); }

  /** Records how the VM ended; returns false if another vCPU already did. */
  end(code: EndCode, vcpu: number): boolean {
    if (Atomics.compareExchange(this.words, END_CODE, END.none, code) !== END.none) return false;
    Atomics.store(this.words, END_VCPU, vcpu);
    return true;
  }
  get endCode(): EndCode { return Atomics.load(this.words, END_CODE) as EndCode; }
  get endVcpu(): number { return Atomics.load(this.words, END_VCPU); }

  setTid(vcpu: number, tid: number): void { Atomics.store(this.words, TID_BASE + vcpu, tid); }
  tid(vcpu: number): number { return Atomics.load(this.words, TID_BASE + vcpu); }

  markRunning(delta: 1 | -1): void { Atomics.add(this.words, RUNNING, delta); }
  get runningWorkers(): number { return Atomics.load(this.words, RUNNING); }

  counterBase(vcpu: number): number { return vcpu * COUNTERS_PER_VCPU; }
  counter(vcpu: number, which: number): number { return this.counters[vcpu * COUNTERS_PER_VCPU + which]!; }
}

// What a thread needs to drive one vCPU — its Vcpu, its own view of the board over the shared
// device state, the rings — and the exit loop: run -> decode (Vcpu.run) -> dispatch
// (exit-dispatch.ts) -> act. Used by the vCPU worker (vcpu-worker.ts) and, for vCPU 0 of a
// `unhalt run` start, by the main thread until that worker is loaded (runtime/main-thread-vcpu.ts). Device output has
// gone to the shared rings when dispatch returns, so nothing waits for a later exit to be seen.
import { IrqLine, MsiSignal, Vcpu, setIoEventFd, type VcpuHandle } from '../../../native/kvm/kvm.ts';
import { EventFdWriter } from '../../../native/kvm/eventfd.ts';
import { attachBoard, type BoardConfig } from '../devices/board.ts';
import { ByteRing } from '../devices/byte-ring.ts';
import { COMMAND, COUNTER, END, VmControl, type EndCode } from '../shared/control.ts';
import { describeDebugExit } from '../runtime/vm-end.ts';
import { NO_COUNTER, dispatchExit, type ExitDevices } from './exit-dispatch.ts';

/** Everything a thread needs to drive a vCPU created elsewhere (plain data: postMessage-able). */
export interface VcpuThreadData {
  vcpu: VcpuHandle;
  vmFd: number;
  cpus: number;
  controlSab: SharedArrayBuffer;
  deviceSab: SharedArrayBuffer;
  /** The board's PCI devices (board.ts), the same for every thread. */
  board: BoardConfig;
  consoleRingSab: SharedArrayBuffer;
  agentRingSab: SharedArrayBuffer;
}

/** Why VcpuDriver.run() returned (how the VM ended, if it did, is in the control block). */
export type DriverReturn =
  /** The VM ended (its end code is in the control block) or was stopped. */
  | 'ended'
  /** Only with `blockOnPause: false`: the command is pause; nothing runs until it changes. */
  | 'paused'
  /** Only with a `yieldOnKick`: a kick arrived and it said yes. */
  | 'yielded';

export interface VcpuDriver {
  readonly vcpu: Vcpu;
  readonly id: number;
  readonly control: VmControl;
  /**
   * Runs the vCPU until the VM ends or is stopped. A worker blocks while the VM is paused; the main
   * thread (blockOnPause false) returns instead, and returns after a kick when yieldOnKick says so.
   */
  run(opts?: { blockOnPause?: boolean; yieldOnKick?: () => boolean }): DriverReturn;
}

/**
 * `onEnd` is called once, by the thread whose exit ended the VM (first writer wins in the
 * control block). `vcpu` may be given when this thread owns the Vcpu already (the main thread).
 */
export function createVcpuDriver(data: VcpuThreadData, onEnd: (code: EndCode, message: string) => void, vcpu = new Vcpu(data.vcpu)): VcpuDriver {
  const control = new VmControl(data.controlSab, data.cpus);
  const id = vcpu.id;
  const counters = control.counters;
  const cbase = control.counterBase(id);
  const irq = new IrqLine(data.vmFd);
  const endVm = (code: EndCode, message: string, value?: number) => { if (control.end(code, id, value)) onEnd(code, message); };
  const consoleRing = new ByteRing(data.consoleRingSab);
  const agentRing = new ByteRing(data.agentRingSab);
  const msi = new MsiSignal(data.vmFd);
  const eventFds = new EventFdWriter();
  const board = attachBoard(data.deviceSab, {
    emitConsole: (b) => { consoleRing.write(b); },
    emitAgent: (b) => { agentRing.write(b); },
    setIrq: (line, level) => irq.set(line, level),
    onPowerOff: () => endVm(END.poweroff, 'the guest powered off'),
    onDebugExit: (value) => endVm(END.debugExit, describeDebugExit(value), value),
    onReset: () => endVm(END.reset, 'the guest reset the machine'),
    signalMsi: (address, value) => { msi.signal(address, value); },
    signalEventFd: (fd) => eventFds.signal(fd),
    setIoeventfd: (address, length, fd, assign) => setIoEventFd(data.vmFd, { address, length, fd }, !assign),
  }, data.board);
  const devices: ExitDevices = { pio: board.pio, mmio: board.mmio };

  function run(opts: { blockOnPause?: boolean; yieldOnKick?: () => boolean } = {}): DriverReturn {
    const blockOnPause = opts.blockOnPause ?? true;
    const yieldOnKick = opts.yieldOnKick;
    const exit = vcpu.exit;
    // The command and end code are read again only when control.changes moved: one atomic load
    // per exit instead of two. A change made while this thread is in KVM_RUN comes with a kick.
    let seen = -1;
    try {
      for (;;) {
        const changes = control.changes;
        if (changes !== seen) {
          const cmd = control.command;
          if (cmd === COMMAND.stop || control.endCode !== END.none) return 'ended';
          if (cmd === COMMAND.pause) {
            if (!blockOnPause) return 'paused';
            control.waitWhilePaused();
            if (control.command === COMMAND.run) vcpu.kvmclockStopped(); // as QEMU at `cont`
            continue; // `changes` moved when the pause ended
          }
          seen = changes;
        }
        vcpu.run();
        const action = dispatchExit(exit, devices, id);
        counters[cbase + COUNTER.exits]!++;
        if (action.counter !== NO_COUNTER) counters[cbase + action.counter]!++;
        if (action.type === 'kicked') {
          vcpu.setImmediateExit(false);
          if (yieldOnKick?.()) return 'yielded';
        } else if (action.type === 'end') {
          endVm(action.code, action.message);
          return 'ended';
        }
      }
    } catch (e) {
      endVm(END.crash, `vCPU ${id}: ${(e as Error).message}`);
      return 'ended';
    }
  }

  return { vcpu, id, control, run };
}

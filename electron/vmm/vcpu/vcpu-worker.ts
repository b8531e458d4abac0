// One vCPU thread: loops on KVM_RUN and handles port and MMIO exits right here, without a round
// trip to the main thread (a round trip costs more than the exit); what each exit means is
// exit-dispatch.ts's to say. Device state is shared with the other vCPUs through
// SharedArrayBuffers; console bytes go to shared rings that the main thread drains, so nothing
// waits for a later exit to be seen.
import { parentPort } from 'node:worker_threads';
import { IrqLine, MsiSignal, Vcpu, setIoEventFd, type VcpuHandle } from '../../../native/kvm/kvm.ts';
import { EventFdWriter } from '../../../native/kvm/eventfd.ts';
import { libc } from '../../../native/kvm/libc.ts';
import { pinCurrentThread } from '../../../native/kvm/affinity.ts';
import { attachBoard, type BoardConfig } from '../devices/board.ts';
import { ByteRing } from '../devices/byte-ring.ts';
import { COMMAND, COUNTER, END, VmControl, type EndCode } from './control.ts';
import { NO_COUNTER, dispatchExit, type ExitDevices } from './exit-dispatch.ts';

export interface VcpuWorkerData {
  vcpu: VcpuHandle;
  vmFd: number;
  cpus: number;
  controlSab: SharedArrayBuffer;
  deviceSab: SharedArrayBuffer;
  /** The board's PCI devices (board.ts), the same for every thread. */
  board: BoardConfig;
  consoleRingSab: SharedArrayBuffer;
  agentRingSab: SharedArrayBuffer;
  /** Host CPU to pin this thread to, if any. */
  hostCpu?: number;
}

export type WorkerMessage =
  | { type: 'loaded' }
  | { type: 'ready'; vcpu: number; tid: number }
  | { type: 'ended'; vcpu: number; code: EndCode; message: string }
  | { type: 'exited'; vcpu: number };

// Every module (koffi's native addon among them) is loaded by now. Until this message a spare
// worker keeps the process alive (worker-pool.ts): a process that ends while a thread is still
// loading koffi can die in koffi's initialisation (a fatal napi_throw, exit 134).
parentPort!.postMessage({ type: 'loaded' } satisfies WorkerMessage);
// The worker is spawned before its vCPU exists (module loading overlaps VM construction), so its
// vCPU arrives in the first message.
const data = await new Promise<VcpuWorkerData>((resolve) => parentPort!.once('message', resolve));
const post = (m: WorkerMessage) => parentPort!.postMessage(m);
const control = new VmControl(data.controlSab, data.cpus);
const vcpu = new Vcpu(data.vcpu);
const id = vcpu.id;
const counters = control.counters;
const cbase = control.counterBase(id);
const irq = new IrqLine(data.vmFd);

function endVm(code: EndCode, message: string): void {
  if (control.end(code, id)) post({ type: 'ended', vcpu: id, code, message });
}

const consoleRing = new ByteRing(data.consoleRingSab);
const agentRing = new ByteRing(data.agentRingSab);
const msi = new MsiSignal(data.vmFd);
const eventFds = new EventFdWriter();
const board = attachBoard(data.deviceSab, {
  emitConsole: (b) => { consoleRing.write(b); },
  emitAgent: (b) => { agentRing.write(b); },
  setIrq: (line, level) => irq.set(line, level),
  onPowerOff: () => endVm(END.powerOff, 'the guest powered off'),
  onReset: () => endVm(END.reset, 'the guest reset the machine'),
  signalMsi: (address, value) => { msi.signal(address, value); },
  signalEventFd: (fd) => eventFds.signal(fd),
  setIoeventfd: (address, length, fd, assign) => setIoEventFd(data.vmFd, { address, length, fd }, !assign),
}, data.board);

const devices: ExitDevices = { pio: board.pio, mmio: board.mmio };

// run -> decode (Vcpu.run) -> dispatch (exit-dispatch.ts) -> act. Device output has already gone
// to the shared rings when dispatch returns, so nothing waits for a later exit to be seen.
function loop(): void {
  const exit = vcpu.exit;
  // The command and end code are read again only when control.changes moved: one atomic load
  // per exit instead of two. A change made while this thread is in KVM_RUN comes with a kick.
  let seen = -1;
  for (;;) {
    const changes = control.changes;
    if (changes !== seen) {
      const cmd = control.command;
      if (cmd === COMMAND.stop || control.endCode !== END.none) return;
      if (cmd === COMMAND.pause) {
        control.waitWhilePaused();
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
    } else if (action.type === 'end') {
      endVm(action.code, action.message);
      return;
    }
  }
}

control.setTid(id, libc.gettid());
control.markRunning(1);
try {
  if (data.hostCpu !== undefined) pinCurrentThread(data.hostCpu);
  post({ type: 'ready', vcpu: id, tid: control.tid(id) });
  // No vCPU runs before every vCPU thread is here (control.ts, arriveAtStart).
  if (control.arriveAtStart(id)) loop();
} catch (e) {
  endVm(END.workerError, `vCPU ${id}: ${(e as Error).message}`);
} finally {
  vcpu.close(); // this thread's KVM_RUN stub (the fd and kvm_run are the main thread's)
  control.setTid(id, 0);
  control.markRunning(-1);
  post({ type: 'exited', vcpu: id });
}

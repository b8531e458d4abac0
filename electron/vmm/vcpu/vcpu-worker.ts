// One vCPU thread: loops on KVM_RUN and handles port and MMIO exits right here, without a round
// trip to the main thread (a round trip costs more than the exit). Device state is shared with
// the other vCPUs through SharedArrayBuffers; console bytes go to shared rings that the main
// thread drains, so nothing waits for a later exit to be seen.
import { parentPort } from 'node:worker_threads';
import { INTERNAL_ERROR_NAMES, SYSTEM_EVENT_NAMES } from '../../../native/kvm/abi.ts';
import { IrqLine, Vcpu, type VcpuHandle } from '../../../native/kvm/kvm.ts';
import { libc } from '../../../native/kvm/libc.ts';
import { pinCurrentThread } from '../../../native/kvm/affinity.ts';
import { attachDevices } from '../devices/board.ts';
import { ByteRing } from '../devices/byte-ring.ts';
import { COMMAND, COUNTER, END, VmControl, type EndCode } from './control.ts';

export interface VcpuWorkerData {
  vcpu: VcpuHandle;
  vmFd: number;
  cpus: number;
  controlSab: SharedArrayBuffer;
  deviceSab: SharedArrayBuffer;
  consoleRingSab: SharedArrayBuffer;
  agentRingSab: SharedArrayBuffer;
  /** Host CPU to pin this thread to, if any. */
  hostCpu?: number;
  /** Test seam (MachineSpec.testHooks.replaceFirstExit): decode this kvm_run record for the first exit. */
  testReplaceFirstExit?: Uint8Array;
}

export type WorkerMessage =
  | { type: 'ready'; vcpu: number; tid: number }
  | { type: 'ended'; vcpu: number; code: EndCode; message: string }
  | { type: 'exited'; vcpu: number };

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
const bus = attachDevices(data.deviceSab, {
  emitConsole: (b) => { consoleRing.write(b); },
  emitAgent: (b) => { agentRing.write(b); },
  setIrq: (line, level) => irq.set(line, level),
  onPowerOff: () => endVm(END.powerOff, 'the guest powered off'),
  onReset: () => endVm(END.reset, 'the guest reset the machine'),
});

function hex(n: number | bigint): string {
  return `0x${n.toString(16)}`;
}

function loop(): void {
  const exit = vcpu.exit;
  for (;;) {
    const cmd = control.command;
    if (cmd === COMMAND.stop || control.endCode !== END.none) return;
    if (cmd === COMMAND.pause) {
      control.waitWhilePaused();
      continue;
    }
    vcpu.run();
    counters[cbase + COUNTER.exits]!++;
    switch (exit.kind) {
      case 'io-out': {
        counters[cbase + COUNTER.io]!++;
        const d = exit.data;
        const size = exit.size;
        for (let i = 0, o = 0; i < exit.count; i++, o += size) {
          const v = size === 1 ? d[o]! : size === 2 ? d[o]! | (d[o + 1]! << 8)
            : (d[o]! | (d[o + 1]! << 8) | (d[o + 2]! << 16) | (d[o + 3]! << 24)) >>> 0;
          bus.write(exit.port, size, v);
        }
        break;
      }
      case 'io-in': {
        counters[cbase + COUNTER.io]!++;
        const d = exit.data;
        const size = exit.size;
        for (let i = 0, o = 0; i < exit.count; i++, o += size) {
          const v = bus.read(exit.port, size);
          d[o] = v & 0xff;
          if (size > 1) d[o + 1] = (v >>> 8) & 0xff;
          if (size > 2) { d[o + 2] = (v >>> 16) & 0xff; d[o + 3] = (v >>> 24) & 0xff; }
        }
        break;
      }
      case 'mmio-read':
        // Nothing is mapped outside RAM but the in-kernel LAPIC/IOAPIC: unmapped reads float high.
        counters[cbase + COUNTER.mmio]!++;
        exit.data.fill(0xff, 0, exit.dataLength);
        break;
      case 'mmio-write':
        counters[cbase + COUNTER.mmio]!++;
        break;
      case 'intr':
        counters[cbase + COUNTER.intr]!++;
        vcpu.setImmediateExit(false);
        break;
      case 'hlt':
        // Only without an in-kernel LAPIC does HLT reach userspace; treat it as idle.
        counters[cbase + COUNTER.hlt]!++;
        break;
      case 'shutdown':
        endVm(END.tripleFault, `vCPU ${id}: triple fault (KVM_EXIT_SHUTDOWN)`);
        return;
      case 'internal-error':
        endVm(END.internalError, `vCPU ${id}: KVM internal error: ${INTERNAL_ERROR_NAMES[exit.code] ?? `suberror ${exit.code}`}`
          + (exit.extra.length ? ` [${exit.extra.map(hex).join(' ')}]` : ''));
        return;
      case 'fail-entry':
        endVm(END.failEntry, `vCPU ${id}: KVM could not enter the guest (hardware reason ${hex(exit.code)})`);
        return;
      case 'system-event': {
        const name = SYSTEM_EVENT_NAMES[exit.code] ?? `event ${exit.code}`;
        if (exit.code === 2) endVm(END.reset, `vCPU ${id}: the guest reset the machine`);
        else if (exit.code === 1) endVm(END.powerOff, `vCPU ${id}: the guest powered off`);
        else endVm(END.internalError, `vCPU ${id}: system event: ${name}`);
        return;
      }
      default:
        counters[cbase + COUNTER.other]!++;
        endVm(END.internalError, `vCPU ${id}: unexpected KVM exit reason ${exit.reason}`);
        return;
    }
  }
}

control.setTid(id, libc.gettid());
control.markRunning(1);
try {
  if (data.hostCpu !== undefined) pinCurrentThread(data.hostCpu);
  if (data.testReplaceFirstExit) vcpu.testReplaceNextExit(data.testReplaceFirstExit);
  post({ type: 'ready', vcpu: id, tid: control.tid(id) });
  // No vCPU runs before every vCPU thread is here (control.ts, arriveAtStart).
  if (control.arriveAtStart(id)) loop();
} catch (e) {
  endVm(END.workerError, `vCPU ${id}: ${(e as Error).message}`);
} finally {
  control.setTid(id, 0);
  control.markRunning(-1);
  post({ type: 'exited', vcpu: id });
}

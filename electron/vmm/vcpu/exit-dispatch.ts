// What one KVM exit means, as a function of (exit record, devices) -> action, in the manner of
// Firecracker's exit handler over rust-vmm's one exit enum. The vCPU worker runs, decodes,
// dispatches here and acts on the answer; everything between "KVM_RUN returned" and "enter again
// or end the VM" is in this file, so it is unit-tested with fake devices and hand-made kvm_run
// records (test/unit/exit-dispatch.test.ts), without KVM.
//
// The hot path (PIO, MMIO, HLT, kicks) allocates nothing: those exits answer with one of the
// frozen actions below; only the exits that end the VM build an action (and its message).
import { INTERNAL_ERROR_NAMES, SYSTEM_EVENT_NAMES } from '../../../native/kvm/abi.ts';
import type { VcpuExit } from '../../../native/kvm/exit-record.ts';
import { readAllOnes } from '../devices/floating-bus.ts';
import { COUNTER, END, type EndCode } from '../shared/control.ts';

/** Port I/O as the board's PortBus answers it (devices/port-bus.ts). */
export interface PortIo {
  read(port: number, size: number): number;
  write(port: number, size: number, value: number): void;
}

/** Guest-physical accesses outside RAM that KVM hands to userspace; `data[0..size)` is the value. */
export interface MmioIo {
  read(address: number, data: Uint8Array, size: number): void;
  write(address: number, data: Uint8Array, size: number): void;
}

export interface ExitDevices {
  pio: PortIo;
  mmio: MmioIo;
}

/**
 * An MMIO space with nothing in it (the in-kernel LAPIC and IOAPIC are KVM's own): reads float
 * high (as on a bus nobody answers), writes are dropped. The board's MMIO (devices/board.ts,
 * BoardMmio) answers so too wherever no PCI BAR is decoded.
 */
export const UNMAPPED_MMIO: MmioIo = Object.freeze({
  read: (_address: number, data: Uint8Array, size: number) => { readAllOnes(data, size); },
  write: () => {},
});

/** Exits that count under no COUNTER but `exits` (the ones that end the VM for a known reason). */
export const NO_COUNTER = -1;

export type ExitAction =
  /** Enter the guest again (after the worker has looked at the control block). */
  | { readonly type: 'continue'; readonly counter: number }
  /** KVM_RUN was interrupted by a kick: clear kvm_run.immediate_exit, then obey the control block. */
  | { readonly type: 'kicked'; readonly counter: number }
  /** End the VM: `code` says how (control.ts END), `message` is one line a user can read. */
  | { readonly type: 'end'; readonly counter: number; readonly code: EndCode; readonly message: string };

export const CONTINUE_IO: ExitAction = Object.freeze({ type: 'continue', counter: COUNTER.io });
export const CONTINUE_MMIO: ExitAction = Object.freeze({ type: 'continue', counter: COUNTER.mmio });
export const CONTINUE_HLT: ExitAction = Object.freeze({ type: 'continue', counter: COUNTER.hlt });
export const KICKED: ExitAction = Object.freeze({ type: 'kicked', counter: COUNTER.intr });

function end(code: EndCode, message: string, counter = NO_COUNTER): ExitAction {
  return { type: 'end', counter, code, message };
}

function hex(n: number | bigint): string {
  return `0x${n.toString(16)}`;
}

/**
 * Handles one exit of vCPU `vcpu`: does the PIO or MMIO access on `devices` (filling
 * `exit.data` for reads, which the next KVM_RUN hands back to the guest) and says what the
 * worker does next. A device may end the VM from inside an access (a power-off register); the
 * worker sees that in the control block before it enters the guest again.
 */
export function dispatchExit(exit: VcpuExit, devices: ExitDevices, vcpu: number): ExitAction {
  // The exits that come by the thousand first, each in a small function of its own: the JIT
  // inlines only functions of a few hundred bytecodes into the exit loop.
  const kind = exit.kind;
  if (kind === 'io-out') return portOut(exit, devices.pio);
  if (kind === 'io-in') return portIn(exit, devices.pio);
  if (kind === 'mmio-read') {
    devices.mmio.read(exit.address, exit.data, exit.dataLength);
    return CONTINUE_MMIO;
  }
  if (kind === 'mmio-write') {
    devices.mmio.write(exit.address, exit.data, exit.dataLength);
    return CONTINUE_MMIO;
  }
  if (kind === 'intr') return KICKED;
  // Only without an in-kernel LAPIC does HLT reach userspace; treat it as idle.
  if (kind === 'hlt') return CONTINUE_HLT;
  return endingAction(exit, vcpu);
}

/** `out`, `outs`, `rep outs`: `count` values of `size` bytes, little-endian. */
function portOut(exit: VcpuExit, pio: PortIo): ExitAction {
  const d = exit.data;
  const size = exit.size;
  if (exit.count === 1 && size === 1) {
    pio.write(exit.port, 1, d[0]!);
    return CONTINUE_IO;
  }
  for (let i = 0, o = 0; i < exit.count && o < exit.dataLength; i++, o += size) {
    const v = size === 1 ? d[o]! : size === 2 ? d[o]! | (d[o + 1]! << 8)
      : (d[o]! | (d[o + 1]! << 8) | (d[o + 2]! << 16) | (d[o + 3]! << 24)) >>> 0;
    pio.write(exit.port, size, v);
  }
  return CONTINUE_IO;
}

/** `in`, `ins`, `rep ins`: the values go to `exit.data`, which the next KVM_RUN hands back. */
function portIn(exit: VcpuExit, pio: PortIo): ExitAction {
  const d = exit.data;
  const size = exit.size;
  for (let i = 0, o = 0; i < exit.count && o < exit.dataLength; i++, o += size) {
    const v = pio.read(exit.port, size);
    d[o] = v & 0xff;
    if (size > 1) d[o + 1] = (v >>> 8) & 0xff;
    if (size > 2) { d[o + 2] = (v >>> 16) & 0xff; d[o + 3] = (v >>> 24) & 0xff; }
  }
  return CONTINUE_IO;
}

/** The exits that end the VM, each with one line a user can read. */
function endingAction(exit: VcpuExit, vcpu: number): ExitAction {
  switch (exit.kind) {
    case 'shutdown':
      return end(END.tripleFault, `vCPU ${vcpu}: triple fault (KVM_EXIT_SHUTDOWN)`);
    case 'internal-error':
      return end(END.internalError, `vCPU ${vcpu}: KVM internal error: ${INTERNAL_ERROR_NAMES[exit.code] ?? `suberror ${exit.code}`}`
        + (exit.extra.length ? ` [${exit.extra.map(hex).join(' ')}]` : ''));
    case 'fail-entry':
      return end(END.failEntry, `vCPU ${vcpu}: KVM could not enter the guest (hardware reason ${hex(exit.code)})`);
    case 'system-event':
      // KVM_SYSTEM_EVENT_SHUTDOWN (1) and _RESET (2) are the guest's own requests (PSCI on Arm,
      // some hosts' x86 paths); anything else (crash, SEV termination...) is a failure.
      if (exit.code === 1) return end(END.poweroff, `vCPU ${vcpu}: the guest powered off`);
      if (exit.code === 2) return end(END.reset, `vCPU ${vcpu}: the guest reset the machine`);
      return end(END.internalError, `vCPU ${vcpu}: system event: ${SYSTEM_EVENT_NAMES[exit.code] ?? `event ${exit.code}`}`);
    default:
      return end(END.internalError, `vCPU ${vcpu}: unexpected KVM exit reason ${exit.reason}`, COUNTER.other);
  }
}

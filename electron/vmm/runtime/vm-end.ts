// How a VM ended, in one vocabulary: a thread records an END code in the control block
// (shared/control.ts); the runtime reports it as a VmEnd of an EndKind, the words the API, the CLI
// and the UI show. "Exit" is kept for KVM's exits to userspace (VcpuExit), many per second.
import { END, type EndCode } from '../shared/control.ts';
import { debugExitStatus } from '../config/device-config.ts';
import { describeGuestFault, type GuestFault } from './guest-fault.ts';

/**
 * 'guest-fault': the guest reported an unhandled exception on ttyS1 (`@u1 fault ...`), then shut down.
 * 'debug-exit': the guest wrote a value to the VM's configured isa-debug-exit (VmEnd.value).
 */
export type EndKind = 'poweroff' | 'reset' | 'debug-exit' | 'guest-fault' | 'triple-fault' | 'internal-error' | 'fail-entry' | 'crash' | 'stopped';

/** How a VM ended: what VirtualMachine.ended resolves with and its 'end' event carries. */
export interface VmEnd {
  kind: EndKind;
  /** One line a user can read. */
  message: string;
  vcpu?: number;
  /** 'debug-exit': the value the guest wrote (its exit status is debugExitStatus(value)). */
  value?: number;
}

const KIND_OF: Record<EndCode, EndKind> = {
  [END.none]: 'stopped',
  [END.poweroff]: 'poweroff',
  [END.reset]: 'reset',
  [END.tripleFault]: 'triple-fault',
  [END.internalError]: 'internal-error',
  [END.failEntry]: 'fail-entry',
  [END.crash]: 'crash',
  [END.stopped]: 'stopped',
  [END.debugExit]: 'debug-exit',
};

/** Ends that mean "the guest shut itself down" (exit code 0). */
export function isCleanEnd(kind: EndKind): boolean {
  return kind === 'poweroff' || kind === 'reset';
}

/** Ends the guest asked for, a clean one or a status through isa-debug-exit (no fault to place on a vCPU). */
export function isGuestEnd(kind: EndKind): boolean {
  return isCleanEnd(kind) || kind === 'debug-exit';
}

/** A debug-exit end's message, for the CLI and the app: the value and the exit status QEMU gives it. */
export function describeDebugExit(value: number): string {
  return `the guest wrote 0x${value.toString(16)} to isa-debug-exit (exit status ${debugExitStatus(value)})`;
}

/**
 * The VM's end from what its threads recorded: the end code and the vCPU that wrote it (-1: none),
 * the first end message, the first fault the guest reported, and the value recorded with the code.
 * A guest that reported a fault and then shut down cleanly ended in that fault; one that reported
 * a status through isa-debug-exit ended with that status, its own verdict.
 */
export function vmEnd(code: EndCode, vcpu: number, message: string | undefined, guestFault: GuestFault | undefined, value = 0): VmEnd {
  const faulted = guestFault !== undefined && isCleanEnd(KIND_OF[code]);
  return {
    kind: faulted ? 'guest-fault' : KIND_OF[code],
    message: faulted ? describeGuestFault(guestFault) : message ?? (code === END.stopped ? 'stopped by the user' : 'the VM stopped'),
    ...(vcpu >= 0 && code !== END.stopped ? { vcpu } : {}),
    ...(code === END.debugExit ? { value } : {}),
  };
}

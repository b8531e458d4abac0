// What a pause waits for and what it stops besides the vCPUs: every thread that runs the guest
// acknowledges it (kicked again until each has), and the guest's kvm-clock stands still until
// the resume. VirtualMachine.pause() and resume() (vm.ts) say when.
import { CAP } from '../../../native/kvm/abi.ts';
import type { Vm } from '../../../native/kvm/kvm.ts';
import { traceStep } from '../start-trace.ts';
import { COMMAND, type VmControl } from '../shared/control.ts';

/** How long a pause waits for the vCPU threads to acknowledge before it kicks them again. */
const PAUSE_REKICK_MS = 50;

/**
 * Resolves once every vCPU thread has acknowledged the pause out of KVM_RUN
 * (VmControl.waitWhilePaused) and the I/O thread (`ioPaused`) between two passes over its queues,
 * or once the command is no longer pause (a resume, the VM's end). True if the pause took hold.
 */
export async function pauseTakesHold(control: VmControl, ioPaused: () => boolean, kickAll: () => void): Promise<boolean> {
  const complete = () => control.allWorkersPaused && ioPaused();
  while (control.command === COMMAND.pause && !complete()) {
    await control.pausedCountChange(PAUSE_REKICK_MS);
    // A signal that lands while its thread is between KVM_RUNs is lost; immediate_exit catches
    // most of those, and kicking again until every thread answers catches the rest. The I/O
    // thread needs no second wake-up: its eventfd keeps the first until it polls (it may be in a
    // long disk request, which it finishes first).
    if (control.command === COMMAND.pause && !control.allWorkersPaused) kickAll();
  }
  return control.command === COMMAND.pause && complete();
}

/**
 * Stops the guest's kvm-clock with its vCPUs, as QEMU's kvmclock does at `stop`: read at the
 * pause, set back at resume, so a guest timing with kvm-clock (Linux on KVM without invariant TSC)
 * sees no time pass while paused — no jump of its monotonic clock, no timers all firing at
 * once. Each vCPU also tells its guest it was stopped (KVM_KVMCLOCK_CTRL, from its own thread
 * when it resumes: vcpu-driver.ts), so the guest's watchdog does not report the pause as a
 * lockup. A guest timing with the TSC itself still sees the pause, as under QEMU. Best effort:
 * where KVM cannot adjust the clock, or refuses, the guest's time runs on — the pause is no
 * less a pause.
 */
export class GuestClockFreeze {
  /** The guest's kvm-clock as the pause stopped it, until thaw(). */
  private frozenAt?: bigint;

  freeze(vm: Vm | undefined): void {
    try {
      if (vm && vm.checkExtension(CAP.ADJUST_CLOCK) > 0) this.frozenAt = vm.getClock();
    } catch (e) {
      traceStep(`vm: the guest's clock runs on while paused (${(e as Error).message})`);
    }
  }

  /** At resume, before any vCPU runs: the guest's clock goes on from where the pause stopped it. */
  thaw(vm: Vm | undefined): void {
    const clock = this.frozenAt;
    this.frozenAt = undefined;
    if (clock === undefined || !vm) return;
    try {
      vm.setClock(clock);
    } catch (e) {
      traceStep(`vm: the guest's clock was not set back at resume (${(e as Error).message})`);
    }
  }
}

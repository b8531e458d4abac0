// QEMU's isa-debug-exit. Every board has one at 0xf4 (iosize 4): the probe guest's last-resort
// power off, written so the same guest also ends under QEMU microvm, which has no ACPI PM or
// i8042; there any write is a clean power off. A VM given `--device isa-debug-exit,...` has it at
// that iobase/iosize instead, where a write of V ends the run with V, as QEMU's exit((V << 1) | 1).

export const DEBUG_EXIT_PORT = 0xf4;
export const DEBUG_EXIT_LENGTH = 4;

export interface DebugExitIo {
  onPowerOff(): void;
  onDebugExit(value: number): void;
}

export class DebugExit {
  private readonly io: DebugExitIo;
  private readonly reportsValue: boolean;

  /** `reportsValue`: the VM asked for the device, so a write is the guest's status, not a power off. */
  constructor(io: DebugExitIo, reportsValue: boolean) {
    this.io = io;
    this.reportsValue = reportsValue;
  }

  read(): number {
    return 0;
  }

  /** One write of any width and offset ends the run; `value` is what the guest wrote, at its width. */
  write(value: number): void {
    if (this.reportsValue) this.io.onDebugExit(value);
    else this.io.onPowerOff();
  }
}

// QEMU's isa-debug-exit (iobase 0xf4, iosize 4): the probe guest's last-resort power off,
// written so the same guest also ends under QEMU microvm, which has no ACPI PM or i8042.
// Unhalt treats any write as a clean power off.

export const DEBUG_EXIT_PORT = 0xf4;
export const DEBUG_EXIT_LENGTH = 4;

export interface DebugExitIo {
  onPowerOff(): void;
}

export class DebugExit {
  private readonly io: DebugExitIo;

  constructor(io: DebugExitIo) {
    this.io = io;
  }

  read(): number {
    return 0;
  }

  write(): void {
    this.io.onPowerOff();
  }
}

// Just enough of the i8042 keyboard controller for a guest to reset the machine: Linux's
// `reboot=kbd` and our probe guest write 0xFE (pulse the CPU reset line) to the command
// port. Nothing is ever in the output buffer; every other command is ignored. Stateless,
// so every thread may hold its own instance.

export const I8042_DATA_PORT = 0x60;
export const I8042_COMMAND_PORT = 0x64;

// Status: output and input buffers empty, "system flag" (self-test passed), last write was
// a command, keyboard not inhibited: what an idle controller reports.
const STATUS_IDLE = 0x1c;
const CMD_RESET = 0xfe;

export interface I8042Io {
  /** The guest asked for a CPU reset (the run ends: exit code 0). */
  onReset(): void;
}

export class I8042 {
  private readonly io: I8042Io;

  constructor(io: I8042Io) {
    this.io = io;
  }

  /** `port` is 0x60 or 0x64. */
  read(port: number): number {
    return port === I8042_COMMAND_PORT ? STATUS_IDLE : 0;
  }

  write(port: number, value: number): void {
    if (port === I8042_COMMAND_PORT && (value & 0xff) === CMD_RESET) this.io.onReset();
  }
}

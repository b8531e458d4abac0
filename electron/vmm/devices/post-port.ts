// Port 0x80, the PC POST-code / I/O-delay port. The probe guest's `pio` scenario hammers it
// to measure exit cost, so it is a mapped no-op rather than an "unhandled" port: that keeps
// the unhandled-access table meaningful and the hot path short (no bus lock: one atomic store).
// The last code written is kept (one state word) for diagnostics.

export const POST_PORT = 0x80;
export const POST_STATE_WORDS = 1;

export class PostPort {
  private readonly s: Int32Array;

  constructor(state: Int32Array) {
    this.s = state;
  }

  read(): number {
    return 0xff;
  }

  // Atomic: the bus does not lock this device (port-bus.ts, lockFree).
  write(value: number): void {
    Atomics.store(this.s, 0, value & 0xff);
  }

  lastCode(): number {
    return Atomics.load(this.s, 0);
  }
}

// Port 0x80, the PC POST-code / I/O-delay port. The probe guest's `pio` scenario hammers it
// to measure exit cost, so it is a mapped no-op rather than an "unhandled" port: that keeps
// the unhandled-access table meaningful and the hot path short (no bus lock: one store).
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

  // The bus does not lock this device (port-bus.ts, lockFree): one aligned 32-bit store, which
  // JavaScript never tears, so a reader (lastCode, with Atomics.load) sees one whole code. Not
  // Atomics.store: its ordering buys a diagnostic nothing and its builtin call was 3% of a `pio`
  // exit's user-space time.
  write(value: number): void {
    this.s[0] = value & 0xff;
  }

  lastCode(): number {
    return Atomics.load(this.s, 0);
  }
}

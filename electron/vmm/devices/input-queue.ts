// Host-to-guest bytes for one UART, paced by its 16-byte receive FIFO: what the FIFO does not
// take waits here and is retried shortly. Bounded: a guest that never reads its UART (interrupts
// off, loopback, hung) must not make the host buffer input without limit, so bytes past `limit`
// are dropped and counted.
export class InputQueue {
  /** Bytes dropped because the queue was full. */
  dropped = 0;
  private readonly inject: (bytes: Uint8Array) => number;
  private readonly limit: number;
  private chunks: Uint8Array[] = [];
  private queued = 0;
  private timer?: NodeJS.Timeout;
  private closed = false;

  /** `inject` hands bytes to the UART and returns how many it took. */
  constructor(inject: (bytes: Uint8Array) => number, limit: number) {
    this.inject = inject;
    this.limit = limit;
  }

  push(data: Uint8Array): void {
    if (this.closed) return;
    const room = this.limit - this.queued;
    if (data.length > room) this.dropped += data.length - Math.max(0, room);
    if (room <= 0) return;
    const kept = data.length > room ? data.subarray(0, room) : data;
    this.chunks.push(kept);
    this.queued += kept.length;
    this.pump();
  }

  /** Stops retrying; later pushes are ignored. */
  close(): void {
    this.closed = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
  }

  private pump(): void {
    while (this.chunks.length > 0 && !this.closed) {
      const head = this.chunks[0]!;
      const taken = this.inject(head);
      this.queued -= taken;
      if (taken < head.length) {
        // The FIFO is full: retry shortly.
        this.chunks[0] = head.subarray(taken);
        this.timer ??= setTimeout(() => { this.timer = undefined; this.pump(); }, 2);
        return;
      }
      this.chunks.shift();
    }
  }
}

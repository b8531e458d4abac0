// A VM's recent console output in memory, bounded: what a new subscriber (a console view opened
// late, a second browser tab) is shown first. Oldest bytes go first when it is full.
export const DEFAULT_SCROLLBACK_BYTES = 256 * 1024;

export class Scrollback {
  readonly limit: number;
  private chunks: Uint8Array[] = [];
  private total = 0;

  constructor(limit = DEFAULT_SCROLLBACK_BYTES) {
    this.limit = limit;
  }

  get size(): number {
    return this.total;
  }

  push(bytes: Uint8Array): void {
    if (bytes.length === 0) return;
    // Copy (a Buffer's slice() would not): the VMM may reuse the buffer it handed us.
    const own = new Uint8Array(bytes.length > this.limit ? bytes.subarray(bytes.length - this.limit) : bytes);
    this.chunks.push(own);
    this.total += own.length;
    while (this.total > this.limit) {
      const head = this.chunks[0]!;
      const excess = this.total - this.limit;
      if (head.length <= excess) {
        this.chunks.shift();
        this.total -= head.length;
      } else {
        this.chunks[0] = head.subarray(excess);
        this.total -= excess;
      }
    }
    // Many tiny chunks (a guest printing byte by byte) would make text() slow: merge now and then.
    if (this.chunks.length > 512) this.chunks = [this.bytes()];
  }

  bytes(): Buffer {
    return Buffer.concat(this.chunks, this.total);
  }

  /** The bytes as a latin1 "binary string" (one char per byte), as console data crosses the API. */
  text(): string {
    return this.bytes().toString('latin1');
  }

  clear(): void {
    this.chunks = [];
    this.total = 0;
  }
}

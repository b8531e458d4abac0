// A bounded byte ring in a SharedArrayBuffer: vCPU workers write guest serial output, the
// main thread drains it. A guest that prints and then halts leaves its worker blocked in
// KVM_RUN, so output must reach the main thread without waiting for another exit: the ring
// is that path (docs/architecture.md, "Threads").
//
// One consumer. Producers are one thread at a time: several vCPU workers may write, but only
// while holding the device bus lock (UART transmit happens under it).
//
// Indices are free-running 32-bit counters (wrapping), so `head - tail` is the fill level
// and a full ring is told apart from an empty one without a spare slot. HEAD doubles as the
// sequence word the consumer sleeps on: every accepted write bumps it. Writes that do not fit
// are dropped and counted: a guest must never block on a host that is not reading.
//
// Waking the consumer costs an Atomics.notify, so the producer only notifies when the
// consumer has raised WAITING (it clears the flag when it does, so a burst costs one notify).

const HEAD = 0; // producer-owned: bytes ever written (mod 2^32)
const TAIL = 16; // consumer-owned: bytes ever read; a cache line away from HEAD
const DROPPED = 32; // bytes dropped because the ring was full (mod 2^32)
const WAITING = 33; // 1 while the consumer is (about to be) asleep on HEAD
const HEADER_BYTES = 256;

type WaitAsyncResult =
  | { async: false; value: 'not-equal' | 'timed-out' }
  | { async: true; value: Promise<'ok' | 'timed-out'> };
// Atomics.waitAsync is in Node 24 but only in TypeScript's es2024 lib.
const waitAsync = (Atomics as unknown as {
  waitAsync(a: Int32Array, index: number, value: number, timeoutMs?: number): WaitAsyncResult;
}).waitAsync;

export class ByteRing {
  readonly capacity: number;
  private readonly words: Int32Array;
  private readonly data: Uint8Array;
  private readonly mask: number;

  /** Allocates the shared memory for a ring; `capacity` must be a power of two. */
  static create(capacity = 64 * 1024): SharedArrayBuffer {
    if (!Number.isInteger(capacity) || capacity < 2 || capacity > 1 << 30 || (capacity & (capacity - 1)) !== 0) {
      throw new RangeError(`ring capacity must be a power of two, got ${capacity}`);
    }
    return new SharedArrayBuffer(HEADER_BYTES + capacity);
  }

  /** Attaches to a ring made by `ByteRing.create` (on any thread). */
  constructor(sab: SharedArrayBuffer) {
    const capacity = sab.byteLength - HEADER_BYTES;
    if (capacity < 2 || (capacity & (capacity - 1)) !== 0) {
      throw new RangeError('not a ByteRing buffer (use ByteRing.create)');
    }
    this.capacity = capacity;
    this.mask = capacity - 1;
    this.words = new Int32Array(sab, 0, HEADER_BYTES / 4);
    this.data = new Uint8Array(sab, HEADER_BYTES, capacity);
  }

  /** Producer: appends a byte or bytes; what does not fit is dropped. Returns bytes accepted. */
  write(bytes: Uint8Array | number): number {
    const w = this.words;
    const head = w[HEAD]; // only producers write HEAD, and they are serialized
    const free = this.capacity - ((head - Atomics.load(w, TAIL)) >>> 0);
    let n: number;
    if (typeof bytes === 'number') {
      n = free > 0 ? 1 : 0;
      if (n === 1) this.data[head & this.mask] = bytes;
      else Atomics.add(w, DROPPED, 1);
    } else {
      n = Math.min(free, bytes.length);
      if (n < bytes.length) Atomics.add(w, DROPPED, bytes.length - n);
      const start = head & this.mask;
      const first = Math.min(n, this.capacity - start);
      this.data.set(first === bytes.length ? bytes : bytes.subarray(0, first), start);
      if (n > first) this.data.set(bytes.subarray(first, n), 0);
    }
    if (n === 0) return 0;
    Atomics.store(w, HEAD, (head + n) | 0); // publishes the bytes (seq-cst store)
    if (Atomics.load(w, WAITING) !== 0 && Atomics.exchange(w, WAITING, 0) !== 0) {
      Atomics.notify(w, HEAD);
    }
    return n;
  }

  /** Free space now (a producer that would rather wait than drop can poll this). */
  space(): number {
    return this.capacity - this.available();
  }

  /** Bytes waiting to be drained. */
  available(): number {
    return (Atomics.load(this.words, HEAD) - Atomics.load(this.words, TAIL)) >>> 0;
  }

  /** Bytes dropped so far because the ring was full (wraps at 2^32). */
  dropped(): number {
    return Atomics.load(this.words, DROPPED) >>> 0;
  }

  /** Consumer: takes everything written so far (an empty array when there is nothing). */
  drain(): Uint8Array {
    const w = this.words;
    const head = Atomics.load(w, HEAD);
    const tail = w[TAIL];
    const n = (head - tail) >>> 0;
    const out = new Uint8Array(n);
    if (n === 0) return out;
    const start = tail & this.mask;
    const first = Math.min(n, this.capacity - start);
    out.set(this.data.subarray(start, start + first), 0);
    if (n > first) out.set(this.data.subarray(0, n - first), first);
    Atomics.store(w, TAIL, head); // frees the space only after the copy
    return out;
  }

  /**
   * Consumer: resolves when data is available or after `timeoutMs` (Infinity = no limit).
   * Does not block the event loop (Atomics.waitAsync).
   */
  async waitForData(timeoutMs: number): Promise<void> {
    const w = this.words;
    const tail = w[TAIL];
    if (Atomics.load(w, HEAD) !== tail) return;
    // Raise the flag before the final check: a producer that stores HEAD after our check
    // then sees the flag and notifies; one that stored it before is seen by the check.
    Atomics.store(w, WAITING, 1);
    const head = Atomics.load(w, HEAD);
    if (head === tail) {
      const r = waitAsync(w, HEAD, head, timeoutMs);
      if (r.async) await r.value;
    }
    Atomics.store(w, WAITING, 0);
  }
}

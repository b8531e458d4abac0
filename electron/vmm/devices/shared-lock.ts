// A mutex over one Int32Array cell of a SharedArrayBuffer, shared by every vCPU worker and
// the main thread. Device state lives in shared memory, so each thread builds its own device
// objects over the same words; this lock is what makes their accesses one at a time.
//
// Cell values (the classic futex mutex, Drepper's "Futexes Are Tricky", mutex #2):
//   0 = unlocked, 1 = locked with no waiters, 2 = locked and someone may be sleeping.
// Unlock only pays for Atomics.notify when the cell says 2.
//
// Critical sections are a few register accesses (sub-microsecond) while a sleep/wake round
// trip costs tens of microseconds, so a contender spins briefly before it sleeps.
// Atomics.wait blocks the calling thread: fine in a vCPU worker, never on the main thread, which
// answers every client (docs/architecture.md, "Threads"). The main thread uses tryLock (and
// retries later) or lockAsync (Atomics.waitAsync: it sleeps without blocking the event loop).
// Not reentrant: code run under the lock (device callbacks) must not take it again.

const UNLOCKED = 0;
const LOCKED = 1;
const CONTENDED = 2;
const SPINS = 200;

/** Atomics.waitAsync (Node >= 16; in TypeScript's lib only from es2024). */
type WaitAsync = (cells: Int32Array, index: number, value: number) => { async: false; value: string } | { async: true; value: Promise<string> };
const waitAsync = (Atomics as unknown as { waitAsync: WaitAsync }).waitAsync;

export class SharedLock {
  private readonly cells: Int32Array;
  private readonly index: number;

  /** `cells[index]` is the lock word; it must start at 0 (unlocked). */
  constructor(cells: Int32Array, index = 0) {
    if (!(cells.buffer instanceof SharedArrayBuffer)) {
      throw new TypeError('SharedLock needs an Int32Array over a SharedArrayBuffer');
    }
    this.cells = cells;
    this.index = index;
  }

  lock(): void {
    const cells = this.cells;
    const i = this.index;
    let c = Atomics.compareExchange(cells, i, UNLOCKED, LOCKED);
    if (c === UNLOCKED) return;
    for (let n = 0; n < SPINS && c === LOCKED; n++) {
      c = Atomics.compareExchange(cells, i, UNLOCKED, LOCKED);
      if (c === UNLOCKED) return;
    }
    // Mark the lock contended and sleep until the holder releases it. We take it back in
    // state 2 because other sleepers may remain; the cost is one spare notify at most.
    if (c !== CONTENDED) c = Atomics.exchange(cells, i, CONTENDED);
    while (c !== UNLOCKED) {
      Atomics.wait(cells, i, CONTENDED);
      c = Atomics.exchange(cells, i, CONTENDED);
    }
  }

  /** Takes the lock if it is free; never waits. */
  tryLock(): boolean {
    return Atomics.compareExchange(this.cells, this.index, UNLOCKED, LOCKED) === UNLOCKED;
  }

  /**
   * Takes the lock without blocking this thread: while it is held, the caller sleeps in
   * Atomics.waitAsync and the event loop runs on. Same protocol as lock(), so an unlock from
   * any thread wakes it (Atomics.notify wakes synchronous and asynchronous waiters alike).
   */
  async lockAsync(): Promise<void> {
    const cells = this.cells;
    const i = this.index;
    let c = Atomics.compareExchange(cells, i, UNLOCKED, LOCKED);
    if (c === UNLOCKED) return;
    if (c !== CONTENDED) c = Atomics.exchange(cells, i, CONTENDED);
    while (c !== UNLOCKED) {
      const w = waitAsync(cells, i, CONTENDED);
      if (w.async) await w.value;
      c = Atomics.exchange(cells, i, CONTENDED);
    }
  }

  unlock(): void {
    if (Atomics.sub(this.cells, this.index, 1) !== LOCKED) {
      Atomics.store(this.cells, this.index, UNLOCKED);
      Atomics.notify(this.cells, this.index, 1);
    }
  }

  /** Runs `fn` holding the lock; releases it even if `fn` throws. */
  withLock<T>(fn: () => T): T {
    this.lock();
    try {
      return fn();
    } finally {
      this.unlock();
    }
  }

  /** Runs `fn` holding the lock if it is free now; undefined (and `fn` not run) if it is not. */
  tryWithLock<T>(fn: () => T): T | undefined {
    if (!this.tryLock()) return undefined;
    try {
      return fn();
    } finally {
      this.unlock();
    }
  }

  /** Runs `fn` holding the lock, taken with lockAsync. */
  async withLockAsync<T>(fn: () => T): Promise<T> {
    await this.lockAsync();
    try {
      return fn();
    } finally {
      this.unlock();
    }
  }
}

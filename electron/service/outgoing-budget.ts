// How much a transport may hold for one client that is not reading, in one place for every kind of
// message. Bytes waiting for the client are the measure (a WebSocket's bufferedAmount): counting
// messages would let one huge library update through where a thousand small ones are refused.
// Two kinds of traffic, bounded two ways:
// - Events the server pushes (library, status, console, telemetry, experiments) are judged by
//   the bytes of events still waiting. Past `streamBytes`, streamed events (console, telemetry,
//   guest metrics) are skipped and counted: a live view the client catches up on by subscribing
//   again (the backfill). Past `clientBytes`, the client is dropped: it has missed state changes
//   it can only get back by reconnecting, and holding more would let one stalled browser tab
//   take the server's memory (4 stalled clients once took RSS from 113 to 512 MiB, and kept it).
// - Answers the client asked for are never what gets it dropped — a renderer reconnecting to
//   many running VMs legitimately receives several backfills of a few MiB at once. They are
//   bounded by backpressure instead: while the client has more than `clientBytes` waiting, or
//   MAX_CALLS_IN_FLIGHT calls unanswered, its further requests wait (their socket is not read;
//   those already read with the last chunk queue here, small and bounded by that chunk).
import type { ApiEvent, ServerMessage } from './api.ts';

export interface OutgoingLimits {
  streamBytes: number;
  clientBytes: number;
}

export const DEFAULT_OUTGOING_LIMITS: OutgoingLimits = { streamBytes: 8 * 1024 * 1024, clientBytes: 32 * 1024 * 1024 };
/** Calls one client may have running at once before its further requests wait unread. */
export const MAX_CALLS_IN_FLIGHT = 32;
/** The WebSocket close code and reason a dropped client gets (4000-4999: application codes). */
export const TOO_FAR_BEHIND = { code: 4008, reason: 'too far behind: reconnect and subscribe again' } as const;

const STREAM_EVENTS = new Set<ApiEvent['type']>(['console', 'telemetry', 'guest-metric']);

export type EventVerdict = 'send' | 'skip' | 'drop-client';

/** `eventBytesWaiting`: event bytes not yet flushed to this client; `size`: the next event's bytes. */
export function eventVerdict(eventBytesWaiting: number, size: number, event: ApiEvent, limits: OutgoingLimits): EventVerdict {
  if (STREAM_EVENTS.has(event.type)) return eventBytesWaiting + size > limits.streamBytes ? 'skip' : 'send';
  return eventBytesWaiting + size > limits.clientBytes ? 'drop-client' : 'send';
}

/** What the outbox needs of a WebSocket (ws's server-side socket has all of it). */
export interface ClientSocket {
  readonly bufferedAmount: number;
  readonly readyState: number;
  readonly OPEN: number;
  send(data: string, cb: (err?: Error) => void): void;
  pause(): void;
  resume(): void;
}

export interface OutboxCounters {
  skippedEvents: number;
  peakWaitingBytes: number;
}

/** One client's outgoing side: every message it gets passes here. */
export class Outbox {
  private answerBytesWaiting = 0;
  private callsInFlight = 0;
  private paused = false;
  private readonly waiting: (() => Promise<ServerMessage>)[] = [];
  dropped = false;
  private readonly ws: ClientSocket;
  private readonly limits: OutgoingLimits;
  private readonly counters: OutboxCounters;
  private readonly onTooFarBehind: () => void;

  constructor(ws: ClientSocket, limits: OutgoingLimits, counters: OutboxCounters, onTooFarBehind: () => void) {
    this.ws = ws;
    this.limits = limits;
    this.counters = counters;
    this.onTooFarBehind = onTooFarBehind;
  }

  event(event: ApiEvent): void {
    if (!this.open()) return;
    const text = JSON.stringify({ event } satisfies ServerMessage);
    const size = Buffer.byteLength(text);
    const verdict = eventVerdict(Math.max(0, this.ws.bufferedAmount - this.answerBytesWaiting), size, event, this.limits);
    if (verdict === 'skip') {
      this.counters.skippedEvents++;
      return;
    }
    if (verdict === 'drop-client') {
      this.dropped = true;
      this.onTooFarBehind();
      return;
    }
    this.ws.send(text, () => this.startWaiting());
    this.notePeak();
  }

  /** A request was read: runs it now, or once the client has caught up; sends its answer. */
  call(run: () => Promise<ServerMessage>): void {
    this.waiting.push(run);
    this.startWaiting();
  }

  private startWaiting(): void {
    while (this.waiting.length > 0 && !this.behind() && this.open()) {
      const run = this.waiting.shift()!;
      this.callsInFlight++;
      void run().then((m) => {
        this.callsInFlight--;
        this.answer(m);
      });
    }
    this.throttle();
  }

  answer(m: ServerMessage): void {
    if (!this.open()) return;
    const text = JSON.stringify(m);
    const size = Buffer.byteLength(text);
    this.answerBytesWaiting += size;
    this.ws.send(text, () => {
      this.answerBytesWaiting -= size;
      this.startWaiting();
    });
    this.notePeak();
    this.throttle();
  }

  private behind(): boolean {
    return this.ws.bufferedAmount > this.limits.clientBytes || this.callsInFlight >= MAX_CALLS_IN_FLIGHT;
  }

  private open(): boolean {
    return !this.dropped && this.ws.readyState === this.ws.OPEN;
  }

  /** Reads the client's requests only while it keeps up with what it is sent. */
  private throttle(): void {
    if (!this.open()) return;
    const behind = this.behind() || this.waiting.length > 0;
    if (behind && !this.paused) {
      this.paused = true;
      this.ws.pause();
    } else if (!behind && this.paused) {
      this.paused = false;
      this.ws.resume();
    }
  }

  private notePeak(): void {
    this.counters.peakWaitingBytes = Math.max(this.counters.peakWaitingBytes, this.ws.bufferedAmount);
  }
}

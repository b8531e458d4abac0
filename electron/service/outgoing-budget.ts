// How much a transport may hold for one client that is not reading, in one rule for every kind of
// message (answers, library and status updates, console, telemetry). Bytes already queued for the
// client are the measure (a WebSocket's bufferedAmount): counting messages would let one huge
// library update through where a thousand small ones are refused.
// - Past `streamBytes`, streamed events (console, telemetry, guest metrics) are skipped, counted:
//   they are a live view the client catches up on by subscribing again (the backfill).
// - Past `clientBytes`, the client is dropped: it has missed state changes (library, status) it
//   can only get back by reconnecting, and holding more would let one stalled browser tab take
//   the server's memory (4 stalled clients once took RSS from 113 to 512 MiB, and kept it there).
import type { ApiEvent } from './api.ts';

export interface OutgoingLimits {
  streamBytes: number;
  clientBytes: number;
}

export const DEFAULT_OUTGOING_LIMITS: OutgoingLimits = { streamBytes: 8 * 1024 * 1024, clientBytes: 32 * 1024 * 1024 };

const STREAM_EVENTS = new Set<ApiEvent['type']>(['console', 'telemetry', 'guest-metric']);

export type OutgoingVerdict = 'send' | 'skip' | 'drop-client';

/** `queued`: bytes already waiting for this client; `size`: the next message's bytes. */
export function outgoingVerdict(queued: number, size: number, event: ApiEvent | undefined, limits: OutgoingLimits): OutgoingVerdict {
  if (event && STREAM_EVENTS.has(event.type)) return queued + size > limits.streamBytes ? 'skip' : 'send';
  return queued + size > limits.clientBytes ? 'drop-client' : 'send';
}

/** The WebSocket close code and reason a dropped client gets (4000-4999: application codes). */
export const TOO_FAR_BEHIND = { code: 4008, reason: 'too far behind: reconnect and subscribe again' } as const;

// The confirmation of a host command from the API, proved by a person and not just by the token.
// The API's token is held by a browser tab (host mode); whoever holds it must not be able to run
// a program on the host by confirming a command itself. So the UI's request only makes a one-time
// code, which the service shows where only the person at this machine sees it — the terminal of
// `unhalt serve`, or the app's own native dialog (ServiceOptions.announce) — and the command is
// stored as confirmed (host-commands.ts) only when that code comes back with it.
import { randomInt, timingSafeEqual } from 'node:crypto';
import { joinCommand } from '../experiments/argv-split.ts';
import { checkArgv } from '../experiments/user-bench.ts';

/** How long a code is good for, and how many wrong tries end it. */
export const CODE_TTL_MS = 5 * 60_000;
export const CODE_TRIES = 3;
/** At most this many requests wait at once (a flood of requests shows no terminal a flood of codes). */
const MAX_PENDING = 8;

export interface PendingRequest {
  requestId: string;
  argv: string[];
}

interface Pending extends PendingRequest {
  code: string;
  expires: number;
  tries: number;
}

export class HostCommandRefused extends Error {}

/**
 * The command as the terminal must show it: every control character (an escape sequence could
 * rewrite the line, a carriage return hide the start) and bidirectional override as a visible
 * \u escape, so what the person reads is what will run.
 */
export function visible(text: string): string {
  return text.replace(/[\u0000-\u001f\u007f-\u009f\u200e\u200f\u202a-\u202e\u2066-\u2069]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

export class HostCommandRequests {
  private readonly pending = new Map<string, Pending>();
  private readonly announce: (text: string) => void;
  private readonly now: () => number;

  constructor(announce: (text: string) => void, now: () => number = Date.now) {
    this.announce = announce;
    this.now = now;
  }

  /** A new request for `rawArgv`: its code goes out of band, never in the answer. */
  request(rawArgv: unknown): PendingRequest {
    const argv = checkArgv(rawArgv);
    this.expire();
    if (this.pending.size >= MAX_PENDING) throw new HostCommandRefused(`${MAX_PENDING} host commands already wait for their codes: confirm or let them expire (${CODE_TTL_MS / 60_000} min) first`);
    const requestId = randomInt(2 ** 47).toString(36).padStart(10, '0');
    const code = String(randomInt(1_000_000)).padStart(6, '0');
    this.pending.set(requestId, { requestId, argv, code, expires: this.now() + CODE_TTL_MS, tries: 0 });
    this.announce(`the app asks to run this command on this machine: ${visible(joinCommand(argv))}\n`
      + `  if you asked for it, type the code ${code.slice(0, 3)} ${code.slice(3)} in the app's dialog (good for ${CODE_TTL_MS / 60_000} minutes); otherwise ignore this`);
    return { requestId, argv };
  }

  /** The request's command when `code` is its code; the request ends on success, expiry or the last wrong try. */
  confirm(requestId: unknown, code: unknown): string[] {
    this.expire();
    const p = typeof requestId === 'string' ? this.pending.get(requestId) : undefined;
    if (!p) throw new HostCommandRefused('no such host command request (it expired, was used, or had too many wrong codes): ask again');
    const typed = typeof code === 'string' ? code.replace(/\s+/g, '') : '';
    if (typed.length === p.code.length && timingSafeEqual(Buffer.from(typed), Buffer.from(p.code))) {
      this.pending.delete(requestId as string);
      return p.argv;
    }
    p.tries++;
    if (p.tries >= CODE_TRIES) {
      this.pending.delete(p.requestId);
      throw new HostCommandRefused(`wrong code ${CODE_TRIES} times: the request is void; ask again for a new code`);
    }
    throw new HostCommandRefused(`wrong code: type the 6 digits Unhalt showed where it runs (${CODE_TRIES - p.tries} ${CODE_TRIES - p.tries === 1 ? 'try' : 'tries'} left)`);
  }

  private expire(): void {
    const t = this.now();
    for (const [id, p] of this.pending) if (p.expires <= t) this.pending.delete(id);
  }
}

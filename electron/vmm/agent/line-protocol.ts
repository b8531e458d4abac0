// The ttyS1 line protocol shared by the probe guest and the Linux agent (docs/guest-contract.md):
//
//   @u1 EVENT key=value key=value ...
//
// EVENT and keys are [a-z0-9_]+ (at most 32 characters); values are decimal integers, possibly
// negative (at most 20 digits); units live in key names (`p50_ns=...`). One key is bytes, not a
// number: `hex=` (lower-case hex digits, an even count, last on the line) carries a byte string,
// the output of the agent's `exec` (exec_out lines), as `data`. A line is at most 512
// bytes. Lines that do not start with "@u1 " are not protocol lines (the agent channel may carry
// other text) and are ignored; lines that start with it but break a rule are malformed: counted
// and dropped, never thrown. Unknown events and keys are passed through for the consumer to
// ignore.

export interface AgentEvent {
  event: string;
  fields: Record<string, number>;
  /** The bytes of a `hex=` field, where the line has one. */
  data?: Uint8Array;
}

export const PROTOCOL_PREFIX = '@u1 ';
export const MAX_LINE_BYTES = 512;
const NAME = /^[a-z0-9_]{1,32}$/;
const INTEGER = /^-?[0-9]{1,20}$/;
const HEX = /^(?:[0-9a-f]{2})*$/;

/** Parses one line; returns the event, 'ignored' for non-protocol text, or 'malformed'. */
export function parseAgentLine(line: string): AgentEvent | 'ignored' | 'malformed' {
  const text = line.endsWith('\r') ? line.slice(0, -1) : line;
  if (!text.startsWith(PROTOCOL_PREFIX)) return 'ignored';
  if (text.length > MAX_LINE_BYTES) return 'malformed';
  const parts = text.slice(PROTOCOL_PREFIX.length).split(' ').filter((p) => p.length > 0);
  const event = parts.shift();
  if (!event || !NAME.test(event)) return 'malformed';
  const fields: Record<string, number> = Object.create(null);
  let data: Uint8Array | undefined;
  for (const [i, part] of parts.entries()) {
    const eq = part.indexOf('=');
    if (eq <= 0) return 'malformed';
    const key = part.slice(0, eq);
    const value = part.slice(eq + 1);
    if (key === 'hex') {
      if (i !== parts.length - 1 || !HEX.test(value)) return 'malformed';
      data = new Uint8Array(value.length / 2);
      for (let j = 0; j < data.length; j++) data[j] = parseInt(value.slice(2 * j, 2 * j + 2), 16);
      continue;
    }
    if (!NAME.test(key) || !INTEGER.test(value)) return 'malformed';
    const n = Number(value);
    if (!Number.isSafeInteger(n)) return 'malformed';
    fields[key] = n;
  }
  return data ? { event, fields, data } : { event, fields };
}

/**
 * Splits a byte stream into lines and parses them. Bounded: a line longer than MAX_LINE_BYTES is
 * cut, counted as malformed, and the rest of it skipped.
 */
export class AgentLineReader {
  malformed = 0;
  private partial = '';
  private skipping = false;
  private readonly decoder = new TextDecoder('utf-8', { fatal: false });
  private readonly onEvent: (e: AgentEvent) => void;

  constructor(onEvent: (e: AgentEvent) => void) {
    this.onEvent = onEvent;
  }

  push(bytes: Uint8Array): void {
    const text = this.decoder.decode(bytes, { stream: true });
    let start = 0;
    for (;;) {
      const nl = text.indexOf('\n', start);
      const piece = text.slice(start, nl < 0 ? undefined : nl);
      if (!this.skipping) this.partial += piece;
      if (this.partial.length > MAX_LINE_BYTES) {
        if (!this.skipping) this.malformed++;
        this.partial = '';
        this.skipping = true;
      }
      if (nl < 0) break;
      if (!this.skipping) this.line(this.partial);
      this.partial = '';
      this.skipping = false;
      start = nl + 1;
    }
  }

  private line(line: string): void {
    const r = parseAgentLine(line);
    if (r === 'malformed') this.malformed++;
    else if (r !== 'ignored') this.onEvent(r);
  }
}

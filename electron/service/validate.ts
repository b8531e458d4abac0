// Checks for the API's scalar inputs. Every call's arguments arrive as `unknown` from a transport
// (JSON over a WebSocket, structured clone over IPC), so nothing is trusted by its static type.
import { ApiError } from './errors.ts';
import { VM_ID } from './library-schema.ts';

/** Longest text any single API argument may be (console input chunks included). */
export const MAX_TEXT = 64 * 1024;

export function vmIdArg(raw: unknown): string {
  if (typeof raw !== 'string') throw new ApiError('invalid', `a VM id must be text, got ${describe(raw)}`);
  if (!VM_ID.test(raw)) throw new ApiError('not-found', `there is no VM with the id "${clip(raw)}"`);
  return raw;
}

export function intArg(raw: unknown, field: string, min: number, max: number): number {
  if (typeof raw !== 'number' || !Number.isSafeInteger(raw)) throw new ApiError('invalid', `${field} must be a whole number, got ${describe(raw)}`);
  if (raw < min || raw > max) throw new ApiError('invalid', `${field} must be between ${min} and ${max}, got ${raw}`);
  return raw;
}

export function textArg(raw: unknown, field: string, max = MAX_TEXT): string {
  if (typeof raw !== 'string') throw new ApiError('invalid', `${field} must be text, got ${describe(raw)}`);
  if (raw.length > max) throw new ApiError('too-large', `${field} is ${raw.length} characters long; at most ${max} are allowed`);
  return raw;
}

export function intListArg(raw: unknown, field: string, maxLength: number, min: number, max: number): number[] {
  if (!Array.isArray(raw)) throw new ApiError('invalid', `${field} must be a list of whole numbers, got ${describe(raw)}`);
  if (raw.length > maxLength) throw new ApiError('too-large', `${field} lists ${raw.length} entries; at most ${maxLength} are allowed`);
  return raw.map((v, i) => intArg(v, `${field}[${i}]`, min, max));
}

/** A short, safe rendering of an unexpected value for an error message. */
export function describe(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'a list';
  if (typeof v === 'string') return `"${clip(v)}"`;
  if (typeof v === 'object') return 'an object';
  return typeof v === 'number' || typeof v === 'boolean' ? String(v) : typeof v;
}

export function clip(s: string, n = 40): string {
  const printable = s.replace(/[^\x20-\x7e]/g, '?');
  return printable.length > n ? `${printable.slice(0, n)}…` : printable;
}

// Where the nested lane sees an L2 guest's console while a check is still waiting on it: a check
// that reads a console (watch(), processConsole()) also writes every line of it, labelled, to
// UNHALT_CONSOLE_MIRROR — in L1 its second serial port, a file of the lane's artifacts outside.
// vitest shows a test file's output only once the file has ended, which a stuck check never
// reaches; the mirror is written as the bytes come. Unset (every other run): nothing is written.
import { closeSync, constants, openSync, writeSync } from 'node:fs';
import { basename } from 'node:path';
import { expect } from 'vitest';

let fd: number | undefined;
let consoles = 0;
/** Bytes the mirror could not take (see write()), said on its next line that goes out. */
let dropped = 0;

function open(): number | undefined {
  const path = process.env.UNHALT_CONSOLE_MIRROR;
  if (!path) return undefined;
  if (fd === undefined) {
    // Non-blocking: a serial port that stops draining must never stall the check (its thread
    // serves the guest's console too); what it cannot take is dropped and counted. No
    // controlling tty: the port is only written to.
    try {
      fd = openSync(path, constants.O_WRONLY | constants.O_APPEND | constants.O_CREAT | constants.O_NONBLOCK | constants.O_NOCTTY);
    } catch (e) {
      // A mirror is a window, not a check: without it the checks run as anywhere else.
      console.warn(`console mirror ${path} could not be opened (${(e as Error).message}): consoles are not mirrored`);
      fd = -1;
    }
    process.once('exit', () => { if (fd !== undefined && fd >= 0) closeSync(fd); });
  }
  return fd >= 0 ? fd : undefined;
}

function write(out: number, s: string): void {
  // On a line of its own: a partial write may have cut the line before it.
  const note = dropped ? `\n[mirror: ${dropped} bytes dropped]\n` : '';
  const bytes = Buffer.from(note + s, 'latin1');
  let n = 0;
  try { n = writeSync(out, bytes); } catch { /* EAGAIN (full), or a gone mirror: must not fail the check */ }
  // Once the note is out, what is owed is this write's unwritten tail; before, this write too.
  dropped = n >= note.length ? bytes.length - n : dropped + s.length;
}

/** One guest console's copy: its bytes as they come, then end() when the console has closed. */
export interface MirrorSink {
  write(chunk: Uint8Array | string): void;
  /** Writes out a last line without its newline (a panic's last words may have none). */
  end(): void;
}

/**
 * A sink for one guest console. Its lines go out prefixed `#N| ` after one header naming the
 * test that reads the console; a half line waits for its end (or end()).
 */
export function consoleMirror(what: string): MirrorSink {
  const out = open();
  if (out === undefined) return { write: () => {}, end: () => {} };
  const n = ++consoles;
  const state = expect.getState();
  const test = `${state.testPath ? basename(state.testPath) : '?'} > ${state.currentTestName ?? '(outside a test)'}`;
  write(out, `\n=== L2 console #${n} (pid ${process.pid}): ${what}; ${test}; at ${new Date().toISOString()}\n`);
  let half = '';
  const flush = () => { if (half) write(out, `#${n}| ${half}\n`); half = ''; };
  return {
    write(chunk) {
      half += typeof chunk === 'string' ? chunk : Buffer.from(chunk).toString('latin1');
      const lines = half.split('\n');
      half = lines.pop()!;
      if (lines.length) write(out, lines.map((l) => `#${n}| ${l.replace(/\r$/, '')}\n`).join(''));
      // A shell prompt ends without a newline, and a long run of bytes may have none: show them now.
      if (half.length > 200 || /[#$] $/.test(half)) flush();
    },
    end: flush,
  };
}

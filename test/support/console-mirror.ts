// Where the nested lane sees an L2 guest's console while a check is still waiting on it: a check
// that reads a console (watch(), processConsole()) also writes every line of it, labelled, to
// UNHALT_CONSOLE_MIRROR — in L1 its second serial port, a file of the lane's artifacts outside.
// vitest shows a test file's output only once the file has ended, which a stuck check never
// reaches; the mirror is written as the bytes come. Unset (every other run): nothing is written.
import { closeSync, openSync, writeSync } from 'node:fs';
import { basename } from 'node:path';
import { expect } from 'vitest';

let fd: number | undefined;
let consoles = 0;

function open(): number | undefined {
  const path = process.env.UNHALT_CONSOLE_MIRROR;
  if (!path) return undefined;
  if (fd === undefined) {
    fd = openSync(path, 'a');
    process.once('exit', () => { if (fd !== undefined) closeSync(fd); });
  }
  return fd;
}

/**
 * A sink for one guest console: call it with each chunk as it comes. Its lines go out prefixed
 * `#N| ` after one header naming the test that reads the console; a half line waits for its end.
 */
export function consoleMirror(what: string): (chunk: Uint8Array | string) => void {
  const out = open();
  if (out === undefined) return () => {};
  const n = ++consoles;
  const state = expect.getState();
  const test = `${state.testPath ? basename(state.testPath) : '?'} > ${state.currentTestName ?? '(outside a test)'}`;
  const write = (s: string) => { try { writeSync(out, s); } catch { /* a full or gone mirror must not fail the check */ } };
  write(`\n=== L2 console #${n} (pid ${process.pid}): ${what}; ${test}; at ${new Date().toISOString()}\n`);
  let half = '';
  return (chunk) => {
    half += typeof chunk === 'string' ? chunk : Buffer.from(chunk).toString('latin1');
    const lines = half.split('\n');
    half = lines.pop()!;
    if (lines.length) write(lines.map((l) => `#${n}| ${l.replace(/\r$/, '')}\n`).join(''));
    // A shell prompt ends without a newline, and a long run of bytes may have none: show them now.
    if (half.length > 200 || / [#$] $/.test(half)) { write(`#${n}| ${half}\n`); half = ''; }
  };
}

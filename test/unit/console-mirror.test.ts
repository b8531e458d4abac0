// The nested lane's live copy of L2 consoles (test/support/console-mirror.ts): labelled lines as
// they come, a prompt without its newline at once, and never a stall: a mirror that stops
// draining (a FIFO nobody reads, as a serial port that stopped) costs dropped bytes, counted.
import { spawnSync } from 'node:child_process';
import { closeSync, constants, mkdtempSync, openSync, readSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, expect, it } from 'vitest';

const dir = mkdtempSync(join(tmpdir(), 'unhalt-mirror-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const fifo = join(dir, 'ttyS1');
spawnSync('mkfifo', [fifo]);
// The reading end first (non-blocking), so the mirror's open for writing does not wait for one.
const reader = openSync(fifo, constants.O_RDONLY | constants.O_NONBLOCK);
afterAll(() => closeSync(reader));
process.env.UNHALT_CONSOLE_MIRROR = fifo;
const { consoleMirror } = await import('../support/console-mirror.ts');

function drain(): string {
  const buf = Buffer.alloc(1 << 20);
  let text = '';
  for (;;) {
    let n = 0;
    try { n = readSync(reader, buf); } catch { break; } // EAGAIN: nothing more for now
    if (n <= 0) break;
    text += buf.toString('latin1', 0, n);
  }
  return text;
}

it('labels each console, writes whole lines as they come and a prompt at once', () => {
  const m = consoleMirror('VM test of this process');
  m.write('Linux version 6.1\r\nhalf');
  m.write(' a line\r\nunhalt:~# ');
  m.write('Kernel panic - not syncing');
  let out = drain();
  expect(out).not.toContain('Kernel panic');
  m.end();
  out += drain();
  expect(out).toMatch(/=== L2 console #1 \(pid \d+\): VM test of this process; console-mirror\.test\.ts > labels each console/);
  expect(out).toContain('#1| Linux version 6.1\n#1| half a line\n#1| unhalt:~# \n#1| Kernel panic - not syncing\n');
});

it('a mirror nobody drains never blocks the check: what it cannot take is dropped and said', () => {
  const m = consoleMirror('a guest that prints a lot');
  const line = `${'x'.repeat(99)}\n`;
  const t0 = performance.now();
  for (let i = 0; i < 5000; i++) m.write(line); // 500 KB into a 64 KiB pipe
  expect(performance.now() - t0, 'no write waited for a reader').toBeLessThan(5000);
  expect(drain().length).toBeLessThanOrEqual(1 << 17);
  m.write('after the stall\n');
  expect(drain()).toMatch(/^\n\[mirror: \d+ bytes dropped\]\n#2\| after the stall\n$/);
});

// Persistence under faults: a child process rewrites the library in a loop and is SIGKILLed at a
// random moment, 50 times. After every kill the library must load — complete, with either the
// generation before or after the interrupted write — and the next writer must get past the lock
// the dead one left behind.
import { spawn } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { parseLibrary } from '../../electron/service/library-schema.ts';
import { LibraryStore } from '../../electron/service/library-store.ts';
import { generationNames, generationOf } from '../support/library-writer.ts';
import { removeTempHomes, tempHome } from '../support/temp-home.ts';

afterAll(removeTempHomes);

const WRITER = new URL('../support/library-writer.ts', import.meta.url).pathname;
const ITERATIONS = 50;

function runAndKill(home: string, delayMs: number): Promise<void> {
  return new Promise((resolve, reject) => {
    // The compile cache keeps each child's start-up (type stripping) short.
    const env = { ...process.env, NODE_COMPILE_CACHE: join(tmpdir(), 'unhalt-compile-cache') };
    const child = spawn(process.execPath, ['--no-warnings', WRITER, home], { stdio: ['ignore', 'pipe', 'inherit'], env });
    let killed = false;
    child.stdout.on('data', (d: Buffer) => {
      if (!killed && d.toString().includes('ready')) {
        killed = true;
        setTimeout(() => child.kill('SIGKILL'), delayMs);
      }
    });
    child.on('error', reject);
    child.on('exit', (code, signal) => (signal === 'SIGKILL' ? resolve() : reject(new Error(`writer exited with ${code ?? signal} before the kill`))));
  });
}

describe('library under SIGKILL', () => {
  it(`always loads old or new content across ${ITERATIONS} kills mid-write`, async () => {
    const home = tempHome('sigkill');
    let last = 0;
    let advanced = 0;
    for (let i = 0; i < ITERATIONS; i++) {
      await runAndKill(home, Math.floor(Math.random() * 40));
      let text: string;
      try {
        text = readFileSync(join(home, 'vms.json'), 'utf8');
      } catch {
        expect(last, 'the library vanished after a kill').toBe(0);
        continue;
      }
      const { file } = parseLibrary(text); // throws on a torn or mixed file
      const names = file.vms.map((v) => v.config.name);
      const gen = generationOf(names);
      expect(names, `iteration ${i}: a whole generation`).toEqual(generationNames(gen));
      expect(gen, `iteration ${i}: never goes back`).toBeGreaterThanOrEqual(last);
      if (gen > last) advanced++;
      last = gen;
    }
    // The kills landed while writes were going on, not only before the first.
    expect(advanced).toBeGreaterThan(ITERATIONS / 2);
    // The store opens cleanly, nothing moved aside, and its first write clears the dead writers' temp files.
    const store = await LibraryStore.open(home, { lock: { timeoutMs: 2000 } });
    expect(store.notices).toEqual([]);
    expect(generationOf(store.list().map((r) => r.config.name))).toBe(last);
    await store.mutate(() => undefined);
    expect(readdirSync(home).sort()).toEqual(['vms.json']);
  }, 120_000);
});

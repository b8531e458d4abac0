// A VM's console kept two ways, both bounded: the in-memory scrollback new subscribers get, and
// the log file under UNHALT_HOME/logs/ that rotates at its limit.
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ConsoleLogFile, readLogTail } from '../../electron/service/console-log.ts';
import { Scrollback } from '../../electron/service/scrollback.ts';
import { removeTempHomes, tempHome } from '../support/temp-home.ts';

afterAll(removeTempHomes);

const bytes = (s: string) => Buffer.from(s, 'latin1');

describe('scrollback', () => {
  it('keeps the newest bytes up to its limit, as a latin1 binary string', () => {
    const s = new Scrollback(10);
    s.push(bytes('hello '));
    s.push(bytes('world!'));
    expect(s.text()).toBe('llo world!');
    expect(s.size).toBe(10);
    s.push(bytes('0123456789ABCDEF'));
    expect(s.text()).toBe('6789ABCDEF');
    s.push(Uint8Array.from([0, 0xff, 0x1b]));
    expect([...s.text()].map((c) => c.charCodeAt(0)).slice(-3)).toEqual([0, 0xff, 0x1b]);
  });

  it('stays bounded and fast under a byte-by-byte flood', () => {
    const s = new Scrollback(4096);
    for (let i = 0; i < 100_000; i++) s.push(Uint8Array.of(0x41 + (i % 26)));
    expect(s.size).toBe(4096);
    expect(s.text()).toHaveLength(4096);
  });

  it('copies what it keeps (the VMM may reuse its buffers)', () => {
    const s = new Scrollback(16);
    const b = bytes('abc');
    s.push(b);
    b.fill(0x7a);
    expect(s.text()).toBe('abc');
  });
});

describe('console log file', () => {
  it('appends in batches and rotates to .1 at its limit', async () => {
    const path = join(tempHome('log'), 'logs', 'vm.log');
    const log = new ConsoleLogFile(path, 1000);
    for (let i = 0; i < 30; i++) {
      log.write(bytes(`${String(i).padStart(3, '0')} ${'x'.repeat(95)}\n`)); // 100 bytes a line
      if (i % 5 === 4) void log.flush();
    }
    await log.flush();
    expect(statSync(path).size).toBeLessThanOrEqual(1000);
    expect(statSync(`${path}.1`).size).toBeLessThanOrEqual(1000);
    // 500-byte flushes: 0-9 fill the first file, 10-19 the second, 20-29 the current one.
    expect(readFileSync(path, 'latin1')).toMatch(/^020 /);
    expect(readFileSync(`${path}.1`, 'latin1')).toMatch(/^010 /);
    expect(readFileSync(path, 'latin1')).toMatch(/029 x+\n$/);
    expect(readLogTail(path, 100).toString()).toBe(`029 ${'x'.repeat(95)}\n`);
    expect(statSync(path).mode & 0o777).toBe(0o600);
  });

  it('never writes through a symbolic link nor blocks on a FIFO where the log goes; their tail is empty', async () => {
    const dir = tempHome('log-odd');
    const victim = join(dir, 'victim.txt');
    writeFileSync(victim, 'mine\n');
    const link = join(dir, 'vm.log');
    symlinkSync(victim, link);
    const log = new ConsoleLogFile(link, 1 << 20);
    log.write(bytes('guest output\n'));
    await log.flush();
    expect(readFileSync(victim, 'utf8')).toBe('mine\n');
    expect(log.dropped).toBe(13);
    expect(readLogTail(link, 100)).toHaveLength(0);
    const fifo = join(dir, 'fifo.log');
    expect(spawnSync('mkfifo', [fifo]).status).toBe(0);
    const f = new ConsoleLogFile(fifo, 1 << 20);
    f.write(bytes('x'));
    await f.flush();
    expect(f.dropped).toBe(1);
    expect(readLogTail(fifo, 100)).toHaveLength(0);
  });

  it('drops (and counts) what a flood brings faster than the disk takes it', async () => {
    const path = join(tempHome('log'), 'vm.log');
    const log = new ConsoleLogFile(path, 1 << 20);
    const chunk = new Uint8Array(64 * 1024);
    for (let i = 0; i < 10; i++) log.write(chunk); // 640 KiB before any flush
    await log.flush();
    expect(statSync(path).size).toBe(256 * 1024);
    expect(log.dropped).toBe(384 * 1024);
  });

  it('removes its files, and a missing log tail is empty', async () => {
    const path = join(tempHome('log'), 'vm.log');
    const log = new ConsoleLogFile(path, 100);
    log.write(bytes('a'.repeat(80)));
    await log.flush();
    log.write(bytes('b'.repeat(80)));
    await log.flush();
    expect(existsSync(`${path}.1`)).toBe(true);
    log.remove();
    expect(existsSync(path) || existsSync(`${path}.1`)).toBe(false);
    expect(readLogTail(path, 10)).toHaveLength(0);
  });
});

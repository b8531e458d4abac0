// `unhalt serve` as a user runs it: prints the URL on stdout, serves it (with the V8 flags of
// long-lived processes), refuses a bad port, and shuts down cleanly on SIGTERM (exit 0) and on
// SIGHUP, a terminal that went away (exit 129, and the home is free again).
import { spawn, spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { LONG_LIVED_V8_FLAGS } from '../../bin/v8-flags.mjs';
import { removeTempHomes, tempHome } from '../support/temp-home.ts';

afterAll(removeTempHomes);

const BIN = new URL('../../bin/unhalt.mjs', import.meta.url).pathname;
const env = (home: string) => ({ ...process.env, UNHALT_HOME: home, NODE_COMPILE_CACHE: join(tmpdir(), 'unhalt-compile-cache'), DISPLAY: '', WAYLAND_DISPLAY: '' });

describe('unhalt serve', () => {
  it('prints the URL, serves it, and exits 0 on SIGTERM', async () => {
    const child = spawn(process.execPath, [BIN, 'serve', '--no-open'], { env: env(tempHome('cli')), stdio: ['ignore', 'pipe', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (d) => { stderr += d; });
    const url = await new Promise<string>((resolve, reject) => {
      let out = '';
      child.stdout.on('data', (d) => {
        out += d;
        if (out.includes('\n')) resolve(out.trim());
      });
      child.on('exit', (code) => reject(new Error(`serve exited ${code}: ${stderr}`)));
    });
    expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/\?token=[A-Za-z0-9_-]{43}$/);
    const res = await fetch(url);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-security-policy')).toMatch(/script-src 'self'/);
    // It serves with the V8 flags of long-lived processes (bin/v8-flags.mjs), given by no one but
    // itself: it re-executed itself with them in the same process (the pid it was started as).
    const cmdline = readFileSync(`/proc/${child.pid}/cmdline`, 'utf8').split('\0');
    for (const flag of LONG_LIVED_V8_FLAGS) expect(cmdline).toContain(flag);
    expect(cmdline).toContain('serve');
    // 'close': all of stderr has been read by then ('exit' may come first), and it is checked below.
    const exited = new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)));
    child.kill('SIGTERM');
    expect(await exited).toBe(0);
    expect(stderr).toMatch(/loopback only/);
  }, 30_000);

  it('stops cleanly on SIGHUP (the terminal went away): the stopping line, exit 129, the home free for the next', async () => {
    const home = tempHome('cli-hup');
    const start = () => {
      const child = spawn(process.execPath, [BIN, 'serve', '--no-open'], { env: env(home), stdio: ['ignore', 'pipe', 'pipe'] });
      let stderr = '';
      child.stderr.on('data', (d) => { stderr += d; });
      const exited = new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)));
      const listening = new Promise<void>((resolve, reject) => {
        let out = '';
        child.stdout.on('data', (d) => { out += d; if (out.includes('\n')) resolve(); });
        void exited.then((code) => reject(new Error(`serve exited ${code}: ${stderr}`)));
      });
      return { child, exited, listening, stderr: () => stderr };
    };
    const first = start();
    await first.listening;
    first.child.kill('SIGHUP');
    expect(await first.exited).toBe(129);
    expect(first.stderr()).toMatch(/unhalt: stopping the server… \(again to exit at once\)/);
    // It shut down (the owner lock released), so the next serve on this home starts.
    const second = start();
    await second.listening;
    second.child.kill('SIGTERM');
    expect(await second.exited).toBe(0);
  }, 30_000);

  it('stops cleanly when its terminal really closes (SIGHUP, and stderr then fails with EIO): exit 129', () => {
    // A pty of its own (Python's pty module): serve is the session leader; closing the master side
    // is the terminal going away, as when an SSH session drops.
    const dir = tempHome('cli-pty');
    const script = join(dir, 'hangup.py');
    writeFileSync(script, [
      'import os, pty, sys, time, select',
      'pid, fd = pty.fork()',
      'if pid == 0:',
      '    os.execvp(sys.argv[1], sys.argv[1:])',
      "buf = b''",
      'end = time.time() + 60',
      "while b'token=' not in buf and time.time() < end:",
      '    r, _, _ = select.select([fd], [], [], 1)',
      '    if r:',
      '        try:',
      '            buf += os.read(fd, 4096)',
      '        except OSError:',
      '            break',
      'os.close(fd)',
      '_, status = os.waitpid(pid, 0)',
      "print('exit', os.waitstatus_to_exitcode(status), 'listened', b'token=' in buf)",
    ].join('\n'));
    const r = spawnSync('python3', [script, process.execPath, BIN, 'serve', '--no-open'], { env: env(join(dir, 'home')), encoding: 'utf8', timeout: 90_000 });
    expect(r.stdout.trim(), r.stderr).toBe('exit 129 listened True');
  }, 120_000);

  it('refuses a bad port with one line and exit code 1', () => {
    const r = spawnSync(process.execPath, [BIN, 'serve', '--port', '99999', '--no-open'], { env: env(tempHome('cli')), encoding: 'utf8' });
    expect(r.status).toBe(1);
    expect(r.stdout).toBe('');
    expect(r.stderr.trim()).toBe('unhalt: --port (0 picks a free one) must be between 0 and 65535, got 99999');
    const host = spawnSync(process.execPath, [BIN, 'serve', '--host', '0.0.0.0'], { env: env(tempHome('cli')), encoding: 'utf8' });
    expect(host.status).toBe(1);
    expect(host.stderr).toMatch(/Unknown option '--host'/);
  });
});

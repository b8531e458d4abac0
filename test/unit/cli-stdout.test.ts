// Every command's stdout is flushed and checked before it exits (issue 30 item 6): output sent to
// a full device is one line naming "disk full" and exit 1, for the commands that print and exit
// at once too (`machines`, bare `unhalt`, `--help`, `doctor`, `export`); a reader that leaves
// early (`| head -c1`) is no error. The full device is a mknod copy of /dev/full (1,7) in a temp
// folder (CI runs as root; elsewhere mknod needs root).
import { spawn, spawnSync } from 'node:child_process';
import { closeSync, openSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { UNHALT_BIN } from '../support/cli.ts';
import { removeTempHomes, tempHome } from '../support/temp-home.ts';

afterAll(removeTempHomes);

const dir = tempHome('cli-stdout');
const FULL = join(dir, 'full');
const made = spawnSync('mknod', [FULL, 'c', '1', '7']).status === 0;
const env = { ...process.env, UNHALT_HOME: join(dir, 'home') };

function run(args: string[], stdout: number | 'pipe'): Promise<{ code: number | null; stderr: string; child: ReturnType<typeof spawn> }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [UNHALT_BIN, ...args], { stdio: ['ignore', stdout, 'pipe'], env });
    let stderr = '';
    child.stderr!.on('data', (d) => { stderr += d; });
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stderr, child }));
    if (stdout === 'pipe') child.stdout!.once('data', () => child.stdout!.destroy()); // a reader that had enough
  });
}

const COMMANDS = [['machines'], [], ['--help'], ['doctor'], ['run', '--help'], ['export', '--config', 'cpus=1', '--format', 'qemu']];

describe('stdout that cannot be written', () => {
  it.skipIf(!made)('a full device: exit 1 and one line saying "disk full", for every command that prints', async () => {
    for (const args of COMMANDS) {
      const fd = openSync(FULL, 'w');
      const r = await run(args, fd);
      closeSync(fd);
      expect(r.code, `unhalt ${args.join(' ')}: ${r.stderr}`).toBe(1);
      expect(r.stderr.trim().split('\n').at(-1)).toBe('unhalt: cannot write to stdout: disk full (ENOSPC); output was lost');
      expect(r.stderr).not.toMatch(/\n\s+at /); // no stack trace
    }
  });

  it('a reader that leaves after the first bytes is no error: exit 0, nothing said', async () => {
    for (const args of [['machines'], ['--help']]) {
      const r = await run(args, 'pipe');
      expect(r.code, `unhalt ${args.join(' ')}: ${r.stderr}`).toBe(0);
      expect(r.stderr).toBe('');
    }
  });
});

// The commands that read a VM of the library by name (`unhalt export VM`, `bench --vm`, `tune VM`)
// with something else than a file in the library's place (issue 30 #11, #9): a directory, a FIFO,
// /dev/zero. Each is refused in one line with exit 1 — no stack trace, no hang, no memory filled.
import { mkdirSync, mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { runCli } from '../support/cli.ts';

const dir = mkdtempSync(join(tmpdir(), 'unhalt-library-kinds-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('a library that is not a file', () => {
  it('is named in one line by export, bench --vm and tune', async () => {
    const homes = {
      directory: (h: string) => mkdirSync(join(h, 'vms.json')),
      FIFO: (h: string) => { expect(spawnSync('mkfifo', [join(h, 'vms.json')]).status).toBe(0); },
      '/dev/zero': (h: string) => symlinkSync('/dev/zero', join(h, 'vms.json')),
    };
    for (const [kind, make] of Object.entries(homes)) {
      const home = join(dir, kind.replace(/\W/g, ''));
      mkdirSync(home);
      make(home);
      for (const args of [['export', 'web', '--format', 'qemu'], ['bench', '--vm', 'web', '--workload', 'timer', '--config', 'a=cpus=1', '--config', 'b=cpus=2'], ['tune', 'web', '--workload', 'timer', '--budget', '5m']]) {
        const r = await runCli(args, { env: { UNHALT_HOME: home }, killAfterMs: 20_000 });
        expect(r.code, `${kind}: ${args[0]}: ${r.stderr}`).toBe(1);
        expect(r.stderr, `${kind}: ${args[0]}`).toMatch(new RegExp(`^unhalt: the VM library ${join(home, 'vms.json')} is not a file \\((a directory|a device, FIFO or socket)\\): move it away, or point UNHALT_HOME elsewhere\\n$`));
      }
    }
  });
});

// Something else than a file where UNHALT_HOME's files go (issue 30 #11, #9): a directory, a FIFO,
// /dev/zero. The commands that read a VM of the library by name (`unhalt export VM`, `bench --vm`,
// `tune VM`) and `unhalt serve` refuse it in one line with exit 1 — no stack trace, no hang, no
// memory filled. The service, with a FIFO as its settings, notices, an experiment record or its
// confirmed commands, still answers its API (the file is named where it matters, never waited on).
import { mkdirSync, mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { createService } from '../../electron/service/service.ts';
import { rejection } from '../support/api-errors.ts';
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
        expect(r.stderr, `${kind}: ${args[0]}`).toMatch(new RegExp(`^unhalt: the VM library ${join(home, 'vms.json')} is (a directory|a FIFO|a device), not a file: move it away \\(Unhalt makes that file itself\\)\\n$`));
      }
    }
  });

  it('is named in one line by unhalt serve, which exits 1 at once', async () => {
    const kinds = {
      directory: (p: string) => mkdirSync(p),
      FIFO: (p: string) => { expect(spawnSync('mkfifo', [p]).status).toBe(0); },
      device: (p: string) => symlinkSync('/dev/zero', p),
    };
    for (const [kind, make] of Object.entries(kinds)) {
      const home = join(dir, `serve-${kind}`);
      mkdirSync(home);
      make(join(home, 'vms.json'));
      const r = await runCli(['serve', '--no-open', '--port', '0'], { env: { UNHALT_HOME: home }, killAfterMs: 20_000 });
      expect(r.code, `${kind}: ${r.stderr}`).toBe(1);
      expect(r.stderr).toBe(`unhalt: the VM library ${join(home, 'vms.json')} is a ${kind === 'FIFO' ? 'FIFO' : kind}, not a file: move it away (Unhalt makes that file itself)\n`);
    }
  });

  it('a FIFO as settings, notices, an experiment record or the confirmed commands blocks nothing; the settings are never written over', async () => {
    const home = join(dir, 'service-fifos');
    mkdirSync(join(home, 'experiments'), { recursive: true });
    for (const f of ['settings.json', 'library-notices.json', 'host-commands.json', 'experiments/x1.json']) expect(spawnSync('mkfifo', [join(home, f)]).status).toBe(0);
    const svc = await createService({ home });
    try {
      expect(await svc.listVms()).toEqual([]);
      expect(await svc.listExperiments()).toEqual([]);
      const r = await rejection(svc.addAllowedFolder(dir));
      expect(r).toEqual({ code: 'conflict', message: `the settings file ${join(home, 'settings.json')} is a FIFO, not a file: move it away (Unhalt makes that file itself); nothing was changed` });
    } finally {
      await svc.shutdown();
    }
  });
});

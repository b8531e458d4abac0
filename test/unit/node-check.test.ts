// A Node too old for Unhalt is told which Node to use: the one set-up fetched into .node/bin
// (named, with the PATH line and the full command), else how to get one. The rule, the advice,
// and `unhalt` itself run by an old Node in a real process.
import { execFileSync, spawnSync } from 'node:child_process';
import { chmodSync, cpSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { MIN_NODE, fetchedNode, nodeTooOld, tooOldAdvice } from '../../bin/node-check.mjs';
import { UNHALT_BIN } from '../support/cli.ts';

const ROOT = join(UNHALT_BIN, '..', '..');
const dir = mkdtempSync(join(tmpdir(), 'unhalt-node-check-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** A checkout's bin/ (the real files) with or without a fetched Node in .node/bin. */
function checkout(name: string, fetched: 'real' | 'old' | 'none'): string {
  const root = join(dir, name);
  mkdirSync(root);
  cpSync(join(ROOT, 'bin'), join(root, 'bin'), { recursive: true });
  if (fetched !== 'none') {
    mkdirSync(join(root, '.node', 'bin'), { recursive: true });
    const node = join(root, '.node', 'bin', 'node');
    if (fetched === 'real') symlinkSync(process.execPath, node);
    else {
      writeFileSync(node, '#!/bin/sh\necho v20.1.0\n');
      chmodSync(node, 0o755);
    }
  }
  return root;
}

/** An installed Node older than MIN_NODE on this machine (the system's, typically), if any. */
function oldNode(): string | null {
  for (const bin of ['/usr/bin/node', '/usr/local/bin/node']) {
    const r = spawnSync(bin, ['--version'], { encoding: 'utf8' });
    if (r.status === 0 && nodeTooOld(r.stdout.trim())) return bin;
  }
  return null;
}

describe('which Node runs Unhalt', () => {
  it('the rule: Node >= 22.18', () => {
    expect(MIN_NODE).toBe('22.18');
    for (const v of ['20.20.2', 'v22.17.9', '18.0.0', '22.9.0']) expect(nodeTooOld(v), v).toBe(true);
    for (const v of ['22.18.0', 'v24.22.3', '23.0.0', '25.1.0']) expect(nodeTooOld(v), v).toBe(false);
    expect(nodeTooOld()).toBe(false); // this one runs the tests
  });

  it('names the Node set-up fetched into .node/bin, with the PATH line and the command', () => {
    const root = checkout('fetched', 'real');
    expect(fetchedNode(root)).toEqual({ bin: join(root, '.node/bin/node'), dir: join(root, '.node/bin'), version: `v${process.versions.node}` });
    expect(tooOldAdvice(root, ['doctor'], '20.20.2', '/usr/bin/node')).toBe(
      `Node 20.20.2 (/usr/bin/node) is too old; Unhalt needs Node >= 22.18. Set-up fetched Node v${process.versions.node} into ${root}/.node/bin: `
      + `put it first on PATH (export PATH="${root}/.node/bin:$PATH") or run: ${root}/.node/bin/node ${root}/bin/unhalt.mjs doctor`,
    );
  });

  it('without a fetched Node (or with one as old), points to set-up', () => {
    for (const root of [checkout('none', 'none'), checkout('old', 'old')]) {
      expect(fetchedNode(root)).toBeNull();
      expect(tooOldAdvice(root, [], '20.20.2', '/usr/bin/node')).toBe(
        `Node 20.20.2 (/usr/bin/node) is too old; Unhalt needs Node >= 22.18. Run: bash ${root}/scripts/setup-and-run.sh `
        + `(it fetches Node 24 into ${root}/.node/bin when the system's is older), or install Node >= 22.18 (README, "Two commands")`,
      );
    }
  });

  it('`unhalt` run by an old Node says so, naming the fetched one, and exits 1 (a real process)', () => {
    const old = oldNode();
    // This machine's old Node where it has one; else the check that every Node reaches (a version
    // stands in for the old one: the same function bin/unhalt.mjs calls).
    if (!old) {
      const root = checkout('no-old-node', 'real');
      expect(tooOldAdvice(root, ['doctor'], '20.0.0', '/usr/bin/node')).toContain(`${root}/.node/bin/node ${root}/bin/unhalt.mjs doctor`);
      return;
    }
    const version = execFileSync(old, ['--version'], { encoding: 'utf8' }).trim().replace(/^v/, '');
    const root = checkout('cli', 'real');
    const r = spawnSync(old, [join(root, 'bin', 'unhalt.mjs'), 'doctor'], { encoding: 'utf8', timeout: 30_000 });
    expect(r.status).toBe(1);
    expect(r.stdout).toBe('');
    expect(r.stderr).toBe(`unhalt: Node ${version} (${old}) is too old; Unhalt needs Node >= 22.18. Set-up fetched Node v${process.versions.node} into ${root}/.node/bin: `
      + `put it first on PATH (export PATH="${root}/.node/bin:$PATH") or run: ${root}/.node/bin/node ${root}/bin/unhalt.mjs doctor\n`);
    // And where set-up has not run yet:
    const bare = checkout('cli-bare', 'none');
    const b = spawnSync(old, [join(bare, 'bin', 'unhalt.mjs'), 'run'], { encoding: 'utf8', timeout: 30_000 });
    expect(b.status).toBe(1);
    expect(b.stderr).toMatch(new RegExp(`^unhalt: Node ${version.replace(/\./g, '\\.')} .* is too old; .*Run: bash ${bare}/scripts/setup-and-run\\.sh `));
  });
});

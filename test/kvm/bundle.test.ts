// The bundle of scripts/build-node.mjs runs a VM as the sources do: built into a scratch folder,
// its CLI boots the probe guest (the vCPU worker is the bundled one, found next to it; the guest
// image is found through the sources' paths) and its record makes it current. CLI tests that
// spawn bin/unhalt.mjs run the bundle whenever the tree's own one is current (as in CI).
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { currentBundle } from '../../bin/bundle.mjs';
import { buildNodeBundle } from '../../scripts/build-node.mjs';
import { kvmAvailable } from '../support/probe.ts';
import { scaled } from '../support/time-scale.ts';

const ROOT = pathToFileURL(fileURLToPath(new URL('../../', import.meta.url)));
const scratch = mkdtempSync(join(tmpdir(), 'unhalt-bundle-kvm-'));
// Inside the checkout (build/ is git-ignored): the bundle finds its packages (koffi) in node_modules.
const outDir = join(fileURLToPath(ROOT), 'build', `test-bundle-${process.pid}`);
afterAll(() => {
  rmSync(scratch, { recursive: true, force: true });
  rmSync(outDir, { recursive: true, force: true });
});

/** Runs `code` (an ES module body; BUNDLE is the bundle's folder URL) in a fresh Node. */
function node(code: string) {
  // A file, not --eval: worker threads inherit the process's execArgv.
  const script = join(scratch, `script-${++scripts}.mjs`);
  writeFileSync(script, `const BUNDLE = ${JSON.stringify(pathToFileURL(`${outDir}/`).href)};\n${code}\n`);
  const r = spawnSync(process.execPath, [script], { encoding: 'utf8', timeout: scaled(60_000), env: { ...process.env, UNHALT_HOME: join(scratch, 'home') } });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}
let scripts = 0;

describe.skipIf(!kvmAvailable)('the bundled CLI', () => {
  it('builds, is current, and points the vCPU worker at its own bundled script', async () => {
    await buildNodeBundle({ outDir });
    expect(currentBundle(ROOT, pathToFileURL(`${outDir}/`))).not.toBeNull();
    expect(existsSync(join(outDir, 'vcpu-worker.mjs'))).toBe(true);
    const r = node("const { VCPU_WORKER_URL } = await import(new URL('worker-pool.mjs', BUNDLE)); console.log(VCPU_WORKER_URL.href);");
    expect(r.stderr).toBe('');
    expect(r.stdout.trim()).toBe(pathToFileURL(join(outDir, 'vcpu-worker.mjs')).href);
  });

  it('boots the probe guest to its banner and exits 0 when the guest powers off', () => {
    const r = node("const { main } = await import(new URL('cli.mjs', BUNDLE)); process.exitCode = await main(['run', '--cpus', '2', '--memory', '64', '--append', 'scenario=hello']);");
    expect(r.stdout, r.stderr).toContain('Unhalt probe guest:');
    expect(r.code, r.stderr).toBe(0);
  });
});

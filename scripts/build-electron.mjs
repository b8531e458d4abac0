#!/usr/bin/env node
// Builds the Electron main process into dist-electron/ (Electron runs JavaScript, not .ts):
// electron/ and native/ as ES modules (tsconfig.electron.json), the preload as CommonJS
// (tsconfig.preload.json -> dist-electron/electron/preload.cjs). Links assets/, renderer/ and
// package.json into dist-electron/ so the code's relative paths (built guests, renderer/dist,
// "type": "module") resolve as they do from the sources.
import { spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT = fileURLToPath(new URL('..', import.meta.url));
export const OUT = join(ROOT, 'dist-electron');
export const STAMP = join(OUT, '.stamp');
export const MAIN = join(OUT, 'electron', 'main.js');

function tsc(project) {
  const r = spawnSync(process.execPath, [join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', join(ROOT, project)], { stdio: 'inherit', cwd: ROOT });
  if (r.status !== 0) throw new Error(`tsc -p ${project} failed`);
}

export function buildElectron() {
  rmSync(OUT, { recursive: true, force: true });
  tsc('tsconfig.electron.json');
  tsc('tsconfig.preload.json');
  const preload = join(OUT, '.preload', 'preload.js');
  mkdirSync(dirname(MAIN), { recursive: true });
  copyFileSync(preload, join(OUT, 'electron', 'preload.cjs'));
  rmSync(join(OUT, '.preload'), { recursive: true, force: true });
  for (const name of ['assets', 'renderer', 'package.json']) {
    const link = join(OUT, name);
    if (!existsSync(link)) symlinkSync(join('..', name), link);
  }
  writeFileSync(STAMP, `${new Date().toISOString()}\n`);
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  try {
    buildElectron();
    process.stderr.write(`build-electron: built ${MAIN}\n`);
  } catch (e) {
    process.stderr.write(`build-electron: ${e.message}\n`);
    process.exit(1);
  }
}

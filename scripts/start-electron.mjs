#!/usr/bin/env node
// `npm start`: the Electron app. Checks for Electron's binary first — it is missing when the
// install skipped its download (ELECTRON_SKIP_BINARY_DOWNLOAD, as CI does) — and then says so in
// one line, with the fix and host mode as the alternative, instead of Electron's stack trace.
// Builds dist-electron/ when the sources are newer, and the renderer when it was never built.
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { MAIN, ROOT, STAMP, buildElectron } from './build-electron.mjs';
import { LONG_LIVED_V8_FLAGS } from '../bin/v8-flags.mjs';

const say = (line) => process.stderr.write(`unhalt: ${line}\n`);

function electronBinary() {
  let dir;
  try {
    dir = join(createRequire(import.meta.url).resolve('electron/package.json'), '..');
  } catch {
    return undefined;
  }
  // What node_modules/electron/index.js reads; absent when the binary download was skipped.
  let rel;
  try {
    rel = readFileSync(join(dir, 'path.txt'), 'utf8').trim();
  } catch {
    return undefined;
  }
  const bin = join(dir, 'dist', rel);
  return existsSync(bin) ? bin : undefined;
}

function newestMtime(dir) {
  let newest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, entry.name);
    if (entry.isDirectory()) newest = Math.max(newest, newestMtime(p));
    else if (entry.name.endsWith('.ts')) newest = Math.max(newest, statSync(p).mtimeMs);
  }
  return newest;
}

function needsBuild() {
  if (!existsSync(STAMP) || !existsSync(MAIN)) return true;
  const built = statSync(STAMP).mtimeMs;
  const configs = ['tsconfig.json', 'tsconfig.electron.json', 'tsconfig.preload.json'].map((f) => statSync(join(ROOT, f)).mtimeMs);
  return Math.max(newestMtime(join(ROOT, 'electron')), newestMtime(join(ROOT, 'native', 'kvm')), ...configs) > built;
}

const binary = electronBinary();
if (!binary) {
  say("Electron's binary is not installed (its download was skipped or blocked: ELECTRON_SKIP_BINARY_DOWNLOAD); "
    + 'fix it with "npm rebuild electron" (without ELECTRON_SKIP_BINARY_DOWNLOAD set), or use host mode instead: npm run serve');
  process.exit(1);
}

try {
  if (needsBuild()) {
    say('building the Electron main process (dist-electron/)…');
    buildElectron();
  }
} catch (e) {
  say(`the build failed: ${e.message}`);
  process.exit(1);
}

if (!existsSync(join(ROOT, 'renderer', 'dist', 'index.html'))) {
  say('building the renderer (renderer/dist/)…');
  const r = spawnSync(process.execPath, [join(ROOT, 'node_modules', 'vite', 'bin', 'vite.js'), 'build', '--config', join(ROOT, 'renderer', 'vite.config.ts')], { stdio: 'inherit', cwd: ROOT });
  if (r.status !== 0) say('the renderer did not build; the window will say how to build it');
}

// The VMM runs in Electron's main process: it gets the V8 flags of long-lived processes
// (bin/v8-flags.mjs). Only --js-flags on Electron's own command line reaches the main process's V8
// (app.commandLine.appendSwitch at run time reaches only the renderers started after it). The
// renderers get them too: PKU write-protection of their JIT pages off, and a `gc` function.
const args = [`--js-flags=${LONG_LIVED_V8_FLAGS.join(' ')}`, MAIN];
// Chromium refuses to run as root with its OS sandbox; the renderer's JS sandbox (sandbox: true,
// contextIsolation) still applies.
if (process.getuid?.() === 0) {
  say('running as root: Chromium\'s OS-level sandbox is off (--no-sandbox); run as a normal user to keep it');
  args.unshift('--no-sandbox');
}
const env = { ...process.env };
delete env.ELECTRON_RUN_AS_NODE;
const child = spawn(binary, args, { stdio: 'inherit', cwd: ROOT, env });
for (const sig of ['SIGINT', 'SIGTERM']) process.on(sig, () => child.kill(sig));
child.on('exit', (code, signal) => process.exit(code ?? (signal ? 1 : 0)));
child.on('error', (e) => {
  say(`cannot launch Electron (${binary}): ${e.message}; use host mode instead: npm run serve`);
  process.exit(1);
});

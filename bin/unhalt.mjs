#!/usr/bin/env node
// The `unhalt` command. Unhalt's sources are TypeScript run directly by Node's type stripping,
// which needs Node >= 22.18 (on by default there), or their bundle (dist-node/, see below).
// An older Node is told which Node to use instead (the one set-up fetched, if any).
import { fileURLToPath } from 'node:url';
import { nodeTooOld, tooOldAdvice } from './node-check.mjs';
if (nodeTooOld()) {
  process.stderr.write(`unhalt: ${tooOldAdvice(fileURLToPath(new URL('../', import.meta.url)).replace(/\/$/, ''), process.argv.slice(2))}\n`);
  process.exit(1);
}
// `unhalt serve` runs VMs for as long as it lives: it runs with the V8 flags of long-lived processes
// (bin/v8-flags.mjs says why). V8 takes them only at start-up, so the process re-executes itself
// with them (execve: the same pid, stdio and signals, and its exit code is serve's own). Loaded
// only for serve: `unhalt run` loads not one module more.
if (process.argv[2] === 'serve' && typeof process.execve === 'function') {
  const { LONG_LIVED_V8_FLAGS } = await import('./v8-flags.mjs');
  const missing = LONG_LIVED_V8_FLAGS.filter((f) => !process.execArgv.includes(f));
  if (missing.length) process.execve(process.execPath, [process.execPath, ...missing, ...process.execArgv, ...process.argv.slice(1)]);
}
// Cache compiled (type-stripped) modules on disk: it halves the start-up of every vCPU worker.
// Setting the variable first makes worker threads inherit it.
import module from 'node:module';
import { homedir } from 'node:os';
// In the user's cache folder, not /tmp: it must survive reboots (a cold cache costs ~0.5 s).
process.env.NODE_COMPILE_CACHE ??= `${process.env.XDG_CACHE_HOME || `${homedir()}/.cache`}/unhalt/compile-cache`;
module.enableCompileCache?.(process.env.NODE_COMPILE_CACHE);
// The bundle of scripts/build-node.mjs while it is current (bin/bundle.mjs), else the sources;
// UNHALT_SOURCES=1 forces the sources (to compare the two).
import { currentBundle } from './bundle.mjs';
const root = new URL('../', import.meta.url);
const bundle = process.env.UNHALT_SOURCES === '1' ? null : currentBundle(root);
const entry = (name, source) => (bundle ? new URL(`${name}.mjs`, bundle) : new URL(source, root)).href;
const { main } = await import(entry('cli', 'electron/cli.ts'));
process.exitCode = await main(process.argv.slice(2));

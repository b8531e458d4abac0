#!/usr/bin/env node
// Builds the probe guest (native/guest/probe) with gcc into assets/guests/probe.elf.
// Plain Node, no dependencies. Run by `npm install` (postinstall, --quiet) and
// `npm run build:guests`.
//
//   node native/guest/build.mjs [--quiet] [--force]
//
// Incremental: nothing is done when the output is newer than every source
// (and this script, which holds the flags). Exits non-zero with a clear message
// when gcc is missing or the build fails.

import { spawnSync } from 'node:child_process';
import { mkdirSync, readdirSync, renameSync, rmSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const root = resolve(here, '..', '..');
const srcDir = join(here, 'probe');
const outDir = join(root, 'assets', 'guests');
const out = join(outDir, 'probe.elf');

const args = new Set(process.argv.slice(2));
const quiet = args.has('--quiet');
const force = args.has('--force');
const CC = process.env.CC || 'gcc';

// Freestanding x86-64, linked at 1 MiB. Every ring-0 instruction is emulated on
// PVM hosts, so: no SSE/AVX (general registers only), baseline x86-64 ISA,
// no red zone (interrupts arrive on the same stack), no CET/stack protector.
const CFLAGS = [
  '-std=gnu11', '-O2', '-g0', '-Wall', '-Wextra',
  '-ffreestanding', '-fno-builtin', '-nostdlib', '-nostdinc', '-static',
  '-fno-pic', '-no-pie', '-mcmodel=small', '-march=x86-64', '-mtune=generic',
  '-mno-red-zone', '-mgeneral-regs-only',
  '-fno-stack-protector', '-fcf-protection=none', '-fno-asynchronous-unwind-tables',
  '-fno-unwind-tables', '-fno-tree-loop-distribute-patterns', '-fno-common',
];
const LDFLAGS = [
  '-Wl,-T,' + join(srcDir, 'probe.ld'), '-Wl,--build-id=none', '-Wl,-z,max-page-size=4096',
  '-Wl,-z,noexecstack',
];

function fail(msg) {
  process.stderr.write(`build-guests: ${msg}\n`);
  process.exit(1);
}

const sources = readdirSync(srcDir).filter((f) => /\.(c|S)$/.test(f)).sort().map((f) => join(srcDir, f));
const inputs = [
  ...readdirSync(srcDir).filter((f) => /\.(c|S|h|ld)$/.test(f)).map((f) => join(srcDir, f)),
  fileURLToPath(import.meta.url),
];

function mtime(p) {
  try {
    return statSync(p).mtimeMs;
  } catch {
    return -1;
  }
}

const outTime = mtime(out);
if (!force && outTime > 0 && inputs.every((p) => mtime(p) < outTime)) {
  if (!quiet) console.log(`probe guest: ${relative(process.cwd(), out) || out} is up to date`);
  process.exit(0);
}

const probe = spawnSync(CC, ['--version'], { encoding: 'utf8' });
if (probe.error) {
  fail(
    `cannot run '${CC}' (${probe.error.code ?? probe.error.message}). The probe guest needs gcc for x86-64 ` +
      `(Debian/Ubuntu: apt-get install gcc). Then run: npm run build:guests`,
  );
}
if (process.arch !== 'x64') {
  fail(`the probe guest is built with the host gcc for x86-64; this host is ${process.arch}`);
}

// gcc's own freestanding headers (stdint.h, stdarg.h, ...) with -nostdinc.
const incr = spawnSync(CC, ['-print-file-name=include'], { encoding: 'utf8' });
const gccInclude = incr.stdout.trim();

mkdirSync(outDir, { recursive: true });
const tmp = `${out}.tmp-${process.pid}`;
const cmd = [...CFLAGS, '-isystem', gccInclude, '-I', srcDir, ...LDFLAGS, '-o', tmp, ...sources];
const t0 = performance.now();
const r = spawnSync(CC, cmd, { encoding: 'utf8' });
if (r.status !== 0) {
  rmSync(tmp, { force: true });
  process.stderr.write(r.stdout + r.stderr);
  fail(`building the probe guest failed (${CC} exited ${r.status ?? r.signal})`);
}
if (r.stderr && !quiet) process.stderr.write(r.stderr);
renameSync(tmp, out);
if (!quiet) {
  const size = statSync(out).size;
  const ms = Math.round(performance.now() - t0);
  console.log(`probe guest: built ${relative(process.cwd(), out) || out} (${size} bytes, ${ms} ms)`);
}

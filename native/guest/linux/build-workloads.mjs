#!/usr/bin/env node
// Builds the Linux workloads (native/guest/linux/workloads/) and the agent that serves them:
//
//   node native/guest/linux/build-workloads.mjs [--quiet] [--force]
//
// writes the host build into assets/guests/linux/host/ (an ignored folder):
//
//   unhalt-workload   `unhalt-workload pipe loops=N` ...: the bare-metal reference of `unhalt
//                     bench --bare` and bench/pipe-truth.ts; prints the agent's `@u1` lines
//   unhalt-agent      the guest agent built for the host; `--stdio` serves the same commands
//                     on stdin/stdout (tests of the guest-side command path)
//
// One source, two builds: build-kit.mjs calls buildLinuxBinaries({ static: true }) for the
// initramfs (gcc -static) and runs this host build too. Plain Node, no dependencies.
// Incremental: a stamp of the sources, this script and the compiler makes a second run instant.
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const root = resolve(here, '..', '..', '..');
export const WORKLOADS_DIR = join(here, 'workloads');
export const AGENT_SRC = join(here, 'agent', 'agent.c');
/** The agent's other sources: the workloads disk's tools, `exec` and the probe's idle lines (not part of the host's unhalt-workload). */
const AGENT_EXTRA = ['tools', 'exec', 'gidle'].flatMap((m) => [join(here, 'agent', `${m}.c`), join(here, 'agent', `${m}.h`)]);
export const HOST_OUT_DIR = join(root, 'assets', 'guests', 'linux', 'host');
const CFLAGS = ['-std=gnu11', '-O2', '-Wall', '-Wextra', '-Werror=implicit-function-declaration'];

/** Every file whose change means a rebuild (also part of build-kit.mjs's stamp). */
export function workloadInputs() {
  const files = readdirSync(WORKLOADS_DIR).filter((f) => /\.(c|h)$/.test(f)).sort().map((f) => join(WORKLOADS_DIR, f));
  return [...files, AGENT_SRC, ...AGENT_EXTRA, fileURLToPath(import.meta.url)];
}

export class BuildError extends Error {}

function compile(cc, args) {
  const r = spawnSync(cc, args, { encoding: 'utf8' });
  if (r.error) {
    throw new BuildError(r.error.code === 'ENOENT'
      ? `cannot run '${cc}': the Linux workloads need gcc (Debian: apt-get install gcc libc6-dev)`
      : `${cc}: ${r.error.message}`);
  }
  if (r.status !== 0) throw new BuildError(`${cc} ${args.join(' ')} failed:\n${(r.stderr || r.stdout).trim()}`);
}

/**
 * Compiles unhalt-workload and unhalt-agent into `outDir`; `static` links them statically (for
 * the initramfs: needs static glibc, libc6-dev). Returns their paths and whether anything was
 * built (false when the stamp in outDir matched).
 */
export function buildLinuxBinaries({ outDir = HOST_OUT_DIR, static: isStatic = false, force = false, log = () => {} } = {}) {
  const cc = process.env.CC || 'gcc';
  const flags = [...CFLAGS, ...(isStatic ? ['-static', '-s'] : [])];
  const h = createHash('sha256').update(JSON.stringify({ cc, flags }));
  for (const f of workloadInputs()) h.update(relative(here, f)).update(readFileSync(f));
  const stamp = h.digest('hex');
  const stampPath = join(outDir, '.build-stamp');
  const out = { workload: join(outDir, 'unhalt-workload'), agent: join(outDir, 'unhalt-agent') };
  const same = !force && existsSync(out.workload) && existsSync(out.agent)
    && (() => { try { return readFileSync(stampPath, 'utf8') === stamp; } catch { return false; } })();
  if (same) return { ...out, built: false };
  mkdirSync(outDir, { recursive: true });
  const lib = join(WORKLOADS_DIR, 'workloads.c');
  log(`compiling unhalt-workload and unhalt-agent (${cc}${isStatic ? ' -static' : ''} -O2)`);
  for (const [name, main] of [['workload', join(WORKLOADS_DIR, 'main.c')], ['agent', AGENT_SRC]]) {
    const tmp = `${out[name]}.tmp-${process.pid}`;
    try {
      compile(cc, [...flags, '-o', tmp, main, lib, ...(name === 'agent' ? AGENT_EXTRA.filter((f) => f.endsWith('.c')) : [])]);
    } catch (e) {
      rmSync(tmp, { force: true });
      if (isStatic && e instanceof BuildError && /cannot find -lc|crt1\.o/.test(e.message)) {
        throw new BuildError(`static linking failed: install static glibc (Debian: apt-get install libc6-dev)\n${e.message}`);
      }
      throw e;
    }
    renameSync(tmp, out[name]);
  }
  writeFileSync(stampPath, stamp);
  return { ...out, built: true };
}

// --- command line ----------------------------------------------------------------------------

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const args = new Set(process.argv.slice(2));
  const quiet = args.has('--quiet');
  const log = (m) => { if (!quiet) process.stdout.write(`linux workloads: ${m}\n`); };
  try {
    const r = buildLinuxBinaries({ force: args.has('--force'), log });
    log(`${r.built ? 'built' : 'up to date:'} ${relative(process.cwd(), r.workload)}, ${relative(process.cwd(), r.agent)}`);
  } catch (e) {
    process.stderr.write(`linux workloads: ${e.message}\n`);
    process.exit(1);
  }
}

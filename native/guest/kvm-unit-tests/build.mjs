#!/usr/bin/env node
// Builds the KVM community's unit tests (kvm-unit-tests, GPL-2) as test data for the project:
// the upstream source tarball from the workplace's shared folder, unpacked and built with its own
// `./configure --arch=x86_64 && make` in a temporary folder; its x86 kernels (x86/*.flat) and
// x86/unittests.cfg go to assets/guests/kvm-unit-tests/ (an ignored folder, which the nested
// lane's L1 image carries). Nothing of its code enters the project.
//
//   node native/guest/kvm-unit-tests/build.mjs [--force] [--quiet]
//
// The tarball: $UNHALT_KVM_UNIT_TESTS (a .tar.gz or the folder holding one), else the nearest
// shared/kvm-unit-tests/ in a folder above this checkout (../shared/kvm-unit-tests/ beside it), or
// above the local repository it was cloned from (a clean clone made elsewhere). Needs gcc and make (~25 s on two CPUs).
// Cached: a stamp of the tarball's SHA-256 makes a second run instant. Prints the folder.
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
export const KVM_UNIT_TESTS_DIR = join(root, 'assets', 'guests', 'kvm-unit-tests');
const STAMP = join(KVM_UNIT_TESTS_DIR, 'stamp.json');

/** Folders at and above `dir`, nearest first. */
function upFrom(dir) {
  const out = [];
  for (let d = dir; ; d = dirname(d)) {
    out.push(d);
    if (dirname(d) === d) return out;
  }
}

/** The local repository this checkout was cloned from (a clean clone for CI), if any. */
function clonedFrom() {
  const r = spawnSync('git', ['-C', root, 'config', '--get', 'remote.origin.url'], { encoding: 'utf8' });
  const url = r.status === 0 ? r.stdout.trim().replace(/^file:\/\//, '') : '';
  return url.startsWith('/') && existsSync(url) ? resolve(url) : undefined;
}

/** The suite's source tarball, or an error naming where it was looked for. */
export function findTarball() {
  const given = process.env.UNHALT_KVM_UNIT_TESTS;
  const origin = clonedFrom();
  const places = given ? [given] : [...upFrom(dirname(root)), ...(origin ? upFrom(dirname(origin)) : [])].map((d) => join(d, 'shared', 'kvm-unit-tests'));
  for (const p of places) {
    if (!existsSync(p)) continue;
    if (statSync(p).isFile()) return p;
    const tar = readdirSync(p).filter((f) => /^kvm-unit-tests.*\.tar\.gz$/.test(f)).sort().pop();
    if (tar) return join(p, tar);
  }
  throw new Error(`no kvm-unit-tests source tarball in ${given ?? `a shared/kvm-unit-tests/ folder above ${root}${origin ? ` or ${origin}` : ''}`}: set UNHALT_KVM_UNIT_TESTS to the .tar.gz`);
}

/** Builds the suite unless the stamp says this tarball is built; returns the folder with x86/. */
export function buildKvmUnitTests({ force = false, log = () => {} } = {}) {
  let tarball;
  try {
    tarball = findTarball();
  } catch (e) {
    // Built elsewhere and carried here without its source (the nested lane's L1 image).
    if (!force && existsSync(STAMP)) return KVM_UNIT_TESTS_DIR;
    throw e;
  }
  const sha256 = createHash('sha256').update(readFileSync(tarball)).digest('hex');
  if (!force && existsSync(STAMP) && JSON.parse(readFileSync(STAMP, 'utf8')).sha256 === sha256) return KVM_UNIT_TESTS_DIR;
  const work = mkdtempSync(join(tmpdir(), 'unhalt-kvm-unit-tests-'));
  const out = `${KVM_UNIT_TESTS_DIR}.building-${process.pid}`;
  try {
    const run = (cmd, args, cwd) => {
      const r = spawnSync(cmd, args, { cwd, encoding: 'utf8', maxBuffer: 64 << 20 });
      if (r.error || r.status !== 0) {
        throw new Error(`${cmd} ${args.join(' ')} failed (${r.error?.message ?? `exit ${r.status}`}): ${(r.stderr || r.stdout || '').trim().split('\n').slice(-5).join(' | ')}`);
      }
    };
    log(`building ${tarball}`);
    run('tar', ['xzf', tarball, '-C', work, '--strip-components=1'], root);
    run('./configure', ['--arch=x86_64'], work);
    run('make', [`-j${Math.max(1, cpus().length)}`], work);
    rmSync(out, { recursive: true, force: true });
    mkdirSync(join(out, 'x86'), { recursive: true });
    for (const f of readdirSync(join(work, 'x86')).filter((n) => n.endsWith('.flat') || n === 'unittests.cfg')) {
      copyFileSync(join(work, 'x86', f), join(out, 'x86', f));
    }
    writeFileSync(join(out, 'stamp.json'), `${JSON.stringify({ tarball, sha256 })}\n`);
    // Another build's folder is replaced whole, so a reader sees an old suite or a new one.
    rmSync(KVM_UNIT_TESTS_DIR, { recursive: true, force: true });
    renameSync(out, KVM_UNIT_TESTS_DIR);
  } finally {
    rmSync(work, { recursive: true, force: true });
    rmSync(out, { recursive: true, force: true });
  }
  return KVM_UNIT_TESTS_DIR;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const argv = process.argv.slice(2);
  const quiet = argv.includes('--quiet');
  try {
    const dir = buildKvmUnitTests({ force: argv.includes('--force'), log: (m) => { if (!quiet) process.stderr.write(`kvm-unit-tests: ${m}\n`); } });
    process.stdout.write(`${dir}\n`);
  } catch (e) {
    process.stderr.write(`kvm-unit-tests: ${e.message}\n`);
    process.exit(1);
  }
}

#!/usr/bin/env node
// The QEMU that emulates L1 (the "outer" QEMU of the nested lane, docs/nested.md).
//
// Debian 12's own QEMU 7.2 emulates AMD SVM well enough to boot L1 and run KVM in it, but under
// L2 Linux guests L1's memory gets corrupted (processes in L1 die of SIGSEGV in zeroed JIT pages,
// once a kernel "corrupted stack end" panic): its TCG nested-paging/TLB handling has bugs that
// later QEMU releases fixed. bookworm-backports carries a current QEMU built for this same
// Debian release, so the lane takes that one, without installing it: a private apt configuration
// (its own sources list, lists and cache under assets/nested/, signatures checked against the
// system's Debian keyring as apt always does) downloads qemu-system-x86, qemu-system-data and
// seabios, and `dpkg-deb -x` unpacks them into assets/nested/outer-qemu/<version>/. The system's
// apt state and /usr are never touched.
//
//   node test/nested/outer-qemu.mjs [--quiet]    prints the JSON of what it resolved
//
// The result is cached by package versions: a second run with unchanged lists costs one
// `apt-get update` of the backports lists (skipped when they are under a day old).
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const root = resolve(here, '..', '..');
const BASE = join(root, 'assets', 'nested', 'outer-qemu');
/** Packages whose files the outer QEMU needs: the binary, its firmware blobs, the BIOS. */
const PACKAGES = ['qemu-system-x86', 'qemu-system-data', 'seabios'];
const DAY_MS = 24 * 3600_000;

function fail(msg) {
  throw new Error(`nested outer QEMU: ${msg}`);
}
function run(cmd, args, opts = {}) {
  const r = spawnSync(cmd, args, { encoding: 'utf8', maxBuffer: 64 * 1024 * 1024, ...opts });
  if (r.error) fail(`${cmd} could not run: ${r.error.message}`);
  if (r.status !== 0) fail(`${cmd} ${args.join(' ')} failed (status ${r.status}):\n${(r.stderr || r.stdout).trim()}`);
  return r.stdout;
}

/** The Debian codename and archive URI this machine's apt uses for its main suite. */
function debianArchive() {
  const osRelease = readFileSync('/etc/os-release', 'utf8');
  const codename = /^VERSION_CODENAME=(\S+)/m.exec(osRelease)?.[1];
  if (!codename) fail('/etc/os-release names no VERSION_CODENAME (is this Debian?)');
  const texts = [];
  for (const f of ['/etc/apt/sources.list']) if (existsSync(f)) texts.push(readFileSync(f, 'utf8'));
  if (existsSync('/etc/apt/sources.list.d')) {
    for (const f of readdirSync('/etc/apt/sources.list.d')) {
      if (f.endsWith('.sources') || f.endsWith('.list')) texts.push(readFileSync(join('/etc/apt/sources.list.d', f), 'utf8'));
    }
  }
  // deb822 ("URIs: …" then "Suites: …") or one-line ("deb URI suite comp…") entries for the main suite.
  for (const t of texts) {
    for (const stanza of t.split(/\n\s*\n/)) {
      const uri = /^URIs:\s*(\S+)/m.exec(stanza)?.[1];
      const suites = /^Suites:\s*(.+)$/m.exec(stanza)?.[1]?.split(/\s+/) ?? [];
      if (uri && suites.includes(codename) && /\/debian\/?$/.test(uri)) return { codename, uri };
    }
    for (const m of t.matchAll(/^deb\s+(?:\[[^\]]*\]\s+)?(\S+)\s+(\S+)\s/gm)) {
      if (m[2] === codename && /\/debian\/?$/.test(m[1])) return { codename, uri: m[1] };
    }
  }
  return { codename, uri: 'http://deb.debian.org/debian' };
}

/** apt options that point every path apt writes at our own folder. */
function privateApt(dir, codename, uri) {
  for (const d of ['lists/partial', 'cache/archives/partial', 'debs']) mkdirSync(join(dir, d), { recursive: true });
  writeFileSync(join(dir, 'sources.list'), `deb ${uri} ${codename}-backports main\n`);
  return [
    '-o', `Dir::Etc::SourceList=${join(dir, 'sources.list')}`,
    '-o', `Dir::Etc::SourceParts=${join(dir, 'no-parts')}`,
    '-o', `Dir::State::Lists=${join(dir, 'lists')}`,
    '-o', `Dir::Cache=${join(dir, 'cache')}`,
    // apt drops to _apt for downloads; our folder is root's, and nothing here runs as a daemon.
    '-o', 'APT::Sandbox::User=root',
    // Our own lists and cache: the system's apt lock guards state we do not use.
    '-o', 'Debug::NoLocking=1',
  ];
}

function listsFresh(dir) {
  try {
    const lists = readdirSync(join(dir, 'lists')).filter((f) => f.endsWith('_Packages') || f.includes('_Packages.'));
    return lists.length > 0 && Date.now() - statSync(join(dir, 'lists', lists[0])).mtimeMs < DAY_MS;
  } catch {
    return false;
  }
}

/** The candidate version of pkg in the private lists (backports only: those are the only lists). */
function candidate(opts, pkg) {
  const out = run('apt-cache', [...opts, 'show', '--no-all-versions', pkg]);
  const version = /^Version:\s*(\S+)/m.exec(out)?.[1];
  if (!version) fail(`bookworm-backports lists name no ${pkg}`);
  return version;
}

/** Resolves (downloading and unpacking when needed) the outer QEMU; returns how to run it. */
export function outerQemu({ quiet = true } = {}) {
  const log = (msg) => { if (!quiet) process.stdout.write(`nested outer QEMU: ${msg}\n`); };
  const { codename, uri } = debianArchive();
  const aptDir = join(BASE, 'apt');
  const opts = privateApt(aptDir, codename, uri);
  if (!listsFresh(aptDir)) {
    log(`apt-get update of ${uri} ${codename}-backports (private lists)`);
    run('apt-get', [...opts, 'update', '-qq']);
  }
  const versions = Object.fromEntries(PACKAGES.map((p) => [p, candidate(opts, p)]));
  const key = versions['qemu-system-x86'].replace(/[^A-Za-z0-9.+~-]/g, '_');
  const tree = join(BASE, key);
  const stampFile = join(tree, 'versions.json');
  let cached = false;
  try { cached = JSON.stringify(JSON.parse(readFileSync(stampFile, 'utf8'))) === JSON.stringify(versions); } catch { /* not yet */ }
  if (!cached) {
    const debs = join(aptDir, 'debs');
    for (const f of readdirSync(debs)) rmSync(join(debs, f), { force: true });
    for (const [pkg, version] of Object.entries(versions)) {
      log(`downloading ${pkg} ${version}`);
      run('apt-get', [...opts, 'download', '-q', `${pkg}=${version}`], { cwd: debs });
    }
    const partial = `${tree}.partial`;
    rmSync(partial, { recursive: true, force: true });
    mkdirSync(partial, { recursive: true });
    for (const f of readdirSync(debs).filter((n) => n.endsWith('.deb'))) run('dpkg-deb', ['-x', join(debs, f), partial]);
    writeFileSync(join(partial, 'versions.json'), `${JSON.stringify(versions, null, 2)}\n`);
    rmSync(tree, { recursive: true, force: true });
    renameSync(partial, tree);
  }
  const binary = join(tree, 'usr/bin/qemu-system-x86_64');
  // Debian's qemu-system-data does not carry the BIOS: that is the seabios package's folder.
  const dataDirs = [join(tree, 'usr/share/qemu'), join(tree, 'usr/share/seabios')];
  const version = run(binary, ['--version']).split('\n')[0].trim();
  return { binary, dataArgs: dataDirs.flatMap((d) => ['-L', d]), version, versions };
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  try {
    process.stdout.write(`${JSON.stringify(outerQemu({ quiet: process.argv.includes('--quiet') }), null, 2)}\n`);
  } catch (e) {
    process.stderr.write(`${e.message}\n`);
    process.exit(1);
  }
}

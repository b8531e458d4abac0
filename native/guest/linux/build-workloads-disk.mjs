#!/usr/bin/env node
// Builds the Linux kit's workloads disk into assets/guests/linux/ (an ignored folder):
//
//   workloads.ext4     an ext4 image (mke2fs -d, label "unhalt-workloads", no journal: it is
//                      attached read-only) holding Debian's perf (linux-perf), cyclictest
//                      (rt-tests), iperf3, stress-ng and sockperf with every shared library
//                      they load
//   workloads/         the same tree, unpacked (the host runs the tools from it too):
//                        bin/TOOL       a /bin/sh wrapper: runs libexec/TOOL through the bundled
//                                       loader with --library-path lib (never the host's cache)
//                        libexec/TOOL   the package's binary
//                        lib/           the DT_NEEDED closure of every tool, and the loader
//                        agent/         Unhalt's static agent, its systemd unit and a POSIX sh
//                                       starter (tools-disk.mjs): a distribution's guest runs the
//                                       agent from here, started by the NoCloud seed
//   workloads.json     what went in (packages and versions, libraries, hashes): the cache stamp
//
//   node native/guest/linux/build-workloads-disk.mjs [--force] [--quiet] [--out DIR]
//                       [--debs DIR] [--tools perf,iperf3,...]
//
// The kit's /init mounts the disk read-only at /opt/workloads when a VM has it (found by its
// label) and puts /opt/workloads/bin on PATH; `unhalt bench --guest linux` attaches it for the
// tool workloads (perf-pipe, perf-messaging, cyclictest, iperf3-tcp, stress-ng-switch,
// sockperf-tcp-rr), which the agent runs and reads. Packages come from `apt-get download` with their library dependency
// closure (apt-cache depends, lib* packages only); the libraries that go in are exactly those
// the tools' DT_NEEDED entries reach inside the unpacked packages (elf-needed.mjs), so a missing
// one is a build error here, not a failed exec in the guest. Idempotent: a stamp of the inputs
// (this script, its modules, the tools, the agent's sources, unit and script, and the resolved
// package versions) makes a second run return at once, and any change to them rebuilds.
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  chmodSync, copyFileSync, existsSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, renameSync, rmSync, statSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, dirname, join, posix, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { aptListsState, DebianPackages, PackageError, requireDebianTools } from './debian-packages.mjs';
import { buildLinuxBinaries } from './build-workloads.mjs';
import { elfDynamic } from './elf-needed.mjs';
import { toolsDiskAgentFiles, toolsDiskInputs } from './tools-disk.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const root = resolve(here, '..', '..', '..');
const STAMP_VERSION = 2;
export const WORKLOADS_LABEL = 'unhalt-workloads';

/** The tools, each from its Debian package. */
export const WORKLOAD_TOOLS = {
  perf: { package: 'linux-perf', binary: 'usr/bin/perf' },
  cyclictest: { package: 'rt-tests', binary: 'usr/bin/cyclictest' },
  iperf3: { package: 'iperf3', binary: 'usr/bin/iperf3' },
  'stress-ng': { package: 'stress-ng', binary: 'usr/bin/stress-ng' },
  sockperf: { package: 'sockperf', binary: 'usr/bin/sockperf' },
};
/** Where the loader looks by default on Debian amd64 (the tree's copy of those folders). */
const LIB_DIRS = ['lib/x86_64-linux-gnu', 'usr/lib/x86_64-linux-gnu', 'lib64', 'lib', 'usr/lib'];

const argv = process.argv.slice(2);
const option = (name) => { const i = argv.indexOf(name); return i >= 0 ? argv[i + 1] : undefined; };
const quiet = argv.includes('--quiet');
const force = argv.includes('--force');
const outDir = resolve(option('--out') ?? join(root, 'assets', 'guests', 'linux'));
const debsDir = resolve(option('--debs') ?? join(root, 'assets', 'guests', 'linux', '.debs'));
const toolNames = (option('--tools') ?? Object.keys(WORKLOAD_TOOLS).join(',')).split(',').filter(Boolean);
const t0 = performance.now();

const log = (msg) => { if (!quiet) process.stdout.write(`workloads disk: ${msg}\n`); };
function fail(msg) {
  process.stderr.write(`workloads disk: ${msg}\n`);
  process.exit(1);
}
for (const t of toolNames) if (!Object.hasOwn(WORKLOAD_TOOLS, t)) fail(`unknown tool "${t}"; valid: ${Object.keys(WORKLOAD_TOOLS).join(', ')}`);

const sha256 = (data) => createHash('sha256').update(data).digest('hex');
const IMAGE = join(outDir, 'workloads.ext4');
const TREE = join(outDir, 'workloads');
const STAMP = join(outDir, 'workloads.json');

function localInputsHash() {
  const h = createHash('sha256').update(JSON.stringify({ STAMP_VERSION, tools: toolNames.map((t) => [t, WORKLOAD_TOOLS[t]]) }));
  for (const f of [fileURLToPath(import.meta.url), join(here, 'debian-packages.mjs'), join(here, 'elf-needed.mjs'), ...toolsDiskInputs()]) {
    h.update(relative(here, f)).update(readFileSync(f));
  }
  return h.digest('hex');
}
const readStamp = () => { try { return JSON.parse(readFileSync(STAMP, 'utf8')); } catch { return undefined; } };
const localHash = localInputsHash();
const listsState = aptListsState();
const old = readStamp();
const outputsThere = () => existsSync(IMAGE) && existsSync(join(TREE, 'lib')) && toolsDiskAgentFiles('').every((f) => existsSync(join(TREE, f.path)));
const sameLocal = !force && old?.stampVersion === STAMP_VERSION && old.local === localHash && outputsThere();
function upToDate(st) {
  log(`up to date in ${relative(process.cwd(), outDir) || outDir} (${Object.entries(st.tools).map(([t, v]) => `${t} ${v.version}`).join(', ')}; --force rebuilds)`);
  process.exit(0);
}
if (sameLocal && old.aptLists === listsState) upToDate(old);

try {
  requireDebianTools('the workloads disk');
} catch (e) {
  fail(e.message);
}
const work = mkdtempSync(join(tmpdir(), 'unhalt-workloads-disk-'));
process.on('exit', () => rmSync(work, { recursive: true, force: true }));
const apt = new DebianPackages({ cacheDir: debsDir, workDir: work, log });

// --- which packages, at which versions ----------------------------------------------------------

let packages;
let versions;
try {
  const roots = toolNames.map((t) => WORKLOAD_TOOLS[t].package);
  if (apt.candidates(roots).size < roots.length) apt.update(`apt knows none of ${roots.filter((p) => !apt.candidates([p]).has(p)).join(', ')}`);
  // Libraries only: the tools' other dependencies (perl, python3, debconf, adduser) are for
  // scripts and maintainer scripts the disk does not run.
  packages = apt.closure(roots, (name) => /^(lib|zlib)/.test(name) && !/-(dev|dbg|doc)$/.test(name)).sort();
  versions = apt.candidates(packages);
  const unknown = packages.filter((p) => !versions.has(p) && roots.includes(p));
  if (unknown.length) fail(`apt knows no package ${unknown.join(', ')} (is this Debian with main enabled?)`);
  packages = packages.filter((p) => versions.has(p));
} catch (e) {
  fail(e.message);
}
const pinned = packages.map((p) => `${p}=${versions.get(p)}`);
const packagesHash = sha256(pinned.join('\n'));
if (sameLocal && old.packages === packagesHash) {
  writeFileSync(STAMP, `${JSON.stringify({ ...old, aptLists: listsState }, null, 2)}\n`);
  upToDate(old);
}
log(`${toolNames.join(', ')} from ${packages.length} packages`);

// --- unpack, then take what the tools load --------------------------------------------------------

const unpacked = join(work, 'tree');
try {
  for (const deb of apt.downloadAll(packages.map((p) => [p, versions.get(p)]))) apt.unpack(deb, unpacked);
} catch (e) {
  fail(e instanceof PackageError ? e.message : String(e));
}

/** A path inside the unpacked tree with its symlinks followed inside the tree (absolute ones too). */
function inTree(rel) {
  let parts = rel.split('/').filter(Boolean);
  let done = [];
  for (let hops = 0; parts.length > 0;) {
    const next = [...done, parts[0]];
    const full = join(unpacked, ...next);
    let st;
    try { st = lstatSync(full); } catch { return undefined; }
    if (st.isSymbolicLink()) {
      if (++hops > 40) return undefined;
      const target = readlinkSync(full);
      parts = [...target.split('/').filter(Boolean), ...parts.slice(1)];
      if (!target.startsWith('/')) parts = [...done, ...parts];
      done = [];
      parts = posix.normalize(parts.join('/')).split('/').filter((p) => p && p !== '.');
      continue;
    }
    done = next;
    parts = parts.slice(1);
  }
  return done.join('/');
}

/** soname -> its file in the tree (resolved), searching RUNPATH first, then the usual folders. */
function findLibrary(soname, runpath, originDir) {
  const dirs = [...runpath.map((d) => d.replace(/\$(\{ORIGIN\}|ORIGIN)/g, `/${originDir}`)), ...LIB_DIRS];
  for (const d of dirs) {
    const real = inTree(posix.join(d, soname));
    if (real && statSync(join(unpacked, real)).isFile()) return real;
  }
  return undefined;
}

const libs = new Map(); // soname -> tree path
let interp;
const missing = [];
function walk(treePath, who) {
  const dyn = elfDynamic(join(unpacked, treePath));
  if (!dyn) fail(`${who} (${treePath}) is not an ELF64 object`);
  if (dyn.interp) {
    if (interp && interp !== dyn.interp) fail(`${who} wants the loader ${dyn.interp}, another tool ${interp}`);
    interp = dyn.interp;
  }
  for (const soname of dyn.needed) {
    if (libs.has(soname)) continue;
    const found = findLibrary(soname, dyn.runpath, posix.dirname(treePath));
    if (!found) { missing.push(`${soname} (needed by ${who})`); continue; }
    libs.set(soname, found);
    walk(found, soname);
  }
}
const toolFiles = {};
for (const t of toolNames) {
  const real = inTree(WORKLOAD_TOOLS[t].binary);
  if (!real) fail(`${WORKLOAD_TOOLS[t].package} has no ${WORKLOAD_TOOLS[t].binary}`);
  toolFiles[t] = real;
  walk(real, t);
}
if (missing.length) fail(`no package of the closure has ${missing.join(', ')}`);
if (!interp) fail('no tool names a loader (PT_INTERP): are they static?');
const loaderReal = inTree(interp);
if (!loaderReal) fail(`the loader ${interp} is not in the unpacked packages (libc6)`);
const LOADER = basename(interp);

// --- the agent (static, as in the kit's initramfs) -----------------------------------------------

let agentBinary;
try {
  agentBinary = buildLinuxBinaries({ outDir: join(work, 'static'), static: true, force: true, log: (m) => log(`agent: ${m}`) }).agent;
} catch (e) {
  fail(e.message);
}

// --- the tree and the image -------------------------------------------------------------------

const staging = join(work, 'staging');
for (const d of ['bin', 'libexec', 'lib', 'agent']) mkdirSync(join(staging, d), { recursive: true });
for (const f of toolsDiskAgentFiles(agentBinary)) {
  copyFileSync(f.from, join(staging, f.path));
  chmodSync(join(staging, f.path), f.mode);
}
const put = (from, to, mode) => { copyFileSync(join(unpacked, from), join(staging, to)); chmodSync(join(staging, to), mode); };
put(loaderReal, `lib/${LOADER}`, 0o755);
for (const [soname, file] of libs) if (soname !== LOADER) put(file, `lib/${soname}`, 0o644);
for (const [t, file] of Object.entries(toolFiles)) {
  put(file, `libexec/${t}`, 0o755);
  // Relative to the wrapper's own folder: the same tree runs at /opt/workloads in the guest and
  // from assets/ on the host. --inhibit-cache: only the bundled libraries, never the host's.
  writeFileSync(join(staging, 'bin', t), `#!/bin/sh
# ${t} from Debian's ${WORKLOAD_TOOLS[t].package} ${versions.get(WORKLOAD_TOOLS[t].package)}, with its own libraries (unhalt workloads disk)
d=$(dirname "$(dirname "$(readlink -f "$0")")")
exec "$d/lib/${LOADER}" --inhibit-cache --library-path "$d/lib" "$d/libexec/${t}" "$@"
`, { mode: 0o755 });
}
let bytes = 0;
for (const d of ['bin', 'libexec', 'lib', 'agent']) for (const f of readdirSafe(join(staging, d))) bytes += statSync(join(staging, d, f)).size;
function readdirSafe(d) { try { return readdirSync(d); } catch { return []; } }

mkdirSync(outDir, { recursive: true });
const sizeMiB = Math.ceil((bytes * 1.2) / 1048576) + 16;
const tmpImage = join(outDir, `.workloads.ext4.tmp-${process.pid}`);
// No journal: the disk is attached read-only, so there is nothing to replay and `mount -o ro` works.
const mk = spawnSync('mke2fs', ['-q', '-F', '-t', 'ext4', '-O', '^has_journal', '-L', WORKLOADS_LABEL, '-E', 'root_owner=0:0', '-d', staging, tmpImage, `${sizeMiB}M`], { encoding: 'utf8' });
if (mk.error || mk.status !== 0) {
  rmSync(tmpImage, { force: true });
  fail(mk.error?.code === 'ENOENT' ? 'mke2fs not found (Debian: apt-get install e2fsprogs)' : `mke2fs failed: ${(mk.stderr || '').trim()}`);
}
rmSync(TREE, { recursive: true, force: true });
renameSync(staging, TREE);
renameSync(tmpImage, IMAGE);
const image = readFileSync(IMAGE);
const stamp = {
  stampVersion: STAMP_VERSION,
  builtAt: new Date().toISOString(),
  local: localHash,
  aptLists: listsState,
  packages: packagesHash,
  pinned,
  tools: Object.fromEntries(toolNames.map((t) => [t, { package: WORKLOAD_TOOLS[t].package, version: versions.get(WORKLOAD_TOOLS[t].package), path: `bin/${t}` }])),
  loader: LOADER,
  agent: Object.fromEntries(toolsDiskAgentFiles(agentBinary).map((f) => [f.path, sha256(readFileSync(join(TREE, f.path)))])),
  libraries: [...libs.keys()].filter((s) => s !== LOADER).sort(),
  image: { label: WORKLOADS_LABEL, sha256: sha256(image), bytes: image.length },
};
writeFileSync(join(outDir, `.workloads.json.tmp-${process.pid}`), `${JSON.stringify(stamp, null, 2)}\n`);
renameSync(join(outDir, `.workloads.json.tmp-${process.pid}`), STAMP);
log(`built ${relative(process.cwd(), IMAGE) || IMAGE}: ${toolNames.length} tools, ${stamp.libraries.length} libraries, `
  + `${(bytes / 1048576).toFixed(1)} MiB in a ${sizeMiB} MiB ext4 in ${((performance.now() - t0) / 1000).toFixed(1)} s`);

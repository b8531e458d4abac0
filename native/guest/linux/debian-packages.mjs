// Debian packages without installing them: versions from `apt-cache policy`, library dependency
// closures from `apt-cache depends`, downloads with `apt-get download` (no root needed, kept in
// a cache folder by name and version) and `dpkg-deb -x` to unpack. Used by the workloads disk
// (build-workloads-disk.mjs); the kit (build-kit.mjs) does the same steps for the kernel.
import { spawnSync } from 'node:child_process';
import { chmodSync, copyFileSync, existsSync, mkdirSync, readdirSync, rmSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { createHash } from 'node:crypto';

export class PackageError extends Error {}

function run(cmd, args, opts = {}) {
  const r = spawnSync(cmd, args, { encoding: 'utf8', maxBuffer: 64 * 1024 * 1024, ...opts });
  if (r.error) return { ok: false, stdout: '', stderr: r.error.code === 'ENOENT' ? `${cmd} not found` : String(r.error.message) };
  return { ok: r.status === 0, stdout: r.stdout ?? '', stderr: r.stderr ?? '' };
}

/** The state of apt's package lists: when they change, newer versions may be available. */
export function aptListsState() {
  const dir = '/var/lib/apt/lists';
  try {
    const parts = readdirSync(dir).filter((f) => /_Packages(\.(lz4|gz|xz))?$/.test(f)).sort()
      .map((f) => { const s = statSync(join(dir, f)); return `${f}:${s.size}:${Math.floor(s.mtimeMs)}`; });
    return createHash('sha256').update(parts.join('\n')).digest('hex');
  } catch {
    return 'none';
  }
}

/** Fails with what to do when the Debian tools are missing. */
export function requireDebianTools(what) {
  for (const tool of ['apt-get', 'apt-cache', 'dpkg-deb']) {
    if (!run(tool, ['--version']).ok) throw new PackageError(`${tool} not found: ${what} is built from Debian packages`);
  }
}

export class DebianPackages {
  /** `cacheDir` keeps the downloaded .debs between builds; `workDir` is a scratch folder. */
  constructor({ cacheDir, workDir, log = () => {} }) {
    this.cacheDir = cacheDir;
    this.workDir = workDir;
    this.log = log;
    this.updated = false;
  }

  /** apt-get update once (root only), when apt does not know a package or a download 404s. */
  update(why) {
    if (this.updated) return false;
    if (process.getuid?.() !== 0) throw new PackageError(`${why}: apt's package lists look stale or incomplete. Run "apt-get update" as root, then run this again.`);
    this.log(`${why}: running apt-get update`);
    const r = run('apt-get', ['update', '-qq']);
    if (!r.ok) throw new PackageError(`apt-get update failed:\n${r.stderr.trim()}`);
    this.updated = true;
    return true;
  }

  /** name -> candidate version for each package apt knows (unknown ones are left out). */
  candidates(pkgs) {
    const out = new Map();
    if (pkgs.length === 0) return out;
    const r = run('apt-cache', ['policy', ...pkgs]);
    let current;
    for (const line of r.stdout.split('\n')) {
      const head = /^(\S+):$/.exec(line);
      if (head) { current = head[1]; continue; }
      const m = /^\s+Candidate:\s*(\S+)/.exec(line);
      if (m && current && m[1] !== '(none)') out.set(current, m[1]);
    }
    return out;
  }

  /**
   * The roots and every package they depend on (Depends, PreDepends; the first of alternatives)
   * whose name `follow` accepts, breadth first; virtual packages are skipped.
   */
  closure(roots, follow) {
    const seen = new Set(roots);
    let level = [...roots];
    for (let depth = 0; level.length > 0; depth++) {
      if (depth > 64) throw new PackageError(`the dependency walk of ${roots.join(', ')} did not end after 64 levels`);
      const r = run('apt-cache', ['depends', '--no-recommends', '--no-suggests', '--no-conflicts', '--no-breaks', '--no-replaces', '--no-enhances', ...level]);
      if (!r.ok) throw new PackageError(`apt-cache depends ${level.join(' ')} failed: ${r.stderr.trim()}`);
      const next = [];
      let inAlternatives = false;
      for (const line of r.stdout.split('\n')) {
        const m = /^\s+(\|)?(?:Pre)?Depends:\s+(\S+)/.exec(line);
        if (!m) continue;
        const takeIt = !inAlternatives;
        inAlternatives = m[1] === '|';
        const name = m[2].replace(/:any$/, '');
        if (!takeIt || name.startsWith('<') || seen.has(name) || !follow(name)) continue;
        seen.add(name);
        next.push(name);
      }
      level = next;
    }
    return [...seen];
  }

  /** Downloads `pkg` at `version` (or reuses the cached .deb) and returns its path. */
  download(pkg, version) {
    mkdirSync(this.cacheDir, { recursive: true });
    const cached = join(this.cacheDir, `${pkg}_${version.replace(/:/g, '%3a')}_amd64.deb`);
    if (existsSync(cached)) return cached;
    const dir = join(this.workDir, 'debs');
    mkdirSync(dir, { recursive: true });
    // apt drops privileges to _apt for downloads; a private temp dir is not its to write.
    chmodSync(this.workDir, 0o755);
    chmodSync(dir, 0o777);
    this.log(`downloading ${pkg} ${version}`);
    const fetchIt = () => run('apt-get', ['download', '-q', `${pkg}=${version}`], { cwd: dir });
    let r = fetchIt();
    if (!r.ok && /404|Failed to fetch|Unable to locate|Can't select|was not found/i.test(r.stderr + r.stdout) && this.update(`downloading ${pkg} failed`)) r = fetchIt();
    if (!r.ok) throw new PackageError(`apt-get download ${pkg}=${version} failed:\n${(r.stderr || r.stdout).trim()}`);
    const deb = readdirSync(dir).find((f) => f.startsWith(`${pkg}_`) && f.endsWith('.deb'));
    if (!deb) throw new PackageError(`apt-get download ${pkg} left no .deb in ${dir}`);
    // Keep this one for the next build; drop older versions of the same package.
    for (const f of readdirSync(this.cacheDir)) if (f.startsWith(`${pkg}_`)) rmSync(join(this.cacheDir, f), { force: true });
    copyFileSync(join(dir, deb), cached);
    rmSync(join(dir, deb), { force: true });
    return cached;
  }

  /**
   * Downloads every [pkg, version] not cached yet in one apt-get call (one connection instead of
   * one process per package), then returns each one's .deb path (download() for any left over).
   */
  downloadAll(list) {
    mkdirSync(this.cacheDir, { recursive: true });
    const cachedPath = (pkg, version) => join(this.cacheDir, `${pkg}_${version.replace(/:/g, '%3a')}_amd64.deb`);
    const wanted = list.filter(([p, v]) => !existsSync(cachedPath(p, v)));
    if (wanted.length > 1) {
      const dir = join(this.workDir, 'debs-batch');
      mkdirSync(dir, { recursive: true });
      chmodSync(this.workDir, 0o755);
      chmodSync(dir, 0o777);
      this.log(`downloading ${wanted.length} packages`);
      // A failure here is not final: download() retries each missing one and says which failed.
      run('apt-get', ['download', '-q', ...wanted.map(([p, v]) => `${p}=${v}`)], { cwd: dir });
      for (const f of readdirSync(dir)) {
        const [p, v] = wanted.find(([name, ver]) => f === `${name}_${ver.replace(/:/g, '%3a')}_amd64.deb` || f === `${name}_${ver.replace(/^\d+:/, '')}_amd64.deb`) ?? [];
        if (!p) continue;
        for (const old of readdirSync(this.cacheDir)) if (old.startsWith(`${p}_`)) rmSync(join(this.cacheDir, old), { force: true });
        copyFileSync(join(dir, f), cachedPath(p, v));
      }
      rmSync(dir, { recursive: true, force: true });
    }
    return list.map(([p, v]) => this.download(p, v));
  }

  /** Unpacks a .deb into `dest` (merging with what is there). */
  unpack(deb, dest) {
    mkdirSync(dest, { recursive: true });
    const r = run('dpkg-deb', ['-x', deb, dest]);
    if (!r.ok) throw new PackageError(`dpkg-deb -x ${deb} failed: ${r.stderr.trim()}`);
  }
}

// Files of an ext2/3/4 file system inside an image, read without root: e2fsprogs' debugfs opens
// the image read-only at the partition's byte offset (`IMAGE?offset=N`). debugfs is spawned with
// an argument vector, never a shell, and gets the image as an inherited fd (/proc/self/fd/3: /dev/fd
// is udev's or systemd's link, absent on a bare system such as the nested lane's L1), so no
// character of the user's path is parsed by it. Paths inside a debugfs command come from the
// image (grub.cfg, symlinks) and are hostile: debugfs splits its command on spaces and parses
// quotes, so only plain path characters are let through (safePath).
// debugfs reports most failures on stderr and still exits 0: every call reads stderr.
import { spawn } from 'node:child_process';
import { accessSync, constants } from 'node:fs';
import { open, stat as fsStat } from 'node:fs/promises';
import { delimiter, join } from 'node:path';
import { ImageError, quoteFromImage } from './image-error.ts';

export interface ExtEntry {
  name: string;
  type: 'file' | 'dir' | 'symlink' | 'other';
  size: number;
}

/** Characters a path from the image may have to reach a debugfs command. */
const SAFE_PATH = /^[A-Za-z0-9._+@~,:=\/-]+$/;
const MAX_LINKS = 8;

/** `path` from the image, if debugfs may be given it; otherwise one line naming it. */
export function safePath(path: string, what: string): string {
  if (path.length === 0 || path.length > 1024 || !SAFE_PATH.test(path) || !path.startsWith('/')) {
    throw new ImageError(`refused: the ${what} path ${quoteFromImage(path)} read from the image is not a plain absolute path (letters, digits and ._+-@~,:= only); fix the image's boot configuration`);
  }
  return path;
}

let debugfsPath: string | undefined;

/** The debugfs binary: PATH first, then the sbin folders an ordinary user's PATH often lacks. */
function debugfsBinary(): string {
  if (debugfsPath !== undefined) return debugfsPath;
  const dirs = [...(process.env.PATH ?? '').split(delimiter).filter(Boolean), '/usr/sbin', '/sbin'];
  for (const d of dirs) {
    try {
      accessSync(join(d, 'debugfs'), constants.X_OK);
      return (debugfsPath = join(d, 'debugfs'));
    } catch {}
  }
  throw new ImageError('debugfs not found: install e2fsprogs (apt-get install e2fsprogs, dnf install e2fsprogs); it reads the image\'s ext file systems');
}

export class ExtReader {
  readonly #image: string;
  readonly #offset: number;
  readonly #what: string;

  /** The ext file system at `offsetBytes` in the raw image `image`; `what` names it in messages ("partition 1"). */
  constructor(image: string, offsetBytes: number, what: string) {
    this.#image = image;
    this.#offset = offsetBytes;
    this.#what = what;
  }

  /** Runs one debugfs command; stdout, or undefined when debugfs says the path does not exist. */
  async run(command: string, cwd?: string): Promise<Buffer | undefined> {
    const bin = debugfsBinary();
    const handle = await open(this.#image, 'r');
    try {
      const { stdout, stderr, code } = await new Promise<{ stdout: Buffer; stderr: string; code: number | null }>((resolve, reject) => {
        const child = spawn(bin, ['-R', command, `/proc/self/fd/3?offset=${this.#offset}`], { cwd, stdio: ['ignore', 'pipe', 'pipe', handle.fd] });
        const out: Buffer[] = [];
        const err: Buffer[] = [];
        child.stdout!.on('data', (b: Buffer) => out.push(b));
        child.stderr!.on('data', (b: Buffer) => err.push(b));
        child.on('error', reject);
        child.on('close', (c) => resolve({ stdout: Buffer.concat(out), stderr: Buffer.concat(err).toString('utf8'), code: c }));
      });
      // The first stderr line is debugfs's banner ("debugfs 1.47.0 (5-Feb-2023)").
      const problems = stderr.split('\n').filter((l) => l.trim() !== '' && !/^debugfs \d/.test(l));
      if (problems.some((l) => /File not found by ext2_lookup|Ext2 inode is not a directory/.test(l))) return undefined;
      const opening = problems.find((l) => /while (trying to open|opening filesystem)|Could not open/.test(l));
      if (opening !== undefined || code !== 0) {
        const cause = (opening ?? problems[0] ?? `debugfs exited with ${code}`).replace(/^debugfs: /, '').replace(/ while trying to open.*$/, '');
        // An image made by a newer mke2fs may use features this host's e2fsprogs does not know.
        const fix = /unsupported feature/i.test(cause) ? 'install a newer e2fsprogs (debugfs -V shows this one)' : 'check the image with e2fsck -n';
        throw new ImageError(`${this.#what}: debugfs cannot read its ext file system (${quoteFromImage(cause.trim(), 120)}); ${fix}`);
      }
      if (problems.length > 0) throw new ImageError(`${this.#what}: debugfs failed on ${quoteFromImage(command)}: ${quoteFromImage(problems[0].trim(), 120)}`);
      return stdout;
    } finally {
      await handle.close();
    }
  }

  /** The entry at `path` itself (a symlink is not followed), or undefined. */
  async lstat(path: string): Promise<ExtEntry & { target?: string } | undefined> {
    const p = safePath(path, 'file');
    const out = await this.run(`stat ${p}`);
    if (out === undefined) return undefined;
    const text = out.toString('utf8');
    const type = /Type: (\w+)/.exec(text)?.[1];
    const size = Number(/\bSize: (\d+)/.exec(text)?.[1] ?? NaN);
    const name = p.slice(p.lastIndexOf('/') + 1);
    if (type === 'symlink') {
      // A short target lives in the inode ("Fast link dest"); a long one in a block, which cat prints.
      const fast = /Fast link dest: "(.*)"/.exec(text)?.[1];
      const target = fast ?? (await this.run(`cat ${p}`))?.toString('utf8') ?? '';
      return { name, type: 'symlink', size, target };
    }
    return { name, type: type === 'regular' ? 'file' : type === 'directory' ? 'dir' : 'other', size };
  }

  /** `path` with every symlink of its last component followed (relative and absolute, within this file system). */
  async resolve(path: string): Promise<string | undefined> {
    let p = normalize(safePath(path, 'file'));
    for (let i = 0; i <= MAX_LINKS; i++) {
      const st = await this.lstat(p);
      if (st === undefined) return undefined;
      if (st.type !== 'symlink') return p;
      const target = st.target!;
      p = normalize(target.startsWith('/') ? target : `${p.slice(0, p.lastIndexOf('/'))}/${target}`);
      safePath(p, 'symlink target');
    }
    throw new ImageError(`${this.#what}: ${quoteFromImage(path)} is a chain of more than ${MAX_LINKS} symlinks; fix the image`);
  }

  /** The entries of directory `dir` (without . and ..), or undefined when it does not exist. */
  async list(dir: string): Promise<ExtEntry[] | undefined> {
    const out = await this.run(`ls -p ${safePath(dir, 'directory')}`);
    if (out === undefined) return undefined;
    const entries: ExtEntry[] = [];
    // One line per entry: /inode/mode/uid/gid/name/size/ (a name never holds '/' or a newline).
    for (const line of out.toString('utf8').split('\n')) {
      const m = /^\/(\d+)\/(\d+)\/\d+\/\d+\/([^/]*)\/(\d*)\/$/.exec(line);
      if (!m || m[3] === '.' || m[3] === '..' || m[3] === '') continue;
      const fmt = parseInt(m[2], 8) & 0o170000;
      entries.push({ name: m[3], type: fmt === 0o100000 ? 'file' : fmt === 0o040000 ? 'dir' : fmt === 0o120000 ? 'symlink' : 'other', size: Number(m[4] || 0) });
    }
    return entries;
  }

  /** A small text file (symlinks followed), or undefined when it does not exist or is not a file. */
  async readText(path: string, maxBytes = 1024 * 1024): Promise<string | undefined> {
    const real = await this.resolve(path);
    if (real === undefined) return undefined;
    const st = await this.lstat(real);
    if (st?.type !== 'file') return undefined;
    if (st.size > maxBytes) throw new ImageError(`${this.#what}: ${quoteFromImage(real)} is ${st.size} bytes, more than the ${maxBytes} read for a configuration file`);
    return (await this.run(`cat ${real}`))?.toString('utf8');
  }

  /** Copies regular file `path` (no symlink) to `name` inside `dir`; checks the copy has the file's size. */
  async dump(path: string, dir: string, name: string): Promise<void> {
    const st = await this.lstat(path);
    if (st?.type !== 'file') throw new ImageError(`${this.#what}: ${quoteFromImage(path)} is not a regular file in the image`);
    // The destination is relative to cwd: a name we chose, so no host path is parsed by debugfs.
    if (!/^[A-Za-z0-9._+-]+$/.test(name)) throw new Error(`dump: unsafe destination name ${name}`);
    await this.run(`dump ${safePath(path, 'file')} ${name}`, dir);
    const copied = await fsStat(join(dir, name)).catch(() => undefined);
    if (copied?.size !== st.size) {
      throw new ImageError(`${this.#what}: copying ${quoteFromImage(path)} out of the image gave ${copied?.size ?? 'no'} bytes of ${st.size}; check the image with e2fsck -n`);
    }
  }
}

/** Collapses ., .. and repeated slashes of an absolute path (.. stops at the file system's root). */
export function normalize(path: string): string {
  const parts: string[] = [];
  for (const part of path.split('/')) {
    if (part === '' || part === '.') continue;
    if (part === '..') parts.pop();
    else parts.push(part);
  }
  return `/${parts.join('/')}`;
}

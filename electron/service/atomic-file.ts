// Replaces a file so that a reader — or the next start after a crash or SIGKILL — sees either the
// old content or the new, never a mix: write a temp file in the same directory, fsync it, rename
// it over the target, fsync the directory so the rename itself is durable.
import { closeSync, fsyncSync, openSync, readdirSync, renameSync, unlinkSync, writeSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';

const TEMP_MARK = '.tmp-';

/** node:crypto on first use: `unhalt run` loads this module but seldom writes a file atomically, and loading it costs tens of ms. */
function tempSuffix(): string {
  return process.getBuiltinModule('node:crypto').randomBytes(4).toString('hex');
}

export function writeFileAtomic(path: string, data: string | Uint8Array, mode = 0o600): void {
  const dir = dirname(path);
  const tmp = join(dir, `.${basename(path)}${TEMP_MARK}${process.pid}-${tempSuffix()}`);
  const bytes = typeof data === 'string' ? Buffer.from(data, 'utf8') : data;
  const fd = openSync(tmp, 'wx', mode);
  try {
    for (let off = 0; off < bytes.length;) off += writeSync(fd, bytes, off, bytes.length - off);
    fsyncSync(fd);
  } catch (e) {
    closeSync(fd);
    try { unlinkSync(tmp); } catch { /* already gone */ }
    throw e;
  }
  closeSync(fd);
  try {
    renameSync(tmp, path);
  } catch (e) {
    try { unlinkSync(tmp); } catch { /* already gone */ }
    throw e;
  }
  fsyncDir(dir);
}

export function fsyncDir(dir: string): void {
  const fd = openSync(dir, 'r');
  try { fsyncSync(fd); } finally { closeSync(fd); }
}

/**
 * Removes temp files a killed writer left beside `path`. Call it only while holding the lock
 * that writers take: then no temp file can belong to a live write.
 */
export function removeStaleTemps(path: string): number {
  const prefix = `.${basename(path)}${TEMP_MARK}`;
  let removed = 0;
  for (const name of readdirSync(dirname(path))) {
    if (!name.startsWith(prefix)) continue;
    try { unlinkSync(join(dirname(path), name)); removed++; } catch { /* raced with another cleaner */ }
  }
  return removed;
}

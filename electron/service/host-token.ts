// Host mode's access token, kept in UNHALT_HOME/run/host-token (0600, in the 0700 home) so that a
// restarted `unhalt serve` accepts the tabs the last one opened: a tab left open finds the server
// again on its own (its URL carries the token). Whoever can read this file can read the library
// and its VMs' consoles anyway. Delete the file to make every old URL invalid: the next start
// makes a new token.
import { randomBytes } from 'node:crypto';
import { lstatSync } from 'node:fs';
import { readHomeFile } from './home-file.ts';
import { join } from 'node:path';
import { writeFileAtomic } from './atomic-file.ts';
import { makeDirs } from './make-dir.ts';

/** 32 random bytes, base64url: what the server's own random tokens look like. */
const TOKEN = /^[A-Za-z0-9_-]{43}$/;

export function hostTokenPath(home: string): string {
  return join(home, 'run', 'host-token');
}

/** The token of the last host-mode server on this home, or a new one (written for the next start). */
export function persistentHostToken(home: string): string {
  const path = hostTokenPath(home);
  try {
    // Kept only while it is ours alone: a token file others could read (0644, a symlink, another
    // owner's) may have been read, so it is replaced and every old URL stops working.
    const st = lstatSync(path);
    const private_ = st.isFile() && (st.mode & 0o077) === 0 && (process.getuid === undefined || st.uid === process.getuid());
    // Read non-blocking and bounded (home-file.ts): a token is 44 bytes.
    const kept = private_ ? (readHomeFile(path, 'the host token file', 256) ?? '').trim() : '';
    if (TOKEN.test(kept)) return kept;
  } catch { /* none yet, or unreadable: a new one replaces it */ }
  const token = randomBytes(32).toString('base64url');
  makeDirs(join(home, 'run'), 0o700);
  writeFileAtomic(path, `${token}\n`, 0o600);
  return token;
}

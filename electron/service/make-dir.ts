// `mkdir -p` that always ends. Node's own recursive mkdir loops forever at 100% CPU on a path
// under /proc (mkdir there fails with ENOENT although the parent exists, and Node then retries
// the parent, again and again); UNHALT_HOME=/proc/x did exactly that. Walking up and down
// ourselves, an ENOENT whose parent exists is an answer, not a reason to retry.
import { mkdirSync, statSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { describeIoError, errnoCode } from './io-errors.ts';

export class MakeDirError extends Error {
  override name = 'MakeDirError';
}

export function makeDirs(path: string, mode = 0o777): void {
  const target = resolve(path);
  const missing: string[] = [];
  for (let p = target; ; p = dirname(p)) {
    const kind = kindOf(p);
    if (kind === 'dir') break;
    if (kind === 'other') throw new MakeDirError(`cannot create the folder ${target}: ${p} exists and is not a folder`);
    missing.push(p);
    if (dirname(p) === p) break;
  }
  for (const p of missing.reverse()) {
    try {
      mkdirSync(p, { mode });
    } catch (e) {
      if (errnoCode(e) === 'EEXIST' && kindOf(p) === 'dir') continue; // made by someone else meanwhile
      throw new MakeDirError(`cannot create the folder ${target}: ${describeIoError(e)}`);
    }
  }
}

function kindOf(p: string): 'dir' | 'other' | 'absent' {
  try {
    return statSync(p).isDirectory() ? 'dir' : 'other';
  } catch (e) {
    if (errnoCode(e) === 'ENOENT') return 'absent';
    throw new MakeDirError(`cannot use the folder ${p}: ${describeIoError(e)}`);
  }
}

// Whether the bundle that scripts/build-node.mjs builds (dist-node/) may be run instead of the
// TypeScript sources. It may only while it is current: it records every file it was built from
// with its mtime and size, and one that differs (an edit, a checkout, a deletion) sends the start
// back to the sources, so an edited tree never runs stale code. The check is a hundred-odd stat
// calls, well under a millisecond; it runs at every start, so it stays this small.
import { readFileSync, statSync } from 'node:fs';

export const BUNDLE_DIR = 'dist-node';
/** The record of the inputs, in the bundle's folder. */
export const INPUTS_FILE = 'inputs.json';
/** Bumped when the bundle's layout changes, so that an older bundle is not taken for current. */
export const BUNDLE_FORMAT = 1;

/** What the record holds for one input file. */
export function stampOf(path) {
  const s = statSync(path);
  return [s.mtimeMs, s.size];
}

/**
 * The bundle's folder URL if the bundle in `dir` (a URL ending in '/') was built from exactly the
 * files on disk now, else null (absent, stale, or from another format). Paths in the record are
 * relative to `root`, the checkout's URL.
 */
export function currentBundle(root, dir = new URL(`${BUNDLE_DIR}/`, root)) {
  let record;
  try {
    record = JSON.parse(readFileSync(new URL(INPUTS_FILE, dir), 'utf8'));
  } catch {
    return null;
  }
  if (record?.format !== BUNDLE_FORMAT || !Array.isArray(record.files)) return null;
  for (const [path, mtimeMs, size] of record.files) {
    let now;
    try {
      now = stampOf(new URL(path, root));
    } catch {
      return null;
    }
    if (now[0] !== mtimeMs || now[1] !== size) return null;
  }
  return dir;
}

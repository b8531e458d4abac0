// bin/bundle.mjs: the bundle runs only while every file it was built from is unchanged on disk;
// an edit (mtime or size), a deletion, a record of another format or no record at all sends
// bin/unhalt.mjs back to the sources. On a scratch "checkout" of two files, not the real one.
import { mkdtempSync, mkdirSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { BUNDLE_DIR, BUNDLE_FORMAT, INPUTS_FILE, currentBundle, stampOf } from '../../bin/bundle.mjs';

let root: string;
const rootUrl = () => pathToFileURL(`${root}/`);
const FILES = ['electron/a.ts', 'electron/b.ts'];

function record(format = BUNDLE_FORMAT): void {
  const files = FILES.map((f) => [f, ...stampOf(join(root, f))]);
  writeFileSync(join(root, BUNDLE_DIR, INPUTS_FILE), JSON.stringify({ format, files }));
}

beforeEach(() => {
  root = mkdtempSync(join(tmpdir(), 'unhalt-bundle-'));
  mkdirSync(join(root, 'electron'));
  mkdirSync(join(root, BUNDLE_DIR));
  for (const f of FILES) writeFileSync(join(root, f), `export const name = ${JSON.stringify(f)};\n`);
});
afterEach(() => rmSync(root, { recursive: true, force: true }));

describe('currentBundle', () => {
  it('is the bundle folder while every input is as recorded', () => {
    record();
    expect(currentBundle(rootUrl())?.href).toBe(new URL(`${BUNDLE_DIR}/`, rootUrl()).href);
  });

  it('is null without a record, or with a record of another format', () => {
    expect(currentBundle(rootUrl())).toBeNull();
    record(BUNDLE_FORMAT + 1);
    expect(currentBundle(rootUrl())).toBeNull();
    writeFileSync(join(root, BUNDLE_DIR, INPUTS_FILE), '{ not json');
    expect(currentBundle(rootUrl())).toBeNull();
  });

  it('is null once an input is touched, even to the same content', () => {
    record();
    const later = new Date(Date.now() + 5_000);
    utimesSync(join(root, FILES[1]!), later, later);
    expect(currentBundle(rootUrl())).toBeNull();
  });

  it('is null once an input changes size with its mtime kept', () => {
    record();
    const [mtimeMs] = stampOf(join(root, FILES[0]!));
    writeFileSync(join(root, FILES[0]!), 'export const name = "longer than before";\n');
    utimesSync(join(root, FILES[0]!), new Date(mtimeMs), new Date(mtimeMs));
    expect(currentBundle(rootUrl())).toBeNull();
  });

  it('is null once an input is deleted', () => {
    record();
    rmSync(join(root, FILES[0]!));
    expect(currentBundle(rootUrl())).toBeNull();
  });
});

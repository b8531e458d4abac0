// Test support: a fresh UNHALT_HOME in the temp folder, removed after the test file.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const made: string[] = [];

export function tempHome(tag = 'home'): string {
  const dir = mkdtempSync(join(tmpdir(), `unhalt-${tag}-`));
  made.push(dir);
  return dir;
}

export function removeTempHomes(): void {
  for (const d of made.splice(0)) rmSync(d, { recursive: true, force: true });
}

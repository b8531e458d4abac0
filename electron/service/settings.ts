// The service's user settings, UNHALT_HOME/settings.json: for now only the folders, beyond the
// built-in ones, that boot files may come from (allowed-folders.ts). Unknown fields are kept, so
// a newer Unhalt's settings survive an older one; an unreadable file counts as no settings.
import { readFileSync } from 'node:fs';
import { writeFileAtomic } from './atomic-file.ts';
import { homeLayout } from './paths.ts';

export interface Settings {
  allowedFolders: string[];
}

/** Bounds what one settings file may make the service check on every path. */
export const MAX_ALLOWED_FOLDERS = 64;

export function readSettings(home: string): Settings & Record<string, unknown> {
  let raw: unknown;
  try {
    raw = JSON.parse(readFileSync(homeLayout(home).settings, 'utf8'));
  } catch {
    raw = {};
  }
  const obj = typeof raw === 'object' && raw !== null && !Array.isArray(raw) ? raw as Record<string, unknown> : {};
  const folders = Array.isArray(obj.allowedFolders) ? obj.allowedFolders.filter((f): f is string => typeof f === 'string') : [];
  return { ...obj, allowedFolders: folders.slice(0, MAX_ALLOWED_FOLDERS) };
}

export function writeSettings(home: string, settings: Settings & Record<string, unknown>): void {
  writeFileAtomic(homeLayout(home).settings, `${JSON.stringify(settings, null, 2)}\n`);
}

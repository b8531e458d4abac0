// The service's user settings, UNHALT_HOME/settings.json: for now only the folders, beyond the
// built-in ones, that boot files may come from (allowed-folders.ts). Unknown fields are kept, so
// a newer Unhalt's settings survive an older one. A file that is there but is no JSON object (a
// hand edit with a syntax error) counts as no settings for reading, and is never written over:
// a change is refused, naming the file and the fault, so the user's folders are not lost.
import { writeFileAtomic } from './atomic-file.ts';
import { homeLayout } from './paths.ts';
import { HomeFileError, readHomeFile } from './home-file.ts';

export interface Settings {
  allowedFolders: string[];
  /** Each added folder's identity when it was added ("dev:ino"): a folder swapped since counts for nothing. */
  allowedFolderIds?: Record<string, string>;
}

/** Bounds what one settings file may make the service check on every path. */
export const MAX_ALLOWED_FOLDERS = 64;
/** Far more than 64 folders and a theme take. */
const MAX_SETTINGS_BYTES = 1024 * 1024;

/** A settings file that cannot be changed without losing what it holds; the message says why and what to do. */
export class SettingsFileError extends Error {}

/** The settings; `damaged` says why the file there was read as none (it must not be written over). */
export function readSettings(home: string): Settings & Record<string, unknown> & { damaged?: string } {
  const path = homeLayout(home).settings;
  let text: string | undefined;
  try {
    text = readHomeFile(path, 'the settings file', MAX_SETTINGS_BYTES);
  } catch (e) {
    // A FIFO, a directory, a huge file: read as none, and never written over (the message says why).
    if (e instanceof HomeFileError) return { allowedFolders: [], damaged: `${e.message}; nothing was changed` };
    return { allowedFolders: [] }; // unreadable: then writing it fails on its own
  }
  if (text === undefined) return { allowedFolders: [] }; // none yet
  let raw: unknown;
  let damaged: string | undefined;
  try {
    raw = JSON.parse(text);
    if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) damaged = 'it is not a JSON object';
  } catch (e) {
    damaged = `it is not valid JSON (${(e as Error).message})`;
  }
  if (damaged) return { allowedFolders: [], damaged: `${path}: ${damaged}; fix it or move it away, then try again (nothing was changed)` };
  const obj = raw as Record<string, unknown>;
  const folders = Array.isArray(obj.allowedFolders) ? obj.allowedFolders.filter((f): f is string => typeof f === 'string') : [];
  const ids = typeof obj.allowedFolderIds === 'object' && obj.allowedFolderIds !== null && !Array.isArray(obj.allowedFolderIds)
    ? Object.fromEntries(Object.entries(obj.allowedFolderIds as Record<string, unknown>).filter((e): e is [string, string] => typeof e[1] === 'string'))
    : undefined;
  return { ...obj, allowedFolders: folders.slice(0, MAX_ALLOWED_FOLDERS), ...(ids ? { allowedFolderIds: ids } : {}) };
}

export function writeSettings(home: string, settings: Settings & Record<string, unknown> & { damaged?: string }): void {
  if (settings.damaged) throw new SettingsFileError(settings.damaged);
  const { damaged: _, ...clean } = settings;
  writeFileAtomic(homeLayout(home).settings, `${JSON.stringify(clean, null, 2)}\n`);
}

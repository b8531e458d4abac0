// What the VM library has to tell the user after it repaired itself (a damaged file moved aside,
// records kept out of it, a migration), kept on disk next to the library: a notice that lived
// only in memory vanished with the process, and the next start showed a smaller library with
// nothing saying why. `unhalt doctor`, the API's host info and the UI read it from here until
// the user dismisses it.
import { unlinkSync } from 'node:fs';
import { writeFileAtomic } from './atomic-file.ts';
import { homeLayout } from './paths.ts';
import { readHomeFile } from './home-file.ts';

export interface LibraryNotice {
  severity: 'error' | 'info';
  message: string;
  /** Where the unreadable file or the refused records were put (errors only). */
  movedTo?: string;
  at: number;
}

/** Older notices beyond this are forgotten (the newest say the most). */
const MAX_NOTICES = 20;

export function libraryNoticesPath(home: string): string {
  return homeLayout(home).libraryNotices;
}

/** The stored notices, oldest first; none if the file is missing or unreadable. */
export function readLibraryNotices(home: string): LibraryNotice[] {
  let raw: unknown;
  try {
    // Never blocked on or read whole when it is no small regular file (home-file.ts).
    raw = JSON.parse(readHomeFile(libraryNoticesPath(home), 'the library notices file', 1024 * 1024) ?? '[]');
  } catch {
    return [];
  }
  if (!Array.isArray(raw)) return [];
  return raw.filter(isNotice).slice(-MAX_NOTICES);
}

export function appendLibraryNotice(home: string, n: LibraryNotice): void {
  const all = [...readLibraryNotices(home), n].slice(-MAX_NOTICES);
  writeFileAtomic(libraryNoticesPath(home), `${JSON.stringify(all, null, 2)}\n`);
}

export function clearLibraryNotices(home: string): void {
  try { unlinkSync(libraryNoticesPath(home)); } catch { /* none stored */ }
}

function isNotice(v: unknown): v is LibraryNotice {
  const n = v as Partial<LibraryNotice> | null;
  return typeof n === 'object' && n !== null && (n.severity === 'error' || n.severity === 'info')
    && typeof n.message === 'string' && typeof n.at === 'number' && (n.movedTo === undefined || typeof n.movedTo === 'string');
}

/** The notices as doctor checks (the service's host info and `unhalt doctor` alike). */
export function noticeChecks(notices: readonly LibraryNotice[]): { name: string; ok: boolean; detail: string; fix?: string }[] {
  return notices.map((n) => ({
    name: 'library', ok: n.severity !== 'error', detail: n.message,
    ...(n.movedTo ? { fix: `what was set aside is in ${n.movedTo}: repair and re-create those VMs, or delete that file; then dismiss the notice in the library view` } : {}),
  }));
}

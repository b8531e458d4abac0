// The one rule for which files the service hands to a guest as kernel, initrd or disk image: only
// files inside folders the user allowed. Anyone holding the host-mode token (or a compromised
// renderer) could otherwise boot /etc/shadow as an initrd and read it from inside the guest.
// Allowed: UNHALT_HOME (the library's own folder), Unhalt's built guest kits, the user's home
// folder, and folders added in the settings. Paths are compared after realpath, so a symlink
// inside an allowed folder that points outside it does not get out.
import { spawnSync } from 'node:child_process';
import { lstatSync, readFileSync, realpathSync, statSync } from 'node:fs';
import { homedir } from 'node:os';
import { basename, dirname, isAbsolute, join, relative, resolve, sep } from 'node:path';
import type { AllowedFolder } from './api.ts';
import { GUEST_DIR } from '../vmm/guests.ts';
import { ApiError } from './errors.ts';
import { clip } from './validate.ts';

/** The folders a guest may be given files from: those below, less the added ones refused now. */
export function allowedFolders(home: string, fromSettings: readonly string[], ids: Readonly<Record<string, string>> = {}): AllowedFolder[] {
  return folderStates(home, fromSettings, ids).filter((f) => !f.refused);
}

/**
 * Every folder with its state, for the list the user sees: the library's folder, the guest kits,
 * the home folder, and the added ones. An added folder is pinned to what it was when added: its
 * real path and its identity (device and inode). One replaced since — by a symbolic link to /etc,
 * another directory, a mount — counts for nothing until the user adds it again.
 */
export function folderStates(home: string, fromSettings: readonly string[], ids: Readonly<Record<string, string>> = {}): AllowedFolder[] {
  // Run as root, another user's home is theirs to allow, also when it was added before.
  const others = process.getuid?.() === 0 && fromSettings.length ? otherUsersHomes() : undefined;
  const out: AllowedFolder[] = [
    { path: home, source: 'library' },
    { path: GUEST_DIR.replace(/\/$/, ''), source: 'guests' },
    { path: homedir(), source: 'home' },
  ];
  for (const path of fromSettings) {
    const f: AllowedFolder = { path, source: 'settings' };
    const note = breadthNote(path);
    if (note) f.note = note;
    const real = resolved(path);
    const id = folderId(path);
    const pinned = ids[path]?.split(':');
    const other = others?.find((h) => real !== undefined && (real === h.home || isInside(real, h.home) || isInside(h.home, real)));
    if (real === undefined) f.refused = 'it is gone';
    else if (real === sep) f.refused = 'it is the root folder "/", which would let a guest read every file';
    else if (real !== path) f.refused = `it now leads to ${clip(real, 200)} (it was replaced by a symbolic link)`;
    else if (pinned && id && id.split(':')[1] !== pinned[1]) f.refused = 'it is another folder than the one added (replaced or mounted over since)';
    else if (other) f.refused = `it is or holds ${other.home}, the home folder of user ${other.user}, and Unhalt runs as root`;
    // The same inode on another device number: the file system was mounted again (NFS, a USB disk
    // back as another sdX, a btrfs subvolume), not swapped; said, not refused.
    else if (pinned && id && id.split(':')[0] !== pinned[0]) f.note = `${f.note ? `${f.note}; ` : ''}its file system was mounted again since it was added (another device number, the same folder)`;
    if (f.refused) f.refused = `${f.refused}: remove it and add it again if you trust it`;
    out.push(f);
  }
  // A home folder of "/" (system users) would allow everything: it never counts.
  return out.filter((f) => {
    if (f.source === 'settings') return true;
    const real = resolved(f.path);
    return real !== undefined && real !== sep;
  });
}

/** A folder's identity, "dev:ino" (undefined when it cannot be read). */
export function folderId(path: string): string | undefined {
  try {
    const st = statSync(path);
    return `${st.dev}:${st.ino}`;
  } catch {
    return undefined;
  }
}

/** What allowing a broad folder exposes, in a few words (undefined for a folder of one's own). */
function breadthNote(real: string): string | undefined {
  if (real === '/home') return 'it holds every user\'s home folder: a guest may be given any file in them that Unhalt can read';
  if (real === '/mnt' || real === '/media') return 'it holds the mounted disks: a guest may be given any file on them that Unhalt can read';
  if (real === '/root') return 'root\'s home folder: its keys and secrets may be given to a guest';
  if (real === '/opt' || real === '/srv') return `it holds everything installed or served from ${real}`;
  try {
    // World-writable (a shared drop folder): anyone may put a file there.
    if ((statSync(real).mode & 0o002) !== 0) return 'any local user can put files there: a guest may be given what another user left';
  } catch { /* judged when it is used */ }
  return undefined;
}

/**
 * Refuses a file outside every allowed folder, naming them. Judged before the file is looked at:
 * a path that does not exist is judged by its nearest existing folder, so outside the folders
 * "/etc/shadow" and "/etc/nope" get the same answer (nothing outside can be probed).
 */
export function confineToAllowedFolders(path: string, what: string, folders: readonly AllowedFolder[]): void {
  const real = resolvedOrPlanned(path);
  if (real !== undefined && folders.some((f) => isInside(real, resolved(f.path)))) return;
  throw new ApiError('invalid', `${what} ${clip(path, 200)} is outside the folders Unhalt may give to a guest (${folders.map((f) => f.path).join(', ')}); `
    + 'move it into one of them or allow its folder (library view: Folders for boot files)');
}

/** The same rule for a file about to be created: its folder's real path, then its name, inside an allowed folder. */
export function confineNewFileToAllowedFolders(path: string, what: string, folders: readonly AllowedFolder[]): void {
  const dir = resolved(dirname(path));
  const real = dir === undefined ? undefined : join(dir, basename(path));
  if (real !== undefined && folders.some((f) => isInside(real, resolved(f.path)))) return;
  throw new ApiError('invalid', `${what} ${clip(path, 200)} is outside the folders Unhalt may give to a guest (${folders.map((f) => f.path).join(', ')}); `
    + 'move it into one of them or allow its folder (library view: Folders for boot files)');
}

/** True if the folder at `path` is an allowed folder or inside one (judged as confineToAllowedFolders does): it may be listed. */
export function folderIsAllowed(path: string, folders: readonly AllowedFolder[]): boolean {
  const real = resolvedOrPlanned(path);
  return real !== undefined && folders.some((f) => { const top = resolved(f.path); return real === top || isInside(real, top); });
}

/**
 * System folders no API call may allow, nor any folder inside or above them: adding folders is
 * itself an API call, so whoever holds the host-mode token could otherwise allow /etc and read
 * /etc/shadow after all. (A user who really wants one can still edit settings.json by hand.)
 */
const SYSTEM_FOLDERS = ['/etc', '/proc', '/sys', '/dev', '/boot', '/run', '/var', '/usr', '/bin', '/sbin', '/lib', '/lib64'];

/** A folder a user may add: absolute, an existing directory, stored by its real path. */
export function checkFolderToAdd(path: string): string {
  if (!isAbsolute(path)) throw new ApiError('invalid', `a folder must be an absolute path, got "${clip(path, 200)}"`);
  let real: string;
  try {
    real = realpathSync.native(path);
    if (!statSync(real).isDirectory()) throw new Error('not a directory');
  } catch {
    throw new ApiError('invalid', `${clip(path, 200)} is not an existing folder`);
  }
  if (real === sep) throw new ApiError('invalid', 'the root folder "/" cannot be allowed: it would let a guest read every file');
  const system = SYSTEM_FOLDERS.find((f) => real === f || isInside(real, f) || isInside(f, real));
  if (system) throw new ApiError('invalid', `${clip(path, 200)} cannot be allowed: it is or holds the system folder ${system}; copy the files you need into a folder of your own`);
  // Run as root, Unhalt could read every user's files: another user's home is theirs to allow.
  if (process.getuid?.() === 0) {
    const other = otherUsersHomes().find((h) => real === h.home || isInside(real, h.home) || isInside(h.home, real));
    if (other) throw new ApiError('invalid', `${clip(path, 200)} cannot be allowed while Unhalt runs as root: it is or holds ${other.home}, the home folder of user ${other.user}; allow a folder of root's own`);
  }
  return real;
}

/**
 * The home folders of the host's other users (real paths), never root's or "/": the user database
 * as `getent passwd` gives it (LDAP and sssd users too), else /etc/passwd.
 */
function otherUsersHomes(passwd = process.env.UNHALT_PASSWD_FILE): { user: string; home: string }[] {
  let text = '';
  if (passwd === undefined) {
    const r = spawnSync('getent', ['passwd'], { encoding: 'utf8', timeout: 5000, maxBuffer: 16 << 20 });
    if (r.status === 0) text = r.stdout;
  }
  if (!text) try { text = readFileSync(passwd ?? '/etc/passwd', 'utf8'); } catch { return []; }
  const out: { user: string; home: string }[] = [];
  for (const line of text.split('\n')) {
    const [user, , uid, , , home] = line.split(':');
    if (!user || !home || uid === '0' || !isAbsolute(home)) continue;
    const real = resolved(home);
    if (real === undefined || real === sep || SYSTEM_FOLDERS.some((f) => real === f || isInside(real, f))) continue;
    out.push({ user, home: real });
  }
  return out;
}

/**
 * The real path of `path`, or for one that does not exist yet, its nearest existing ancestor's
 * real path with the missing names after it. A name that exists but does not resolve (a dangling
 * symbolic link) gives undefined: where it points cannot be proven inside.
 */
function resolvedOrPlanned(path: string): string | undefined {
  const missing: string[] = [];
  // Never normalised as text: "lnk/.." is where the link leads, then up, as the kernel walks it
  // (path.resolve would drop both and judge a folder the file is not in). Only after a name that
  // does not exist are the rest joined as text: nothing below a missing folder can be opened.
  let p = isAbsolute(path) ? path : `${process.cwd()}${sep}${path}`;
  for (;;) {
    const real = resolved(p);
    if (real !== undefined) return missing.length ? join(real, ...missing.reverse()) : real;
    try {
      lstatSync(p);
      return undefined; // there, but unresolvable
    } catch { /* not there: judge its folder */ }
    const up = dirname(p);
    if (up === p) return undefined;
    missing.push(basename(p));
    p = up;
  }
}

function resolved(path: string): string | undefined {
  try {
    return realpathSync.native(path);
  } catch {
    return undefined;
  }
}

function isInside(file: string, folder: string | undefined): boolean {
  if (folder === undefined) return false;
  const rel = relative(folder, file);
  return rel !== '' && !rel.startsWith(`..${sep}`) && rel !== '..' && !isAbsolute(rel);
}

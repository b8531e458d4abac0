// The VM library on disk: one file, UNHALT_HOME/vms.json. One file rather than one per VM
// because every change is then a single atomic rename (a clone, a rename and a delete can never
// half-apply), one lock and one schema version cover everything, and the SIGKILL guarantee is
// about one file. The library is small (kilobytes), so rewriting it whole costs nothing.
//
// Changes go through mutate(): an in-process queue, then the cross-process lock, then a re-read of
// the file (another process — the Electron app next to host mode — may have changed it), the
// change, and an atomic write. Reads need no lock: a rename is atomic, so they see old or new.
// A file that cannot be read as a library is moved aside (never overwritten) and reported; records
// it holds that this version refuses are kept aside in a quarantine file and the rest load. Both
// leave a notice on disk (library-notices.ts) that outlives the process. The VM-count limit is
// checked here, where every change passes, so no caller can save a library that would not load.
import { copyFileSync, existsSync, renameSync, statSync } from 'node:fs';
import { dirname } from 'node:path';
import { readHomeFile } from './home-file.ts';
import { FileLock, type LockOptions } from './file-lock.ts';
import { fsyncDir, removeStaleTemps, writeFileAtomic } from './atomic-file.ts';
import { appendLibraryNotice, clearLibraryNotices, readLibraryNotices, type LibraryNotice } from './library-notices.ts';
import {
  LIBRARY_FULL_MESSAGE, LIBRARY_SCHEMA, LibraryFileError, MAX_LIBRARY_BYTES, MAX_VMS, parseLibrary, serializeLibrary,
  type LibraryRecord, type QuarantinedRecord,
} from './library-schema.ts';
import { homeLayout } from './paths.ts';
import { makeDirs } from './make-dir.ts';

export type { LibraryNotice };

/** A change would take the library past MAX_VMS; nothing was written. */
export class LibraryFullError extends Error {
  override name = 'LibraryFullError';
  constructor() { super(LIBRARY_FULL_MESSAGE); }
}

export interface LibraryStoreOptions {
  lock?: LockOptions;
  /** Called when a notice is recorded (the service turns them into doctor entries). */
  onNotice?: (n: LibraryNotice) => void;
}

export class LibraryStore {
  readonly home: string;
  readonly path: string;
  readonly lockPath: string;
  private records: LibraryRecord[] = [];
  private stamp = '';
  private queue: Promise<unknown> = Promise.resolve();
  private readonly options: LibraryStoreOptions;

  private constructor(home: string, options: LibraryStoreOptions) {
    const layout = homeLayout(home);
    this.home = home;
    this.path = layout.library;
    this.lockPath = layout.lock;
    this.options = options;
  }

  /** Opens (creating UNHALT_HOME if needed) and loads the library. */
  static async open(home: string, options: LibraryStoreOptions = {}): Promise<LibraryStore> {
    makeDirs(home, 0o700);
    const store = new LibraryStore(home, options);
    if (!store.tryLoadUnlocked()) await store.withLock(() => store.loadLocked());
    return store;
  }

  /** The VMs, re-read first if another process changed the file. */
  list(): LibraryRecord[] {
    this.refresh();
    return this.records.map(clone);
  }

  /** What the library had to repair, oldest first, as stored on disk (any process's). */
  get notices(): LibraryNotice[] {
    return readLibraryNotices(this.home);
  }

  /** The user has read the notices (the files they name stay where they are). */
  dismissNotices(): void {
    clearLibraryNotices(this.home);
  }

  get(id: string): LibraryRecord | undefined {
    this.refresh();
    const r = this.records.find((v) => v.id === id);
    return r && clone(r);
  }

  /**
   * Applies a change to the freshest library and writes it atomically, holding the lock.
   * `change` gets a copy of the records to edit in place; if it throws, nothing is written.
   */
  mutate<T>(change: (vms: LibraryRecord[]) => T): Promise<T> {
    const run = () => this.withLock(() => {
      // Our own last write, untouched since (every write renames a new inode into place): no
      // need to read and validate the whole library again — at 1,000 VMs that was most of a save.
      if (this.changedOnDisk()) this.loadLocked();
      else this.removeDebrisLocked();
      const draft = this.records.map(clone);
      const result = change(draft);
      // Only growth is refused: a library loaded at the limit can still be edited and shrunk.
      if (draft.length > MAX_VMS && draft.length > this.records.length) throw new LibraryFullError();
      this.write(draft);
      return result;
    });
    const next = this.queue.then(run, run);
    this.queue = next.catch(() => undefined);
    return next;
  }

  /**
   * Re-reads the file if another process changed it; true if the VMs differ from before (the
   * service then tells its clients).
   */
  refreshIfChanged(): boolean {
    if (!this.changedOnDisk()) return false;
    const before = JSON.stringify(this.records);
    this.refresh();
    return JSON.stringify(this.records) !== before;
  }

  /** True if the file changed on disk since we last read or wrote it. */
  private changedOnDisk(): boolean {
    return this.fileStamp() !== this.stamp;
  }

  private fileStamp(): string {
    try {
      const st = statSync(this.path);
      return `${st.ino}:${st.size}:${st.mtimeMs}`;
    } catch {
      return 'absent';
    }
  }

  private refresh(): void {
    if (!this.changedOnDisk()) return;
    if (this.tryLoadUnlocked()) return;
    // Needs a migration or a move aside: only under the lock; if busy, keep what we have for now.
    const lock = FileLock.tryAcquire(this.lockPath);
    if (!lock) return;
    try { this.loadLocked(); } finally { lock.release(); }
  }

  /** Loads a current-schema file (or none) without the lock; false if it needs the lock's help. */
  private tryLoadUnlocked(): boolean {
    const stamp = this.fileStamp();
    const text = this.readText();
    if (text === undefined) {
      this.records = [];
      this.stamp = stamp;
      return true;
    }
    try {
      const { file, migratedFrom, quarantined } = parseLibrary(text);
      if (migratedFrom !== undefined || quarantined.length > 0) return false;
      this.records = file.vms;
      this.stamp = stamp;
      return true;
    } catch (e) {
      if (e instanceof LibraryFileError) return false;
      throw e;
    }
  }

  /** Loads with the lock held: migrates and writes back, or moves a bad file aside. */
  private loadLocked(): void {
    this.removeDebrisLocked();
    const text = this.readText();
    if (text === undefined) {
      this.records = [];
      this.stamp = this.fileStamp();
      return;
    }
    try {
      const { file, migratedFrom, quarantined } = parseLibrary(text);
      this.records = file.vms;
      if (migratedFrom !== undefined) {
        const backup = this.asidePath(`schema${migratedFrom}`);
        copyFileSync(this.path, backup);
        this.notice({ severity: 'info', message: `the VM library was migrated from schema ${migratedFrom} to ${LIBRARY_SCHEMA}; the original is kept as ${backup}`, at: Date.now() });
      }
      if (quarantined.length > 0) this.quarantine(quarantined, file.vms.length);
      if (migratedFrom !== undefined || quarantined.length > 0) this.write(file.vms);
      else this.stamp = this.fileStamp();
    } catch (e) {
      if (!(e instanceof LibraryFileError)) throw e;
      const movedTo = this.asidePath('corrupt');
      renameSync(this.path, movedTo);
      fsyncDir(dirname(this.path));
      this.records = [];
      this.stamp = this.fileStamp();
      const what = e.kind === 'unknown-version' ? 'could not be read' : 'is damaged';
      this.notice({ severity: 'error', message: `the VM library ${this.path} ${what}: ${e.message}. It was moved to ${movedTo} and a new, empty library started`, movedTo, at: Date.now() });
    }
  }

  /**
   * Keeps refused records in a file of their own, verbatim and with their reasons, before the
   * library is rewritten without them: the user can repair and re-import them, nothing is lost.
   */
  private quarantine(records: QuarantinedRecord[], kept: number): void {
    const movedTo = this.asidePath('quarantine');
    writeFileAtomic(movedTo, `${JSON.stringify({ library: this.path, at: new Date().toISOString(), records }, null, 2)}\n`);
    const reasons = records.slice(0, 3).map((q) => q.reason).join('; ');
    const more = records.length > 3 ? `; and ${records.length - 3} more` : '';
    this.notice({
      severity: 'error',
      message: `${records.length} VM record${records.length === 1 ? '' : 's'} in ${this.path} could not be loaded (${reasons}${more}) `
        + `and ${records.length === 1 ? 'was' : 'were'} kept aside in ${movedTo}; the other ${kept} VM${kept === 1 ? '' : 's'} loaded`,
      movedTo, at: Date.now(),
    });
  }

  /** What writers killed mid-save left behind (temp files, lock files); only with the lock held. */
  private removeDebrisLocked(): void {
    removeStaleTemps(this.path);
    FileLock.removeDebris(this.lockPath);
  }

  private write(vms: LibraryRecord[]): void {
    writeFileAtomic(this.path, serializeLibrary({ schema: LIBRARY_SCHEMA, vms }));
    this.records = vms;
    this.stamp = this.fileStamp();
  }

  private readText(): string | undefined {
    // No regular file (a FIFO, /dev/zero, a directory) is named, never waited on or read whole.
    return readHomeFile(this.path, 'the VM library', MAX_LIBRARY_BYTES);
  }

  private async withLock<T>(fn: () => T): Promise<T> {
    const lock = await FileLock.acquire(this.lockPath, this.options.lock);
    try {
      return fn();
    } finally {
      lock.release();
    }
  }

  private asidePath(tag: string): string {
    const ts = new Date().toISOString().replace(/[:.]/g, '-');
    let p = `${this.path}.${tag}-${ts}`;
    for (let i = 2; existsSync(p); i++) p = `${this.path}.${tag}-${ts}-${i}`;
    return p;
  }

  private notice(n: LibraryNotice): void {
    appendLibraryNotice(this.home, n);
    this.options.onNotice?.(n);
  }
}

/**
 * Records are plain JSON data (validated on load), so a recursive copy does; structuredClone
 * was most of the CPU time of a save at 1,000 VMs (every change and every list copies them all).
 */
function clone<T>(v: T): T {
  if (Array.isArray(v)) return v.map(clone) as T;
  if (typeof v !== 'object' || v === null) return v;
  const out: Record<string, unknown> = {};
  for (const [k, x] of Object.entries(v)) out[k] = clone(x);
  return out as T;
}

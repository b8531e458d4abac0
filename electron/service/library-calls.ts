// The API's calls on the VM library: list, create, edit, rename, clone and delete VMs, and the
// library's health in host(). Every change goes through the library's lock (ServiceState.mutate);
// what a running VM forbids is checked before the wait for the lock and again inside the change.
import { rmSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import type { HostInfo, VmRecord } from './api.ts';
import { checkNameFree } from '../vmm/config/rules.ts';
import { normalizeVmName, sameVmName } from '../vmm/config/vm-config.ts';
import { MAX_NAME_LENGTH } from '../vmm/config/limits.ts';
import { ConsoleLogFile, consoleLogPath } from './console-log.ts';
import { ApiError } from './errors.ts';
import { buildHostInfo, type ExtraCheck } from './host-info.ts';
import { MAX_VMS, type ImportedFrom, type LibraryRecord } from './library-schema.ts';
import { noticeChecks } from './library-notices.ts';
import type { LibraryNotice } from './library-store.ts';
import type { ServiceState } from './service-state.ts';
import { textArg } from './validate.ts';

export class LibraryCalls {
  private readonly s: ServiceState;

  constructor(state: ServiceState) {
    this.s = state;
  }

  host(): HostInfo {
    const notices = this.s.store.notices;
    return {
      ...buildHostInfo(this.libraryChecks(notices)),
      library: { path: this.s.store.path, vms: this.s.store.list().length, maxVms: MAX_VMS, notices },
    };
  }

  dismissLibraryNotices(): void {
    this.s.store.dismissNotices();
    this.s.broadcastLibrary();
  }

  private libraryChecks(notices: LibraryNotice[]): ExtraCheck[] {
    if (notices.length === 0) return [{ name: 'library', ok: true, detail: `${this.s.store.list().length} VMs in ${this.s.store.path}` }];
    return noticeChecks(notices);
  }

  listVms(): VmRecord[] {
    return this.s.vmRecords();
  }

  getVm(id: unknown): VmRecord {
    return this.s.dto(this.s.record(id));
  }

  async createVm(raw: unknown): Promise<VmRecord> {
    const config = await this.s.validConfigWithFiles(raw);
    const now = Date.now();
    const rec: LibraryRecord = { id: crypto.randomUUID(), config, createdAt: now, updatedAt: now };
    await this.s.mutate((vms) => {
      assertUniqueName(vms, config.name);
      vms.push(rec);
    });
    this.s.broadcastLibrary();
    return this.s.dto(rec);
  }

  async updateVm(rawId: unknown, raw: unknown): Promise<VmRecord> {
    const id = this.s.record(rawId).id;
    this.assertStoppedForEdit(id);
    const config = await this.s.validConfigWithFiles(raw);
    const updated = await this.s.changeRecord(id, (r, vms) => {
      // Again inside the change: a start may have claimed the VM while the files were checked.
      this.assertStoppedForEdit(id);
      assertUniqueName(vms, config.name, id);
      r.config = config;
    });
    this.s.broadcastLibrary();
    return this.s.dto(updated);
  }

  async renameVm(rawId: unknown, rawName: unknown): Promise<VmRecord> {
    const id = this.s.record(rawId).id;
    const wanted = textArg(rawName, 'name');
    const updated = await this.s.changeRecord(id, (r, vms) => {
      // The schema's name rules (validateConfig), on the record as it is now.
      const config = this.s.validConfig({ ...r.config, name: wanted });
      assertUniqueName(vms, config.name, id);
      r.config = config;
    });
    this.s.broadcastLibrary();
    return this.s.dto(updated);
  }

  /**
   * Only halt polling and pinning change in a running guest (setHaltPollNs, setPin); everything
   * else is the guest's hardware, fixed when it booted. Saving it now would make the library say
   * something the running VM is not.
   */
  private assertStoppedForEdit(id: string): void {
    const sup = this.s.supervisors.get(id);
    if (sup?.running) {
      throw new ApiError('conflict', `the VM is ${sup.status().state}: its settings are the guest's hardware, fixed at boot; stop it to edit them (halt polling and pinning can be changed live, and the name at any time)`);
    }
  }

  async cloneVm(rawId: unknown, rawName: unknown): Promise<VmRecord> {
    const source = this.s.record(rawId);
    const wanted = rawName === undefined || rawName === null ? undefined : textArg(rawName, 'name');
    // The copy has the source's files: check them once, before the library's lock is taken.
    await this.s.validConfigWithFiles(source.config);
    const copy = await this.s.mutate((vms) => {
      const name = wanted ?? freeName(vms, source.config.name);
      const config = this.s.validConfig({ ...source.config, name });
      assertUniqueName(vms, config.name);
      const now = Date.now();
      const rec: LibraryRecord = { id: crypto.randomUUID(), config, createdAt: now, updatedAt: now };
      vms.push(rec);
      return rec;
    });
    this.s.broadcastLibrary();
    return this.s.dto(copy);
  }

  async deleteVm(rawId: unknown, rawRemoveImported?: unknown): Promise<void> {
    const id = this.s.record(rawId).id;
    if (rawRemoveImported !== undefined && typeof rawRemoveImported !== 'boolean') throw new ApiError('invalid', 'removeImported must be true or false');
    let imported: ImportedFrom | undefined;
    let shared = false;
    this.assertNotRunning(id);
    await this.s.mutate((vms) => {
      // Checked again inside the change: the first check was before the wait for the library's
      // lock, and a start may have claimed the VM meanwhile (lifecycle-calls.ts, startVm).
      this.assertNotRunning(id);
      const i = vms.findIndex((v) => v.id === id);
      if (i < 0) throw new ApiError('not-found', `there is no VM with the id "${id}"`);
      imported = vms[i]!.imported;
      vms.splice(i, 1);
      // A folder another VM still uses (a hand-edited or copied record) is kept.
      if (imported) shared = vms.some((v) => usesFolder(v, imported!.dir));
    });
    // What the import made, only inside UNHALT_HOME/imports: the user's image is never touched.
    if (rawRemoveImported === true && imported && !shared && isInsideImports(imported.dir, this.s.layout.imports)) rmSync(imported.dir, { recursive: true, force: true });
    const sup = this.s.supervisors.get(id);
    if (sup) sup.removeLogs();
    else new ConsoleLogFile(consoleLogPath(this.s.layout.logs, id)).remove();
    this.s.supervisors.delete(id);
    this.s.startsToSave.delete(id);
    this.s.broadcastLibrary();
  }

  private assertNotRunning(id: string): void {
    if (this.s.supervisors.get(id)?.running) throw new ApiError('conflict', 'the VM is running: stop it before deleting it');
  }
}

function assertUniqueName(vms: LibraryRecord[], name: string, exceptId?: string): void {
  try {
    checkNameFree(name, vms.filter((v) => v.id !== exceptId).map((v) => v.config.name));
  } catch (e) {
    throw new ApiError('conflict', (e as Error).message);
  }
}

/** "name-copy", "name-copy-2", ... within the name length limit. */
function freeName(vms: LibraryRecord[], name: string): string {
  for (let i = 1; ; i++) {
    const suffix = i === 1 ? '-copy' : `-copy-${i}`;
    const candidate = `${normalizeVmName(name).slice(0, MAX_NAME_LENGTH - suffix.length)}${suffix}`;
    if (!vms.some((v) => sameVmName(v.config.name, candidate))) return candidate;
  }
}

/** Whether VM `v` has its import folder, or a kernel, initrd or disk, in folder `dir`. */
function usesFolder(v: LibraryRecord, dir: string): boolean {
  const d = resolve(dir);
  const inside = (p: string | undefined) => p !== undefined && (resolve(p) === d || resolve(p).startsWith(`${d}/`));
  return inside(v.imported?.dir) || inside(v.config.kernel) || inside(v.config.initrd) || (v.config.disks ?? []).some((k) => inside(k.path));
}

/** A folder the import made: directly under UNHALT_HOME/imports (a hand-edited library cannot aim elsewhere). */
function isInsideImports(dir: string, imports: string): boolean {
  return dirname(resolve(dir)) === resolve(imports);
}

// The API's calls for importing a cloud image: a file browser over the allowed folders (a
// browser's file input gives a file's contents, never its host path) and the import itself
// (image-import.ts), which adds the VM to the library. Both see only the allowed folders: the
// host-mode token must not become a way to read other files.
import { readdirSync, statSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import type { FolderListing, ImportRequestDto, VmRecord } from './api.ts';
import { confineToAllowedFolders, folderIsAllowed } from './allowed-folders.ts';
import { ApiError, toApiError } from './errors.ts';
import { ImageError, ImportStopped, SeedError, forwardedPorts, importImage } from './image-import.ts';
import type { LibraryRecord } from './library-schema.ts';
import type { ServiceState } from './service-state.ts';
import { clip, textArg } from './validate.ts';
import { ConfigError } from '../vmm/config/vm-config.ts';
import { isQcow2 } from '../vmm/devices/virtio/disk-image.ts';

/** The most entries one listing returns (a folder of 100,000 files still answers quickly). */
export const MAX_LISTING = 2000;

export class ImportCalls {
  private readonly s: ServiceState;
  /** Imports in progress, stopped when the service closes (what they made is removed). */
  private readonly running = new Set<AbortController>();

  constructor(state: ServiceState) {
    this.s = state;
  }

  /** A folder's subfolders and files, if it is allowed; without a path, the allowed folders themselves. */
  listFolder(rawPath: unknown): FolderListing {
    const folders = this.s.allowedFolders();
    if (rawPath === undefined || rawPath === null || rawPath === '') {
      return { path: '', entries: folders.map((f) => ({ name: f.path, path: f.path, kind: 'dir' as const })) };
    }
    const path = resolve(textArg(rawPath, 'folder', 4096));
    if (!folderIsAllowed(path, folders)) {
      throw new ApiError('invalid', `${clip(path, 200)} is outside the folders Unhalt may read (${folders.map((f) => f.path).join(', ')}); allow it first (library view: Folders for boot files)`);
    }
    let names: string[];
    try {
      names = readdirSync(path).sort((a, b) => a.localeCompare(b));
    } catch (e) {
      throw new ApiError('invalid', `${clip(path, 200)} cannot be listed (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`);
    }
    const entries: FolderListing['entries'] = [];
    for (const name of names) {
      if (name.startsWith('.') || entries.length >= MAX_LISTING) continue;
      const full = join(path, name);
      try {
        const st = statSync(full);
        if (st.isDirectory()) entries.push({ name, path: full, kind: 'dir' });
        else if (st.isFile()) entries.push({ name, path: full, kind: 'file', sizeBytes: st.size, ...(imageKind(full, name) ? { image: imageKind(full, name)! } : {}) });
      } catch { /* gone meanwhile, or a dangling link: not listed */ }
    }
    entries.sort((a, b) => (a.kind === b.kind ? 0 : a.kind === 'dir' ? -1 : 1));
    const parent = dirname(path);
    return { path, ...(parent !== path && folderIsAllowed(parent, folders) ? { parent } : {}), entries, truncated: names.length > MAX_LISTING };
  }

  /** Imports the image (in an allowed folder) as a new library VM; progress goes out as 'import' events. */
  async importImage(raw: unknown): Promise<VmRecord> {
    const req = importRequest(raw);
    const folders = this.s.allowedFolders();
    confineToAllowedFolders(req.image, 'image', folders);
    if (req.sshKeyFile !== undefined) confineToAllowedFolders(req.sshKeyFile, 'SSH key', folders);
    const abort = new AbortController();
    this.running.add(abort);
    try {
      const vms = this.s.store.list();
      const result = await importImage(req, {
        home: this.s.layout.home,
        names: vms.map((v) => v.config.name),
        usedPorts: forwardedPorts(vms),
        progress: (step, percent) => this.s.broadcast({ type: 'import', progress: { image: req.image, step, ...(percent !== undefined ? { percent } : {}) } }),
        signal: abort.signal,
      });
      const now = Date.now();
      const rec: LibraryRecord = { id: crypto.randomUUID(), config: result.config, createdAt: now, updatedAt: now, imported: result.imported };
      try {
        await this.s.mutate((list) => { result.claim(list); list.push(rec); });
      } catch (e) {
        result.discard();
        throw e;
      }
      this.s.broadcastLibrary();
      return this.s.dto(rec);
    } catch (e) {
      if (e instanceof ImageError || e instanceof SeedError || e instanceof ImportStopped) throw new ApiError('invalid', e.message);
      throw toApiError(e, 'invalid');
    } finally {
      this.running.delete(abort);
    }
  }

  /** The service closes: imports in progress stop and remove what they made. */
  stopImports(): void {
    for (const a of this.running) a.abort();
  }
}

function imageKind(path: string, name: string): 'qcow2' | 'raw' | undefined {
  try {
    if (isQcow2(path)) return 'qcow2';
  } catch { return undefined; }
  return /\.(raw|img)$/i.test(name) ? 'raw' : undefined;
}

/** The request as the API takes it: the image's path and optional fields, each checked. */
function importRequest(raw: unknown): ImportRequestDto {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) throw new ApiError('invalid', 'an import request must be an object { image, name?, memoryMiB?, cpus?, user?, sshKeyFile?, password? }');
  const r = raw as Record<string, unknown>;
  const known = ['image', 'name', 'memoryMiB', 'cpus', 'user', 'sshKeyFile', 'password'];
  for (const k of Object.keys(r)) if (!known.includes(k)) throw new ApiError('invalid', `unknown import field "${clip(k, 40)}"; valid: ${known.join(', ')}`);
  const out: ImportRequestDto = { image: resolve(textArg(r.image, 'image', 4096)) };
  if (r.name !== undefined && r.name !== '') out.name = textArg(r.name, 'name', 200);
  for (const k of ['memoryMiB', 'cpus'] as const) {
    if (r[k] === undefined) continue;
    if (typeof r[k] !== 'number') throw new ConfigError(`${k} must be a number`);
    out[k] = r[k] as number;
  }
  if (r.user !== undefined && r.user !== '') out.user = textArg(r.user, 'user', 64);
  if (r.sshKeyFile !== undefined && r.sshKeyFile !== '') out.sshKeyFile = resolve(textArg(r.sshKeyFile, 'SSH key file', 4096));
  if (r.password !== undefined && r.password !== '') out.password = textArg(r.password, 'password', 1024);
  return out;
}

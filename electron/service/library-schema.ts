// The VM library file, versioned: { schema: 1, vms: [{ id, config, createdAt, updatedAt }] }.
// Every load validates the whole file; older schemas are migrated step by step; a file that is
// not valid JSON, whose top level breaks the schema, or that comes from a newer Unhalt is a
// LibraryFileError (the store then moves it aside instead of overwriting it). One record this
// version cannot accept (an unknown machine type, a bad field, one VM past the limit) is not a
// reason to lose the others: it comes back in `quarantined`, with the reason, and the rest load.
import { ConfigError, validateConfig, type VmConfig } from '../vmm/config/vm-config.ts';

export const LIBRARY_SCHEMA = 1;
/** The one VM-count limit: creates refuse past it, loads keep the excess aside. */
export const MAX_VMS = 1000;
/** More than any library of at most MAX_VMS VMs holds (a bigger file is no library of ours). */
export const MAX_LIBRARY_BYTES = 64 * 1024 * 1024;
export const LIBRARY_FULL_MESSAGE = `the library holds at most ${MAX_VMS} VMs; delete some before adding more`;
/** VM ids: what randomUUID() produces, and nothing a path could be built from. */
export const VM_ID = /^[a-z0-9][a-z0-9-]{0,63}$/;

export interface LibraryRecord {
  id: string;
  config: VmConfig;
  /** ms since the epoch */
  createdAt: number;
  updatedAt: number;
  /** When it was last started; absent if never (an optional field: older files and versions read it fine). */
  lastStartedAt?: number;
  /** The last start that failed, and why (optional too); cleared by the next start that works. */
  lastStartFailure?: { at: number; reason: string };
  /** Made by `unhalt import` (optional): the user's image and the folder of what the import made. */
  imported?: ImportedFrom;
}

/** What an import made: deleting the VM may remove `dir` (under UNHALT_HOME/imports), never `image`. */
export interface ImportedFrom {
  image: string;
  dir: string;
  os?: string;
  user: string;
  sshPort: number;
}

/** The longest start-failure reason kept (a reason is one line; longer ones are cut). */
export const MAX_FAILURE_REASON = 2000;

export interface LibraryFile {
  schema: typeof LIBRARY_SCHEMA;
  vms: LibraryRecord[];
}

/** A record kept out of the library, exactly as it was in the file, and why. */
export interface QuarantinedRecord {
  record: unknown;
  reason: string;
}

export interface ParsedLibrary {
  file: LibraryFile;
  migratedFrom?: number;
  quarantined: QuarantinedRecord[];
}

export class LibraryFileError extends Error {
  override name = 'LibraryFileError';
  readonly kind: 'corrupt' | 'unknown-version';

  constructor(kind: 'corrupt' | 'unknown-version', message: string) {
    super(message);
    this.kind = kind;
  }
}

/** Parses and validates a library file's text, migrating older schemas. */
export function parseLibrary(text: string): ParsedLibrary {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (e) {
    throw new LibraryFileError('corrupt', `not valid JSON (${(e as Error).message})`);
  }
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) throw new LibraryFileError('corrupt', 'the top level is not an object');
  const obj = raw as Record<string, unknown>;
  const version = obj.schema === undefined ? 0 : obj.schema;
  if (typeof version !== 'number' || !Number.isInteger(version) || version < 0) {
    throw new LibraryFileError('corrupt', `"schema" is ${JSON.stringify(version).slice(0, 20)}, not a version number`);
  }
  if (version > LIBRARY_SCHEMA) {
    throw new LibraryFileError('unknown-version',
      `it was written by a newer Unhalt (library schema ${version}; this one reads up to ${LIBRARY_SCHEMA})`);
  }
  const migrated = version === 0 ? migrateV0(obj) : { obj, quarantined: [] };
  const v1 = validateV1(migrated.obj);
  return {
    file: v1.file, quarantined: [...migrated.quarantined, ...v1.quarantined],
    ...(version < LIBRARY_SCHEMA ? { migratedFrom: version } : {}),
  };
}

export function serializeLibrary(file: LibraryFile): string {
  return `${JSON.stringify(file, null, 2)}\n`;
}

function validateV1(obj: Record<string, unknown>): { file: LibraryFile; quarantined: QuarantinedRecord[] } {
  for (const key of Object.keys(obj)) {
    if (key !== 'schema' && key !== 'vms') throw new LibraryFileError('corrupt', `unknown top-level field "${key.slice(0, 40)}"`);
  }
  if (!Array.isArray(obj.vms)) throw new LibraryFileError('corrupt', '"vms" is not a list');
  const seen = new Set<string>();
  const vms: LibraryRecord[] = [];
  const quarantined: QuarantinedRecord[] = [];
  obj.vms.forEach((v: unknown, i) => {
    try {
      if (vms.length >= MAX_VMS) throw new LibraryFileError('corrupt', `VM #${i + 1} is past the limit: ${LIBRARY_FULL_MESSAGE}`);
      const r = validateRecord(v, `VM #${i + 1}`, seen);
      seen.add(r.id);
      vms.push(r);
    } catch (e) {
      if (!(e instanceof LibraryFileError)) throw e;
      quarantined.push({ record: v, reason: e.message });
    }
  });
  return { file: { schema: LIBRARY_SCHEMA, vms }, quarantined };
}

function validateRecord(v: unknown, where: string, seen: ReadonlySet<string>): LibraryRecord {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) throw new LibraryFileError('corrupt', `${where} is not an object`);
  const r = v as Record<string, unknown>;
  if (typeof r.id !== 'string' || !VM_ID.test(r.id)) throw new LibraryFileError('corrupt', `${where} has no valid id`);
  if (seen.has(r.id)) throw new LibraryFileError('corrupt', `${where} repeats the id ${r.id}`);
  let config: VmConfig;
  try {
    config = validateConfig(r.config);
  } catch (e) {
    if (e instanceof ConfigError) throw new LibraryFileError('corrupt', `${where} (${r.id}): ${e.message}`);
    throw e;
  }
  const rec: LibraryRecord = { id: r.id, config, createdAt: timestamp(r.createdAt, where), updatedAt: timestamp(r.updatedAt, where) };
  if (r.lastStartedAt !== undefined) rec.lastStartedAt = timestamp(r.lastStartedAt, where);
  if (r.lastStartFailure !== undefined) {
    const f = r.lastStartFailure as { at?: unknown; reason?: unknown } | null;
    if (typeof f !== 'object' || f === null || typeof f.reason !== 'string' || f.reason.length > MAX_FAILURE_REASON) {
      throw new LibraryFileError('corrupt', `${where} has an invalid lastStartFailure`);
    }
    rec.lastStartFailure = { at: timestamp(f.at, where), reason: f.reason };
  }
  if (r.imported !== undefined) rec.imported = importedFrom(r.imported, where);
  return rec;
}

function importedFrom(v: unknown, where: string): ImportedFrom {
  const i = v as Partial<Record<keyof ImportedFrom, unknown>> | null;
  const text = (x: unknown) => typeof x === 'string' && x.length > 0 && x.length <= 4096;
  if (typeof i !== 'object' || i === null || !text(i.image) || !text(i.dir) || !text(i.user)
    || (i.os !== undefined && !text(i.os)) || typeof i.sshPort !== 'number' || !Number.isInteger(i.sshPort) || i.sshPort < 1 || i.sshPort > 65535) {
    throw new LibraryFileError('corrupt', `${where} has an invalid "imported"`);
  }
  const out: ImportedFrom = { image: i.image as string, dir: i.dir as string, user: i.user as string, sshPort: i.sshPort };
  if (i.os !== undefined) out.os = i.os as string;
  return out;
}

function timestamp(v: unknown, where: string): number {
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 0) throw new LibraryFileError('corrupt', `${where} has an invalid timestamp`);
  return v;
}

/**
 * Schema 0, the prototype's shape: no "schema" field, VMs keyed by id, flat CLI-like fields,
 * memory as "512M"/"1G" text or a number of MiB, the kernel command line as "cmdline", overcommit
 * as an object, ISO dates:
 *   { "vms": { "ID": { "name", "guest"?, "kernel"?, "initrd"?, "cmdline"?, "cpus", "memory",
 *                      "machine"?, "features"?: { name: bool }, "overcommit"?: { cpuPm, memLock },
 *                      "haltPollNs"?, "pin"?, "created"? } } }
 * Machine types did not exist yet: those VMs ran with PV spinlocks off, which is unhalt-1.0.
 */
export function migrateV0(obj: Record<string, unknown>): { obj: Record<string, unknown>; quarantined: QuarantinedRecord[] } {
  const vms = obj.vms;
  if (typeof vms !== 'object' || vms === null || Array.isArray(vms)) throw new LibraryFileError('corrupt', 'schema 0: "vms" is not an object keyed by id');
  const quarantined: QuarantinedRecord[] = [];
  const out = Object.entries(vms as Record<string, unknown>).flatMap(([id, v]) => {
    try {
      return [migrateV0Record(id, v)];
    } catch (e) {
      if (!(e instanceof LibraryFileError)) throw e;
      quarantined.push({ record: { [id]: v }, reason: e.message });
      return [];
    }
  });
  return { obj: { schema: 1, vms: out }, quarantined };
}

function migrateV0Record(id: string, v: unknown): Record<string, unknown> {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) throw new LibraryFileError('corrupt', `schema 0: VM ${id.slice(0, 40)} is not an object`);
  const old = v as Record<string, unknown>;
  const over = (typeof old.overcommit === 'object' && old.overcommit !== null ? old.overcommit : {}) as Record<string, unknown>;
  const config: Record<string, unknown> = {
    version: 1,
    name: old.name,
    cpus: old.cpus,
    memoryMiB: memoryMiB(old.memory, id),
    machine: old.machine ?? 'unhalt-1.0',
    cpuFeatures: old.features ?? {},
    cpuPm: over.cpuPm ?? false,
    memLock: over.memLock ?? false,
  };
  for (const k of ['guest', 'kernel', 'initrd', 'haltPollNs', 'pin'] as const) if (old[k] !== undefined) config[k] = old[k];
  if (old.cmdline !== undefined) config.append = old.cmdline;
  const created = typeof old.created === 'string' ? Date.parse(old.created) : NaN;
  const at = Number.isFinite(created) && created >= 0 ? created : 0;
  return { id, config, createdAt: at, updatedAt: at };
}

function memoryMiB(v: unknown, id: string): unknown {
  if (typeof v === 'number') return v;
  if (typeof v !== 'string') return v; // validateConfig names the problem
  const m = /^\s*(\d{1,9})\s*([MG])i?B?\s*$/i.exec(v);
  if (!m) throw new LibraryFileError('corrupt', `schema 0: VM ${id.slice(0, 40)} has memory "${v.slice(0, 20)}", not like 512M or 2G`);
  return Number(m[1]) * (m[2]!.toUpperCase() === 'G' ? 1024 : 1);
}

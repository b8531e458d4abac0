// Importing a distribution's cloud image as a library VM (`unhalt import`, the wizard's "Import a
// disk image"): the image's own kernel, initrd and command line read out of it without root and
// without booting (vmm/image/inspect.ts), a cloud-init NoCloud seed with the user's login
// (vmm/image/nocloud-seed.ts), the tools disk for the agent, and user networking with a forward to
// the guest's SSH. The image itself is never written by the import; what the import makes lives
// in UNHALT_HOME/imports/ID/ and is gone again if any step fails.
import { randomUUID } from 'node:crypto';
import { closeSync, existsSync, mkdirSync, openSync, rmSync, statSync } from 'node:fs';
import { userInfo } from 'node:os';
import { basename, join, resolve } from 'node:path';
import { ConfigError, DEFAULTS, checkDisk, checkVmName, sameVmName, validateConfig, type DiskConfig, type VmConfig } from '../vmm/config/vm-config.ts';
import { MAX_NAME_LENGTH } from '../vmm/config/limits.ts';
import { isQcow2 } from '../vmm/devices/virtio/disk-image.ts';
import { LINUX_WORKLOADS_DISK } from '../vmm/guests-linux.ts';
import { USER_NET } from '../vmm/config/net-config.ts';
import { ImageError, extractBootFiles, inspectImage, type BootSource } from '../vmm/image/inspect.ts';
import { SeedError, checkUser, defaultSshKey, hashPassword, readSmallFile, readSshKey, writeSeed } from '../vmm/image/nocloud-seed.ts';
import { checkBootFiles } from '../vmm/boot/boot-file-checks.ts';
import { shownPath } from '../vmm/config/shown-path.ts';
import { convertQcow2ToRaw, Qcow2ConvertError, Qcow2ConvertStopped } from '../vmm/image/qcow2-convert.ts';
import type { ImportRequestDto } from './api.ts';
import type { ImportedFrom } from './library-schema.ts';
import { homeLayout } from './paths.ts';

export { ImageError, SeedError };

/**
 * What the user asks for; only the image is required. The guest's login: a public key file, else
 * a password (the API's form) or a file holding it (the command line's: never the password
 * itself on a command line), else the first ~/.ssh/*.pub.
 */
export interface ImportRequest extends ImportRequestDto {
  passwordFile?: string;
}

/** What the import made, for the library record (its folder holds kernel, initrd, seed and a converted raw copy). */
export type ImportRecord = ImportedFrom;

export interface ImportResult {
  config: VmConfig;
  imported: ImportRecord;
  source: BootSource;
  /** Removes what the import made (the library could not take the VM after all). */
  discard(): void;
  /**
   * Called under the library's lock, just before the VM is added: its name and SSH port again,
   * against the VMs there now (another import or the app may have added one meanwhile). A name
   * the user asked for that is taken now is refused (ConfigError); a port taken now moves up.
   */
  claim(vms: readonly { config: VmConfig }[]): void;
}

/** The host ports library VMs forward (an import never offers one of them). */
export function forwardedPorts(vms: readonly { config: VmConfig }[]): number[] {
  return vms.flatMap((v) => (v.config.net?.mode === 'user' ? v.config.net.hostfwd.map((f) => f.hostPort) : []));
}

/** The import was stopped by its caller (ctx.signal); nothing it made is left. */
export class ImportStopped extends Error {
  override name = 'ImportStopped';
  constructor() { super('the import was stopped; what it made is removed'); }
}

/** The memory an imported distribution gets unless told: systemd and cloud-init want room. */
export const IMPORT_MEMORY_MIB = 1024;
export const IMPORT_CPUS = 2;
/** The first host port offered for the guest's SSH; the next free one above it is taken. */
export const FIRST_SSH_PORT = 2222;

export interface ImportContext {
  home: string;
  /** The library's names, so the imported VM's name is free. */
  names: readonly string[];
  /** Host ports other library VMs forward already (never offered twice). */
  usedPorts: readonly number[];
  /** Steps as they go, and qemu-img's percent while a qcow2 is converted. */
  progress?: (step: string, percent?: number) => void;
  /** Whether a host port is free now (bound by nobody); the default tries to listen on it. */
  portFree?: (port: number) => Promise<boolean>;
  /** Aborts the import (SIGINT, the service closing): qemu-img is stopped, what was made removed. */
  signal?: AbortSignal;
}

export async function importImage(req: ImportRequest, ctx: ImportContext): Promise<ImportResult> {
  const image = checkImagePath(req.image);
  const login = await guestLogin(req);
  // The name before any work: a bad or taken one is the user's to fix at once.
  const name = freeImportName(req.name ?? nameFromImage(image), ctx.names, req.name !== undefined);
  const id = randomUUID();
  const dir = join(homeLayout(ctx.home).imports, id);
  const say = ctx.progress ?? (() => {});
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const stop = () => { if (ctx.signal?.aborted) throw new ImportStopped(); };
  try {
    let raw = image;
    if (isQcow2(image)) {
      raw = join(dir, 'disk.raw');
      say('converting qcow2 to raw', 0);
      await convertQcow2(image, raw, (pct) => say('converting qcow2 to raw', pct), ctx.signal);
    }
    stop();
    say('reading the image\'s boot configuration');
    const source = await inspectImage(raw);
    stop();
    say(`found ${source.osName ?? 'Linux'}: kernel ${source.kernel}${source.initrd ? `, initrd ${source.initrd}` : ''}`);
    const files = await extractBootFiles(raw, source, dir);
    say('writing the cloud-init seed');
    const seed = join(dir, 'seed.iso');
    await writeSeed({ instanceId: id, hostname: hostnameFor(name), user: login.user, sshKeys: login.keys, passwordHash: login.passwordHash, agent: existsSync(LINUX_WORKLOADS_DISK) }, seed);
    stop();
    const sshPort = await freePort(ctx);
    const disks: DiskConfig[] = [checkDisk({ path: raw }), { path: seed, readonly: true }];
    if (existsSync(LINUX_WORKLOADS_DISK)) disks.push({ path: resolve(LINUX_WORKLOADS_DISK), readonly: true });
    const config = validateConfig({
      name,
      guest: 'custom',
      kernel: files.kernel,
      ...(files.initrd ? { initrd: files.initrd } : {}),
      append: importCmdline(source.cmdline),
      memoryMiB: req.memoryMiB ?? IMPORT_MEMORY_MIB,
      cpus: req.cpus ?? IMPORT_CPUS,
      net: { mode: 'user', hostfwd: [{ protocol: 'tcp', hostAddress: '127.0.0.1', hostPort: sshPort, guestAddress: USER_NET.dhcpStart, guestPort: 22 }] },
      disks,
    });
    // What `unhalt run` and the app check of the boot files before a boot, checked now: an image whose
    // "kernel" is not one, or whose kernel and initrd do not fit the memory, is refused here.
    // Not the disks: an image the user may only read is theirs to make writable before a start.
    await checkBootFiles({ ...config, disks: [] }).catch((e: unknown) => {
      // Named as the image holds them: the copies are about to be removed.
      if (!(e instanceof ConfigError)) throw e;
      let m = e.message.replaceAll(shownPath(files.kernel), `${source.kernel} (in the image)`);
      if (files.initrd) m = m.replaceAll(shownPath(files.initrd), `${source.initrd} (in the image)`);
      throw new ImageError(`${shownPath(image)}: ${m}`);
    });
    stop();
    const imported: ImportRecord = { image, dir, ...(source.osName ? { os: source.osName } : {}), user: login.user, sshPort };
    const claim = (vms: readonly { config: VmConfig }[]) => {
      config.name = freeImportName(req.name ?? nameFromImage(image), vms.map((v) => v.config.name), req.name !== undefined);
      const used = new Set(forwardedPorts(vms));
      let port = imported.sshPort;
      while (used.has(port)) port++;
      if (port > 65535) throw new ImageError('no free host port at or above 2222 for the guest\'s SSH');
      imported.sshPort = port;
      if (config.net?.mode === 'user') config.net = { ...config.net, hostfwd: config.net.hostfwd.map((f) => (f.guestPort === 22 ? { ...f, hostPort: port } : f)) };
    };
    return { config, source, discard: () => rmSync(dir, { recursive: true, force: true }), imported, claim };
  } catch (e) {
    rmSync(dir, { recursive: true, force: true });
    throw ctx.signal?.aborted ? new ImportStopped() : e;
  }
}

/** The image given: an existing regular file, readable, by its absolute path (the disk rules'). */
function checkImagePath(given: string): string {
  const path = resolve(given);
  let st;
  try {
    st = statSync(path);
  } catch (e) {
    throw new ImageError(`${shownPath(path)}: ${(e as NodeJS.ErrnoException).code === 'ENOENT' ? 'no such file' : (e as Error).message}; give the path of a cloud image (.qcow2 or .raw)`);
  }
  if (!st.isFile()) throw new ImageError(`${shownPath(path)}: is not a file; give the path of a cloud image (.qcow2 or .raw)`);
  try {
    closeSync(openSync(path, 'r'));
  } catch (e) {
    throw new ImageError(`${shownPath(path)}: cannot be read (${(e as NodeJS.ErrnoException).code ?? (e as Error).message}); give a file you can read`);
  }
  checkDisk({ path });
  return path;
}

/** The login the seed gives the guest's user: keys, or a password hash; never the password itself. */
async function guestLogin(req: ImportRequest): Promise<{ user: string; keys: string[]; passwordHash?: string }> {
  const user = req.user ?? defaultUser();
  checkUser(user); // before any work: a bad name is the user's to fix at once
  const password = req.password ?? (req.passwordFile !== undefined ? await readPasswordFile(req.passwordFile) : undefined);
  const passwordHash = password !== undefined ? await hashPassword(password) : undefined;
  const keys = req.sshKeyFile !== undefined ? [await readSshKey(req.sshKeyFile)] : passwordHash ? [] : [(await defaultSshKey()).key];
  return { user, keys, ...(passwordHash ? { passwordHash } : {}) };
}

/** The host user's name as the guest's, unless it is root (cloud-init's root login is locked). */
function defaultUser(): string {
  let name = 'unhalt';
  try { name = userInfo().username; } catch { /* no passwd entry: keep the default */ }
  return name === 'root' || !/^[a-z_][a-z0-9_-]{0,31}$/.test(name) ? 'unhalt' : name;
}

async function readPasswordFile(file: string): Promise<string> {
  const path = resolve(file);
  let bytes: Buffer;
  try {
    bytes = await readSmallFile(path, 4096);
  } catch (e) {
    throw new ImageError(`--password-file ${shownPath(path)}: cannot be read (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`);
  }
  if (bytes.length > 4096) throw new ImageError(`${shownPath(path)}: longer than 4096 bytes; a password file holds one line, the password`);
  const password = bytes.toString('utf8').split('\n')[0]!.replace(/\r$/, '');
  if (!password) throw new ImageError(`--password-file ${shownPath(path)}: its first line is empty; write the password on it`);
  return password;
}

/** "debian-12-genericcloud-amd64.qcow2" -> "debian-12-genericcloud-amd64". */
export function nameFromImage(image: string): string {
  const base = basename(image).replace(/\.(qcow2|raw|img)$/i, '').replace(/[^A-Za-z0-9 ._-]+/g, '-').replace(/^[^A-Za-z0-9]+/, '');
  return base.slice(0, MAX_NAME_LENGTH) || DEFAULTS.name;
}

/** A free name: the one asked for (refused if taken), else the image's with -2, -3, ... */
function freeImportName(name: string, names: readonly string[], asked: boolean): string {
  const taken = (n: string) => names.some((o) => sameVmName(o, n));
  const base = checkVmName(name);
  if (!taken(base)) return base;
  if (asked) throw new ConfigError(`a VM named "${base}" already exists; choose another name with --name`);
  for (let i = 2; ; i++) {
    const suffix = `-${i}`;
    const candidate = `${base.slice(0, MAX_NAME_LENGTH - suffix.length)}${suffix}`;
    if (!taken(candidate)) return candidate;
  }
}

/** The guest's hostname: the VM's name as an RFC 1123 label. */
export function hostnameFor(name: string): string {
  const label = name.toLowerCase().replace(/[^a-z0-9-]+/g, '-').replace(/^-+|-+$/g, '').slice(0, 63).replace(/-+$/, '');
  return label || 'unhalt-guest';
}

/** The image's own command line, with the serial console the VM's console is (ttyS0). */
export function importCmdline(cmdline: string): string {
  const words = cmdline.trim().split(/\s+/).filter(Boolean);
  if (!words.some((w) => /^console=ttyS0(,|$)/.test(w))) words.push('console=ttyS0');
  return words.join(' ');
}

async function freePort(ctx: ImportContext): Promise<number> {
  const used = new Set(ctx.usedPorts);
  const free = ctx.portFree ?? portFreeNow;
  for (let p = FIRST_SSH_PORT; p < 65536; p++) {
    if (!used.has(p) && await free(p)) return p;
  }
  throw new ImageError('no free host port at or above 2222 for the guest\'s SSH');
}

async function portFreeNow(port: number): Promise<boolean> {
  const { createServer } = await import('node:net');
  return new Promise((done) => {
    const s = createServer();
    s.once('error', () => done(false));
    s.listen(port, '127.0.0.1', () => s.close(() => done(true)));
  });
}

/** The one qcow2 conversion (qcow2-convert.ts), its failures as this import's. */
async function convertQcow2(source: string, target: string, progress: (pct: number) => void, signal?: AbortSignal): Promise<void> {
  const run = convertQcow2ToRaw(source, target, { progress });
  const off = signal ? (() => { const stop = () => run.stop(); signal.addEventListener('abort', stop, { once: true }); return () => signal.removeEventListener('abort', stop); })() : () => {};
  try {
    await run.done;
  } catch (e) {
    if (e instanceof Qcow2ConvertStopped || signal?.aborted) throw new ImportStopped();
    if (e instanceof Qcow2ConvertError) throw new ImageError(/^qemu-img|is not installed/.test(e.message) && !/could not convert/.test(e.message) ? e.message : `${source}: ${e.message}`);
    throw e;
  } finally {
    off();
  }
}

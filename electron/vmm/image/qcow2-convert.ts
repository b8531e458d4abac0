// A qcow2 image to a new raw file, the one way Unhalt does it (the import and the app's "Convert to
// raw" both call it): `qemu-img convert -p -f qcow2 -O raw SRC TEMP` in a child process, its
// progress read from qemu-img's -p output. It writes a temporary file beside the target
// (`.NAME.converting-SCOPE-PID-HEX`, claimed with O_EXCL), synced and then linked to the target's name
// only when qemu-img succeeded: never over a file, and a conversion cut short (a signal, a
// SIGKILL, a full disk) leaves no half image under the target's name. Temporary files of dead
// processes are removed by the next conversion to that target. qemu-img dies with its parent
// (setpriv --pdeathsig where util-linux has it): a SIGKILLed service leaves none writing.
// Refused before anything is converted: a qcow2 with a backing file or an external data file
// (`qemu-img info --backing-chain` tells), since qemu-img would read that other file — anywhere on
// the host — into the raw copy. qemu-img is Debian's qemu-utils.
import { spawn, execFile, spawnSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { closeSync, existsSync, fsyncSync, linkSync, openSync, readdirSync, readlinkSync, renameSync, rmSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { pidAlive } from '../process-alive.ts';

export const QEMU_IMG = process.env.UNHALT_QEMU_IMG ?? 'qemu-img';

/** A conversion that could not be done, in one line (the caller says which image). */
export class Qcow2ConvertError extends Error {}
export class Qcow2ConvertStopped extends Error {}

export interface RunningConversion {
  /** Resolves when the raw file is complete; rejects with Qcow2ConvertError or Qcow2ConvertStopped. */
  done: Promise<void>;
  /** Stops qemu-img; `done` then rejects with Qcow2ConvertStopped and the partial file is gone. */
  stop(): void;
}

const INFO_TIMEOUT_MS = 30_000;

/** The reason a qcow2 image may not be converted (a backing file or a data file), or undefined. */
export async function qcow2OutsideReferences(source: string): Promise<string | undefined> {
  const out = await new Promise<string>((resolve, reject) => {
    execFile(QEMU_IMG, ['info', '--output=json', '--backing-chain', '-f', 'qcow2', source], { timeout: INFO_TIMEOUT_MS, maxBuffer: 1 << 20 }, (e, stdout, stderr) => {
      if (e) {
        const code = (e as NodeJS.ErrnoException).code;
        return reject(new Qcow2ConvertError(code === 'ENOENT' ? `${QEMU_IMG} is not installed (Debian: apt install qemu-utils): a qcow2 image is converted by it`
          : `qemu-img cannot read it: ${String(stderr).trim().split('\n').pop() || e.message}`));
      }
      resolve(stdout);
    });
  });
  let chain: { 'backing-filename'?: string; 'format-specific'?: { data?: { 'data-file'?: string } } }[];
  try {
    const parsed = JSON.parse(out) as unknown;
    chain = (Array.isArray(parsed) ? parsed : [parsed]) as typeof chain;
  } catch {
    return 'qemu-img info gave no readable description of it';
  }
  const backing = chain.find((c) => c['backing-filename'] !== undefined)?.['backing-filename'];
  if (chain.length > 1 || backing !== undefined) {
    return `it is a qcow2 with a backing file (${clip(backing ?? 'another image')}), which a conversion would read into the copy: flatten it yourself first if you trust it (qemu-img convert -O qcow2 IMAGE FLAT.qcow2)`;
  }
  const dataFile = chain[0]?.['format-specific']?.data?.['data-file'];
  if (dataFile !== undefined) return `it is a qcow2 with an external data file (${clip(dataFile)}), which a conversion would read into the copy: convert it yourself if you trust it`;
  return undefined;
}

/**
 * Which host and PID namespace a pid in a temporary file's name belongs to (8 hex digits): a pid
 * is only judged where it means something — not from another container, not from another host
 * sharing the folder over NFS.
 */
const PID_SCOPE = (() => {
  let ns = '';
  try { ns = readlinkSync('/proc/self/ns/pid'); } catch { /* no /proc: the host alone */ }
  return createHash('sha256').update(`${hostname()}\0${ns}`).digest('hex').slice(0, 8);
})();

/** The temporary files conversions to `target` write: `.NAME.converting-SCOPE-PID-HEX`. */
const tempPattern = (target: string) => new RegExp(`^\\.${basename(target).replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}\\.converting-([0-9a-f]{8})-(\\d+)-[0-9a-f]{8}$`);

/** Removes what conversions to `target` by processes of this scope no longer alive left behind; returns how many. */
export function removeStaleConversions(target: string): number {
  const re = tempPattern(target);
  let removed = 0;
  let names: string[];
  try { names = readdirSync(dirname(target)); } catch { return 0; }
  for (const name of names) {
    const m = re.exec(name);
    if (!m || m[1] !== PID_SCOPE || pidAlive(Number(m[2]))) continue;
    try { rmSync(join(dirname(target), name), { force: true }); removed++; } catch { /* another cleaner */ }
  }
  return removed;
}

/** util-linux's setpriv with --pdeathsig, which makes qemu-img die with us; undefined without it. */
let setprivChecked: string | null | undefined;
function setpriv(): string | undefined {
  if (setprivChecked === undefined) {
    const r = spawnSync('setpriv', ['--help'], { encoding: 'utf8' });
    setprivChecked = r.status === 0 && r.stdout.includes('--pdeathsig') ? 'setpriv' : null;
  }
  return setprivChecked ?? undefined;
}

/**
 * Starts converting `source` (checked first) into `target`, a new file (0600 unless `mode`);
 * `progress` gets whole percents as they rise.
 */
export function convertQcow2ToRaw(source: string, target: string, opts: { progress?: (pct: number) => void; mode?: number } = {}): RunningConversion {
  let child: ReturnType<typeof spawn> | undefined;
  let stopped = false;
  let temp: string | undefined;
  const done = (async () => {
    const refused = await qcow2OutsideReferences(source);
    if (refused) throw new Qcow2ConvertError(refused);
    if (stopped) throw new Qcow2ConvertStopped('the conversion was stopped');
    if (existsSync(target)) throw new Qcow2ConvertError(`${target} already exists; move it away to convert again`);
    removeStaleConversions(target);
    // Claimed before qemu-img runs (O_EXCL): the temporary file is this conversion's alone.
    const claim = join(dirname(target), `.${basename(target)}.converting-${PID_SCOPE}-${process.pid}-${randomBytes(4).toString('hex')}`);
    try {
      closeSync(openSync(claim, 'wx', opts.mode ?? 0o600));
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code;
      throw new Qcow2ConvertError(`${target} cannot be created (${code ?? (e as Error).message})`);
    }
    temp = claim;
    await new Promise<void>((resolve, reject) => {
      const args = ['convert', '-p', '-f', 'qcow2', '-O', 'raw', source, claim];
      const sp = setpriv();
      const c = sp ? spawn(sp, ['--pdeathsig', 'SIGKILL', '--', QEMU_IMG, ...args], { stdio: ['ignore', 'pipe', 'pipe'] })
        : spawn(QEMU_IMG, args, { stdio: ['ignore', 'pipe', 'pipe'] });
      child = c;
      const reader = new QemuImgProgress();
      let stderr = '';
      c.stdout!.setEncoding('utf8').on('data', (t: string) => { const p = reader.feed(t); if (p !== undefined) opts.progress?.(p); });
      c.stderr!.setEncoding('utf8').on('data', (t: string) => { stderr = (stderr + t).slice(-2000); });
      c.on('error', (e) => reject(new Qcow2ConvertError((e as NodeJS.ErrnoException).code === 'ENOENT'
        ? `${QEMU_IMG} is not installed (Debian: apt install qemu-utils): a qcow2 image is converted by it` : `qemu-img could not run: ${e.message}`)));
      c.on('close', (code, signal) => {
        if (code === 0) resolve();
        else if (stopped) reject(new Qcow2ConvertStopped(`qemu-img was stopped (${signal ?? `exit ${code}`})`));
        // setpriv answers 127 when it cannot find the program it was to run.
        else if (sp && code === 127 && /execvp|No such file/.test(stderr)) reject(new Qcow2ConvertError(`${QEMU_IMG} is not installed (Debian: apt install qemu-utils): a qcow2 image is converted by it`));
        else reject(new Qcow2ConvertError(signal ? `qemu-img was stopped (${signal})` : `qemu-img could not convert it: ${stderr.trim().split('\n').pop() ?? `exit ${code}`}`));
      });
    });
    if (stopped) throw new Qcow2ConvertStopped('the conversion was stopped');
    // On disk before it gets the target's name: a crash after the link never leaves a hollow image.
    const fd = openSync(claim, 'r');
    try { fsyncSync(fd); } finally { closeSync(fd); }
    try {
      linkSync(claim, target);
      rmSync(claim, { force: true });
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code;
      if (code === 'EEXIST') throw new Qcow2ConvertError(`${target} appeared while converting; move it away to convert again`);
      // No hard links here (vfat, exFAT, SMB, some FUSE): the name is claimed (O_EXCL, never over
      // a file), then the finished image renamed onto that empty claim of ours.
      if (code !== 'EPERM' && code !== 'ENOTSUP' && code !== 'EOPNOTSUPP' && code !== 'ENOSYS') throw new Qcow2ConvertError(`${target} cannot be created (${code ?? (e as Error).message})`);
      try {
        closeSync(openSync(target, 'wx', opts.mode ?? 0o600));
      } catch (x) {
        const c = (x as NodeJS.ErrnoException).code;
        throw new Qcow2ConvertError(c === 'EEXIST' ? `${target} appeared while converting; move it away to convert again` : `${target} cannot be created (${c ?? (x as Error).message})`);
      }
      renameSync(claim, target);
    }
    temp = undefined;
  })().catch((e: unknown) => {
    if (temp) rmSync(temp, { force: true }); // ours: claimed above
    throw e;
  });
  return {
    done,
    stop: () => {
      stopped = true;
      child?.kill('SIGTERM');
    },
  };
}

const clip = (s: string) => (s.length > 120 ? `${s.slice(0, 120)}…` : s).replace(/[^\x20-\x7e]/g, '?');

/**
 * qemu-img's `-p` output as whole percents: it prints `    (12.34/100%)\r` as it goes, and a pipe
 * may cut that anywhere. feed() keeps an unfinished tail for the next chunk and answers the
 * newest percent when it is higher than any before (progress never goes back), else undefined.
 */
export class QemuImgProgress {
  /** The unfinished reading the last chunk ended in (at most 12 characters), for the next. */
  tail = '';
  private last = -1;

  feed(chunk: string): number | undefined {
    const text = this.tail + chunk;
    const all = [...text.matchAll(/\((\d+(?:\.\d+)?)\/100%\)/g)];
    const end = all.length ? all.at(-1)!.index! + all.at(-1)![0].length : 0;
    // What may still become a reading: a "(" after the last whole one, followed by nothing but the
    // start of "12.34/100%)" (at most 12 characters); anything else is no reading and is dropped.
    const open = text.lastIndexOf('(');
    const rest = open >= end ? text.slice(open) : '';
    this.tail = /^\(\d{0,3}(\.\d{0,2})?(\/(1(0(0%?)?)?)?)?$/.test(rest) ? rest : '';
    if (!all.length) return undefined;
    const pct = Math.min(100, Math.floor(Number(all.at(-1)![1])));
    if (pct <= this.last) return undefined;
    this.last = pct;
    return pct;
  }
}

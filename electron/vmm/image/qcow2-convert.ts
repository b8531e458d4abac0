// A qcow2 image to a new raw file, the one way Unhalt does it (the import and the app's "Convert to
// raw" both call it): `qemu-img convert -p -f qcow2 -O raw SRC DST` in a child process, into a
// file claimed first (never over one), its progress read from qemu-img's -p output, the partial
// file removed on failure or cancel. Refused before anything is converted: a qcow2 with a backing
// file or an external data file (`qemu-img info --backing-chain` tells), since qemu-img would read
// that other file — anywhere on the host — into the raw copy. qemu-img is Debian's qemu-utils.
import { spawn, execFile } from 'node:child_process';
import { closeSync, openSync, rmSync } from 'node:fs';

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
 * Starts converting `source` (checked first) into `target`, a new file (0600 unless `mode`);
 * `progress` gets whole percents as they rise.
 */
export function convertQcow2ToRaw(source: string, target: string, opts: { progress?: (pct: number) => void; mode?: number } = {}): RunningConversion {
  let child: ReturnType<typeof spawn> | undefined;
  let stopped = false;
  let claimed = false;
  const done = (async () => {
    const refused = await qcow2OutsideReferences(source);
    if (refused) throw new Qcow2ConvertError(refused);
    if (stopped) throw new Qcow2ConvertStopped('the conversion was stopped');
    // Claimed before qemu-img runs (O_EXCL): never over a file, and never two conversions to one.
    try {
      closeSync(openSync(target, 'wx', opts.mode ?? 0o600));
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code;
      throw new Qcow2ConvertError(code === 'EEXIST' ? `${target} already exists; move it away to convert again` : `${target} cannot be created (${code ?? (e as Error).message})`);
    }
    claimed = true;
    await new Promise<void>((resolve, reject) => {
      const c = spawn(QEMU_IMG, ['convert', '-p', '-f', 'qcow2', '-O', 'raw', source, target], { stdio: ['ignore', 'pipe', 'pipe'] });
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
        else reject(new Qcow2ConvertError(signal ? `qemu-img was stopped (${signal})` : `qemu-img could not convert it: ${stderr.trim().split('\n').pop() ?? `exit ${code}`}`));
      });
    });
  })().catch((e: unknown) => {
    if (claimed) rmSync(target, { force: true }); // ours: claimed above
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

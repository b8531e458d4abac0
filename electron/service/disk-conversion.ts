// The app's qcow2 -> raw conversion (the wizard offers it when a disk turns out to be qcow2): runs
// `qemu-img convert -p -f qcow2 -O raw SRC DST` — the very command the refusal names
// (disk-image.ts qcow2ConvertCommand) — in a child process, never over an existing file, and
// reports its progress as events ('disk-conversion') while it runs. A failed or cancelled
// conversion removes the partial raw file it made. qemu-img is Debian's qemu-utils.
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { closeSync, existsSync, openSync, rmSync } from 'node:fs';
import type { DiskConversionDto } from './api.ts';
import { ConfigError, checkDisk } from '../vmm/config/vm-config.ts';
import { checkDiskImage, isQcow2, qcow2RawPath } from '../vmm/devices/virtio/disk-image.ts';

export const QEMU_IMG = process.env.UNHALT_QEMU_IMG ?? 'qemu-img';

export class DiskConversions {
  private readonly running = new Map<string, { dto: DiskConversionDto; kill(): void }>();
  private readonly emit: (c: DiskConversionDto) => void;

  constructor(emit: (c: DiskConversionDto) => void) {
    this.emit = emit;
  }

  /**
   * Starts converting the qcow2 image at `source`; resolves once qemu-img runs. `confine` checks a
   * path against the service's allowed folders (the source as it is, the target as a new file).
   */
  start(rawSource: unknown, confine: { existing(path: string): void; created(path: string): void }): DiskConversionDto {
    const source = checkDisk({ path: rawSource, readonly: true }).path;
    // The source: a readable image file where a guest may be given files from, and a qcow2.
    try {
      checkDiskImage({ path: source, readonly: true }, confine.existing);
    } catch (e) {
      if (!(e instanceof ConfigError) || !/is a qcow2 image/.test(e.message)) throw e;
    }
    if (!isQcow2(source)) throw new ConfigError(`disk ${source}: is not a qcow2 image; there is nothing to convert`);
    const target = qcow2RawPath(source);
    checkDisk({ path: target });
    confine.created(target);
    if ([...this.running.values()].some((r) => r.dto.target === target && r.dto.state === 'running')) {
      throw new ConfigError(`disk ${target}: a conversion to it is already running`);
    }
    // Claimed before qemu-img runs (O_EXCL): never over a file, and never two conversions to one.
    try {
      closeSync(openSync(target, 'wx', 0o644));
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'EEXIST') throw new ConfigError(`disk ${target}: already exists; pick it as the disk, or move it away to convert again`);
      throw new ConfigError(`disk ${target}: cannot be created (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`);
    }
    const dto: DiskConversionDto = { id: randomUUID(), source, target, state: 'running', percent: 0 };
    let child;
    try {
      child = spawn(QEMU_IMG, ['convert', '-p', '-f', 'qcow2', '-O', 'raw', source, target], { stdio: ['ignore', 'pipe', 'pipe'] });
    } catch (e) {
      rmSync(target, { force: true });
      throw e;
    }
    const entry = { dto, kill: () => child.kill('SIGTERM') };
    this.running.set(dto.id, entry);
    let stderr = '';
    const progress = new QemuImgProgress();
    child.stdout.setEncoding('utf8').on('data', (text: string) => {
      const pct = progress.feed(text);
      if (pct !== undefined) this.update(dto, { percent: pct });
    });
    child.stderr.setEncoding('utf8').on('data', (t: string) => { stderr = (stderr + t).slice(-2000); });
    const finish = (ok: boolean, message?: string) => {
      if (dto.state !== 'running') return;
      if (!ok && existsSync(target)) rmSync(target, { force: true }); // ours: claimed above
      this.running.delete(dto.id);
      this.update(dto, ok ? { state: 'done', percent: 100 } : { state: 'failed', message: message ?? 'qemu-img failed' });
    };
    child.on('error', (e) => finish(false, (e as NodeJS.ErrnoException).code === 'ENOENT'
      ? `${QEMU_IMG} is not installed (Debian: apt install qemu-utils); or run the command yourself`
      : `qemu-img could not run: ${e.message}`));
    child.on('close', (code, signal) => finish(code === 0, signal ? `qemu-img was stopped (${signal})` : `qemu-img failed: ${stderr.trim().split('\n').pop() ?? `exit ${code}`}`));
    return { ...dto };
  }

  /** Stops every running conversion (the service closes); their partial files are removed. */
  stopAll(): void {
    for (const r of this.running.values()) r.kill();
  }

  private update(dto: DiskConversionDto, patch: Partial<DiskConversionDto>): void {
    Object.assign(dto, patch);
    this.emit({ ...dto });
  }
}

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

// The app's qcow2 -> raw conversion (the wizard offers it when a disk turns out to be qcow2): the
// one conversion (vmm/image/qcow2-convert.ts: the very command the refusal names, never over an
// existing file, a qcow2 that refers to other files refused), with its progress reported as
// events ('disk-conversion') while it runs. A failed or cancelled conversion removes the partial
// raw file it made.
import { randomUUID } from 'node:crypto';
import { existsSync } from 'node:fs';
import { convertQcow2ToRaw, Qcow2ConvertError } from '../vmm/image/qcow2-convert.ts';
import type { DiskConversionDto } from './api.ts';
import { ConfigError, checkDisk } from '../vmm/config/vm-config.ts';
import { checkDiskImage, isQcow2, qcow2RawPath } from '../vmm/devices/virtio/disk-image.ts';

export { QEMU_IMG, QemuImgProgress } from '../vmm/image/qcow2-convert.ts';

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
    // Said now, before anything runs (the conversion claims the file with O_EXCL too, for a race).
    if (existsSync(target)) throw new ConfigError(`disk ${target}: already exists; pick it as the disk, or move it away to convert again`);
    const dto: DiskConversionDto = { id: randomUUID(), source, target, state: 'running', percent: 0 };
    const run = convertQcow2ToRaw(source, target, { mode: 0o644, progress: (percent) => this.update(dto, { percent }) });
    this.running.set(dto.id, { dto, kill: run.stop });
    run.done.then(() => this.finish(dto, { state: 'done', percent: 100 }), (e: unknown) => {
      const m = (e as Error).message;
      this.finish(dto, { state: 'failed', message: e instanceof Qcow2ConvertError && !/^qemu-img|is not installed/.test(m) ? `${source}: ${m}` : m });
    });
    return { ...dto };
  }

  private finish(dto: DiskConversionDto, patch: Partial<DiskConversionDto>): void {
    this.running.delete(dto.id);
    this.update(dto, patch);
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

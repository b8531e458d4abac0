// The distribution cloud image the import's checks use (native/guest/linux/build-cloud-image.mjs:
// Debian packages only, mmdebstrap as root; cached), built on first use. CI runs as root.
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { scaled } from './time-scale.ts';

export const CLOUD_IMAGE = fileURLToPath(new URL('../../assets/guests/linux/cloud-image.raw', import.meta.url));
const STAMP = CLOUD_IMAGE.replace(/\.raw$/, '.json');
const BUILD = fileURLToPath(new URL('../../native/guest/linux/build-cloud-image.mjs', import.meta.url));

/** What the build recorded: the kernel and initrd in /boot, the grub.cfg command line, the root's identities. */
export interface CloudImageStamp { vmlinuz: string; initrd: string; cmdline: string; rootPartUuid: string; rootFsUuid: string }

/** Builds the image if it is not there yet (as root), and answers its stamp. */
export function ensureCloudImage(): CloudImageStamp {
  if (!existsSync(CLOUD_IMAGE) || !existsSync(STAMP)) {
    const r = spawnSync(process.execPath, [BUILD], { stdio: 'inherit', timeout: scaled(900_000) });
    if (r.status !== 0) throw new Error(`the cloud image could not be built (node ${BUILD}, as root: mmdebstrap)`);
  }
  return JSON.parse(readFileSync(STAMP, 'utf8')) as CloudImageStamp;
}

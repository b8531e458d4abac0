// The built-in guests and where their build output lives.
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

export const GUEST_DIR = fileURLToPath(new URL('../../assets/guests/', import.meta.url));
export const PROBE_KERNEL = `${GUEST_DIR}probe.elf`;

export function probeBuilt(): boolean {
  return existsSync(PROBE_KERNEL);
}

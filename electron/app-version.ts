// Unhalt's version as package.json gives it, for records and reports ('unknown' if it cannot be read).
import { readFileSync } from 'node:fs';

export function appVersion(): string {
  try {
    return (JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version?: string }).version ?? 'unknown';
  } catch {
    return 'unknown';
  }
}

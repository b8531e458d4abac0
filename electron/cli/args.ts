// Shared option parsing: node:util parseArgs with one-line errors.
import { parseArgs, type ParseArgsConfig } from 'node:util';

export const EXIT_CODES = { ok: 0, badInput: 1, vmFailed: 2, timeout: 124 } as const;

export class UsageError extends Error {
  override name = 'UsageError';
}

export function parse<T extends NonNullable<ParseArgsConfig['options']>>(argv: string[], options: T) {
  try {
    return parseArgs({ args: argv, options, strict: true, allowPositionals: false });
  } catch (e) {
    throw new UsageError((e as Error).message.split('\n')[0]!);
  }
}

export function say(line: string): void {
  process.stderr.write(`unhalt: ${line}\n`);
}

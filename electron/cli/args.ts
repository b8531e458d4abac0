// Shared option parsing: node:util parseArgs with one-line errors, plus the rules parseArgs
// leaves to us: `--help`/`-h` on every command, negative numbers as option values (parseArgs
// calls `--cpus -1` "ambiguous"; the number's own check then names the range), and a
// single-valued option given twice is refused rather than silently taking the last.
import { parseArgs, type ParseArgsConfig } from 'node:util';

export const EXIT_CODES = { ok: 0, badInput: 1, vmFailed: 2, timeout: 124 } as const;

/**
 * 128 + the signal's number, as shells report a process a signal ended: SIGHUP 129 (the terminal
 * went away), SIGINT 130, SIGTERM 143. Each one stops a command cleanly first.
 */
export const SIGNAL_EXIT_CODES = { SIGHUP: 129, SIGINT: 130, SIGTERM: 143 } as const;

export class UsageError extends Error {
  override name = 'UsageError';
}

type Options = NonNullable<ParseArgsConfig['options']>;

const HELP = { help: { type: 'boolean', short: 'h' } } as const;
const NEGATIVE_NUMBER = /^-\d/;

/** True if the command line asks for help (`--help` or `-h` as an option, not as some option's value). */
export function wantsHelp(argv: string[], options: Options): boolean {
  const { tokens } = parseArgs({ args: joinNegativeValues(argv, options), options: { ...options, ...HELP }, strict: false, allowPositionals: true, tokens: true });
  return tokens.some((t) => t.kind === 'option' && t.name === 'help');
}

export function parse<T extends Options>(argv: string[], options: T) {
  let parsed;
  try {
    parsed = parseArgs({ args: joinNegativeValues(argv, options), options, strict: true, allowPositionals: false, tokens: true });
  } catch (e) {
    throw new UsageError((e as Error).message.split('\n')[0]!);
  }
  const seen = new Set<string>();
  for (const t of parsed.tokens) {
    if (t.kind !== 'option' || options[t.name]?.multiple) continue;
    if (seen.has(t.name)) throw new UsageError(`--${t.name} is given more than once; give it once`);
    seen.add(t.name);
  }
  return { values: parsed.values, positionals: parsed.positionals };
}

/** `--cpus -1` -> `--cpus=-1` for string options, so a negative value reaches its range check. */
function joinNegativeValues(argv: string[], options: Options): string[] {
  const out: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    if (a === '--') { out.push(...argv.slice(i)); break; }
    const next = argv[i + 1];
    if (a.startsWith('--') && !a.includes('=') && options[a.slice(2)]?.type === 'string' && next !== undefined && NEGATIVE_NUMBER.test(next)) {
      out.push(`${a}=${next}`);
      i++;
    } else {
      out.push(a);
    }
  }
  return out;
}

const PREFIX = 'unhalt: ';

/** One line on stderr, prefixed once (a message that already carries the prefix keeps one). */
export function say(line: string): void {
  let text = line;
  while (text.startsWith(PREFIX)) text = text.slice(PREFIX.length);
  process.stderr.write(`${PREFIX}${text}\n`);
}

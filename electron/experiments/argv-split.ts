// A command's text as an argument vector, for `--host-cmd 'CMD'` (and any surface that takes a
// command as one line). Deliberately small and shell-LIKE, not a shell: the vector is what is
// stored and what is run (spawn without a shell), so nothing the text says is ever interpreted.
//
// The rules (docs/experiments.md, "The user's own benchmark"):
// - unquoted whitespace separates arguments;
// - '...' keeps everything inside as it is (no escapes inside single quotes, as in sh);
// - "..." keeps everything inside, except that \" and \\ are a quote and a backslash;
// - outside quotes, a backslash takes the next character as it is (\  is a space in an argument);
// - nothing else: no $VAR, no ~, no globs, no ; | & > < (they are plain characters of an
//   argument, and a program that wants a shell can be `sh -c '...'`, visibly).
// Refused, in one line: an unbalanced quote, a trailing backslash, an empty command, NUL or
// other control characters than tab (a command is one line).
import { ExperimentError } from './spec-error.ts';

export const MAX_ARGS = 256;
export const MAX_COMMAND_LENGTH = 4096;

export function splitCommand(text: string): string[] {
  if (text.length > MAX_COMMAND_LENGTH) throw new ExperimentError(`the command is ${text.length} characters long; at most ${MAX_COMMAND_LENGTH} are allowed`);
  if (/[\x00-\x08\x0a-\x1f\x7f]/.test(text)) throw new ExperimentError('the command must be one line without control characters (tabs and spaces separate arguments)');
  const args: string[] = [];
  let cur = '';
  let inArg = false; // an argument has begun (so '' is an empty argument, not nothing)
  let quote: "'" | '"' | undefined;
  let quoteAt = 0;
  for (let i = 0; i < text.length; i++) {
    const ch = text[i]!;
    if (quote === "'") {
      if (ch === "'") quote = undefined;
      else cur += ch;
    } else if (quote === '"') {
      if (ch === '"') quote = undefined;
      else if (ch === '\\' && (text[i + 1] === '"' || text[i + 1] === '\\')) cur += text[++i];
      else cur += ch;
    } else if (ch === "'" || ch === '"') {
      quote = ch;
      quoteAt = i;
      inArg = true;
    } else if (ch === '\\') {
      if (i + 1 >= text.length) throw new ExperimentError('the command ends with a backslash: escape it as \\\\ or quote it');
      cur += text[++i];
      inArg = true;
    } else if (ch === ' ' || ch === '\t') {
      if (inArg) args.push(cur);
      cur = '';
      inArg = false;
    } else {
      cur += ch;
      inArg = true;
    }
  }
  if (quote) throw new ExperimentError(`the command has an unbalanced ${quote === '"' ? 'double' : 'single'} quote (at character ${quoteAt + 1}): close it`);
  if (inArg) args.push(cur);
  if (args.length === 0) throw new ExperimentError('the command is empty: give the program to run and its arguments');
  if (args.length > MAX_ARGS) throw new ExperimentError(`the command has ${args.length} arguments; at most ${MAX_ARGS} are allowed`);
  return args;
}

/** The vector as text that splitCommand reads back to the same vector (for reports and confirmations). */
export function joinCommand(argv: readonly string[]): string {
  return argv.map((a) => (a !== '' && /^[A-Za-z0-9_@%+=:,./-]+$/.test(a) ? a : `'${a.replace(/'/g, `'\\''`)}'`)).join(' ');
}

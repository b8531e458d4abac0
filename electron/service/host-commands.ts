// Host commands the user confirmed. A host command runs a program on the user's machine, so the
// API (whose token a browser tab in host mode holds) never runs one it was merely sent: the UI
// shows the argument vector in full, the user confirms it, and only then does the UI call
// confirmHostCommand(argv), which stores it here under an id; an experiment from the API names
// that id (bench.hostCmdId) and runs the stored vector. A command typed into the CLI is its
// user's own (the shell already lets them run anything) and saving a workload with one stores
// it here too, so the app may reuse it.
//
// The file: UNHALT_HOME/host-commands.json, { commands: [{ id, argv, confirmedAt }] }, 0600. The
// id is derived from the vector (sha256, 16 hex digits), so confirming the same command again
// gives the same id. A damaged file counts as empty (nothing is confirmed), never as a crash.
import { createHash } from 'node:crypto';
import { dirname } from 'node:path';
import { writeFileAtomic } from './atomic-file.ts';
import { makeDirs } from './make-dir.ts';
import { checkArgv } from '../experiments/user-bench.ts';
import { readHomeFile } from './home-file.ts';

export interface ConfirmedCommand {
  id: string;
  argv: string[];
  confirmedAt: number;
}

/** The id a vector is stored under. */
export function hostCommandId(argv: readonly string[]): string {
  return createHash('sha256').update(JSON.stringify(argv)).digest('hex').slice(0, 16);
}

/**
 * The confirmed commands. A file that cannot be read (no regular file, too big, not JSON) confirms
 * nothing; `forWrite` says so instead, so a new confirmation never writes over what it held.
 */
function load(file: string, forWrite = false): ConfirmedCommand[] {
  try {
    const parsed = JSON.parse(readHomeFile(file, 'the confirmed host commands file', 1024 * 1024) ?? '{}') as { commands?: unknown };
    if (!Array.isArray(parsed.commands)) return [];
    // Only entries whose id still matches their vector: a hand-edited vector is no confirmation.
    return parsed.commands.filter((c): c is ConfirmedCommand => {
      try {
        return typeof c === 'object' && c !== null && c.id === hostCommandId(checkArgv(c.argv));
      } catch {
        return false;
      }
    });
  } catch (e) {
    if (forWrite) throw new HostCommandsFileError(`${file} cannot be read (${(e as Error).message}); move it away and confirm the command again (nothing was written)`);
    return [];
  }
}

/** The confirmed commands' file is damaged: a confirmation is refused rather than written over it. */
export class HostCommandsFileError extends Error {
  override name = 'HostCommandsFileError';
}

/** Stores a confirmed vector (checked as any host command); returns its id. */
export function confirmHostCommand(file: string, rawArgv: unknown): ConfirmedCommand {
  const argv = checkArgv(rawArgv);
  const id = hostCommandId(argv);
  const commands = load(file, true);
  const known = commands.find((c) => c.id === id);
  if (known) return known;
  const entry = { id, argv, confirmedAt: Date.now() };
  makeDirs(dirname(file), 0o700);
  writeFileAtomic(file, `${JSON.stringify({ commands: [...commands, entry] }, null, 2)}\n`);
  return entry;
}

/** The confirmed vector of that id, or undefined. */
export function confirmedHostCommand(file: string, id: string): ConfirmedCommand | undefined {
  return load(file).find((c) => c.id === id);
}

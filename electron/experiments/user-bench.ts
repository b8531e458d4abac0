// The user's own benchmark: a program run on the host while the VM is up and ready (a load
// generator against a forwarded port) or in the guest through its agent (a benchmark of the
// guest's own), what the console prints when the guest's service is up, and the regular
// expression that reads the figure from the program's output. Pure: the checks every surface
// shares (spec.ts calls them) and the reading of a run's output. The command is an argument
// vector (argv-split.ts), run without a shell (backend-user-cmd.ts).
import { MAX_ARGS, MAX_COMMAND_LENGTH, joinCommand } from './argv-split.ts';
import { ExperimentError } from './spec-error.ts';

export interface UserBenchmark {
  /** The program and its arguments, run as they are on the host (no shell). One of hostCmd and guestCmd. */
  hostCmd?: string[];
  /** Where the command came from the API: the id its confirmation was stored under (host-commands.ts). */
  hostCmdId?: string;
  /** The program and its arguments, run in the guest by its agent (`exec`, no shell). */
  guestCmd?: string[];
  /** What the guest's console prints when its service is up; the command starts after it. Absent: as soon as the VM runs. */
  ready?: string;
  /** A regular expression with exactly one capture group: the figure, in the command's stdout (a guest command's stdout and stderr). */
  metric: string;
  /** Larger figures are better (a rate); default: smaller are (a time). */
  higherIsBetter?: true;
  /** The figure's unit, for the tables. */
  unit?: string;
}

const MAX_REGEX = 512;
const BENCH_FIELDS = new Set(['hostCmd', 'hostCmdId', 'guestCmd', 'ready', 'metric', 'higherIsBetter', 'unit']);

/** Checks a benchmark from any surface (shape, the regular expressions); returns a clean copy. */
export function validateUserBenchmark(raw: unknown): UserBenchmark {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) throw new ExperimentError('bench must be an object { hostCmd or guestCmd, metric, ready?, higherIsBetter?, unit? }');
  const r = raw as Record<string, unknown>;
  for (const k of Object.keys(r)) if (!BENCH_FIELDS.has(k)) throw new ExperimentError(`unknown bench field "${k.slice(0, 40)}"; valid: ${[...BENCH_FIELDS].join(', ')}`);
  if ((r.hostCmd === undefined) === (r.guestCmd === undefined)) throw new ExperimentError('a benchmark runs one command: give a host command (--host-cmd) or a guest command (--guest-cmd), not both or neither');
  const metric = metricRegex(r.metric) && String(r.metric);
  const b: UserBenchmark = r.hostCmd !== undefined ? { hostCmd: checkArgv(r.hostCmd, 'host'), metric } : { guestCmd: checkArgv(r.guestCmd, 'guest'), metric };
  if (r.hostCmdId !== undefined) {
    if (!b.hostCmd) throw new ExperimentError('hostCmdId goes with a host command; a guest command needs no confirmation');
    if (typeof r.hostCmdId !== 'string' || !/^[0-9a-f]{16}$/.test(r.hostCmdId)) throw new ExperimentError('hostCmdId must be the id confirmHostCommand returned');
    b.hostCmdId = r.hostCmdId;
  }
  if (r.ready !== undefined) {
    compile(r.ready, '--ready');
    b.ready = r.ready as string;
  }
  if (r.higherIsBetter !== undefined) {
    if (typeof r.higherIsBetter !== 'boolean') throw new ExperimentError('higherIsBetter must be true or false');
    if (r.higherIsBetter) b.higherIsBetter = true;
  }
  if (r.unit !== undefined) b.unit = checkUnit(r.unit);
  return b;
}

/** A figure's unit for the tables: 1 to 24 printable characters (µ included). */
export function checkUnit(unit: unknown): string {
  if (typeof unit !== 'string' || !/^[\x20-\x7e\u00b5]{1,24}$/.test(unit)) throw new ExperimentError('the unit (--unit) must be 1 to 24 printable characters, such as ms or req/s');
  return unit;
}

/** The form of a name a benchmark is saved under (saved-workloads.ts also refuses built-in names). */
export const SAVE_NAME = /^[a-z0-9][a-z0-9_-]{0,31}$/;
export const SAVE_NAME_RULE = 'use up to 32 lower-case letters, digits, - and _ (starting with a letter or digit)';

/** An argument vector as stored: 1 to MAX_ARGS strings, none with NUL, of bounded total length. */
export function checkArgv(v: unknown, where: 'host' | 'guest' = 'host'): string[] {
  const what = `the ${where} command`;
  if (!Array.isArray(v) || v.length === 0 || v.some((a) => typeof a !== 'string')) throw new ExperimentError(`${what} must be a list of one or more strings: the program, then its arguments`);
  if (v.length > MAX_ARGS) throw new ExperimentError(`${what} has ${v.length} arguments; at most ${MAX_ARGS} are allowed`);
  const argv = v as string[];
  if (argv[0] === '') throw new ExperimentError(`${what} names no program: its first word is empty`);
  if (argv.some((a) => a.includes('\0'))) throw new ExperimentError(`${what} contains a NUL character, which no program argument can hold`);
  // A guest command travels as UTF-8 in one agent line (exec.c): bounded in bytes too.
  const utf8 = new TextEncoder();
  if (argv.reduce((n, a) => n + utf8.encode(a).length + 1, 0) > MAX_COMMAND_LENGTH * 2) throw new ExperimentError(`${what} is too long`);
  return [...argv];
}

/** The advisor's goal for the user's benchmark: its metric's direction. */
export function benchGoal(bench: UserBenchmark): 'throughput' | 'latency-p50' {
  return bench.higherIsBetter ? 'throughput' : 'latency-p50';
}

/** Where the benchmark's command runs, and the command. */
export function benchCommandOf(b: UserBenchmark): { where: 'host' | 'guest'; argv: string[] } {
  return b.guestCmd ? { where: 'guest', argv: b.guestCmd } : { where: 'host', argv: b.hostCmd! };
}

/** The benchmark in one line, for the reports (bench and tune). */
export function describeBench(b: UserBenchmark): string {
  const { where, argv } = benchCommandOf(b);
  const after = b.ready ? ` after the console printed /${b.ready}/` : where === 'guest' ? ' once the guest\'s agent was ready' : ' once the VM runs';
  return `${where} command ${joinCommand(argv)}${after}; metric /${b.metric}/${b.unit ? ` in ${b.unit}` : ''}, ${b.higherIsBetter ? 'higher' : 'lower'} is better`;
}

/** --metric's regular expression: it must compile and have exactly one capture group. */
export function metricRegex(v: unknown): RegExp {
  const re = compile(v, '--metric');
  // A match of the empty string against an always-matching alternative tells the group count.
  const groups = new RegExp(`${re.source}|`).exec('')!.length - 1;
  if (groups !== 1) throw new ExperimentError(`--metric must have exactly one capture group (the figure), such as 'latency_ms=([0-9.]+)'; it has ${groups}`);
  return re;
}

function compile(v: unknown, what: string): RegExp {
  if (typeof v !== 'string' || v === '') throw new ExperimentError(`${what} must be a regular expression (text)`);
  if (v.length > MAX_REGEX) throw new ExperimentError(`${what} is ${v.length} characters long; at most ${MAX_REGEX} are allowed`);
  try {
    return new RegExp(v);
  } catch (e) {
    throw new ExperimentError(`${what} is not a valid regular expression: ${(e as Error).message.replace(/^Invalid regular expression: /, '')}`);
  }
}

/**
 * The figure from the command's stdout: the LAST match (a benchmark that prints progress ends
 * with its summary), as a number; otherwise the reason, in one line, for a failed run.
 */
export function readMetric(stdout: string, metric: string, where: 'host' | 'guest' = 'host'): { value: number } | { error: string } {
  const re = new RegExp(metricRegex(metric).source, 'g');
  let last: RegExpExecArray | undefined;
  for (let m = re.exec(stdout); m; m = re.exec(stdout)) {
    last = m;
    if (m[0] === '') re.lastIndex++; // an empty match would not move on
  }
  if (!last) return { error: `the ${where} command's output has no match for --metric /${metric}/ (${stdout.length ? `last line: "${lastLine(stdout)}"` : 'it printed nothing'})` };
  const text = (last[1] ?? '').trim();
  const value = Number(text);
  if (text === '' || !Number.isFinite(value)) return { error: `--metric /${metric}/ matched "${text.slice(0, 40)}", which is not a number` };
  return { value };
}

/** The last non-empty line, clipped and printable (for one-line failure reasons). */
export function lastLine(text: string): string {
  const line = text.split('\n').map((l) => l.trim()).filter(Boolean).at(-1) ?? '';
  const printable = line.replace(/[^\x20-\x7e]/g, '?');
  return printable.length > 120 ? `${printable.slice(0, 120)}…` : printable;
}

// The user's benchmarks saved by name (`unhalt bench ... --save-workload NAME`), reused with
// `--workload NAME` by later experiments and the advisor. One file each,
// UNHALT_HOME/workloads/NAME.json: { name, bench, savedAt }. A saved name never shadows a
// built-in workload (any guest's), so `--workload timer` always means ours. The command inside
// is stored as confirmed too (host-commands.ts): saving is the user's confirmation.
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { writeFileAtomic } from '../service/atomic-file.ts';
import { makeDirs } from '../service/make-dir.ts';
import { GUEST_CMD_WORKLOAD, HOST_CMD_WORKLOAD } from './spec.ts';
import { ExperimentError } from './spec-error.ts';
import { SAVE_NAME as NAME, SAVE_NAME_RULE, validateUserBenchmark, type UserBenchmark } from './user-bench.ts';
import { LINUX_WORKLOADS, WORKLOADS } from './workloads.ts';
import { readHomeFile } from '../service/home-file.ts';


/** Whether `name` is one of ours (any guest's workload, or the user commands' labels). */
export function isBuiltInWorkload(name: string): boolean {
  return name === HOST_CMD_WORKLOAD || name === GUEST_CMD_WORKLOAD || [...WORKLOADS, ...LINUX_WORKLOADS].some((w) => w.name === name);
}

/** A name a workload may be saved under; the reason in one line otherwise. */
export function checkSaveName(name: string): string {
  if (!NAME.test(name)) throw new ExperimentError(`--save-workload "${name.slice(0, 40)}": ${SAVE_NAME_RULE}`);
  if (isBuiltInWorkload(name)) throw new ExperimentError(`--save-workload ${name}: that is a built-in workload's name; choose another (a saved workload never shadows one of ours)`);
  return name;
}

export function saveWorkload(dir: string, name: string, bench: UserBenchmark): string {
  checkSaveName(name);
  makeDirs(dir, 0o700);
  const file = join(dir, `${name}.json`);
  writeFileAtomic(file, `${JSON.stringify({ name, bench, savedAt: Date.now() }, null, 2)}\n`);
  return file;
}

/** The saved benchmark of that name, or undefined when there is none (a damaged one is said). */
export function loadWorkload(dir: string, name: string): UserBenchmark | undefined {
  if (!NAME.test(name) || isBuiltInWorkload(name)) return undefined;
  const file = join(dir, `${name}.json`);
  try {
    const text = readHomeFile(file, 'the saved workload', 1024 * 1024);
    if (text === undefined) return undefined;
    return validateUserBenchmark((JSON.parse(text) as { bench?: unknown }).bench);
  } catch (e) {
    throw new ExperimentError(`the saved workload ${name} (${file}) cannot be read: ${(e as Error).message}; save it again with --save-workload ${name}`);
  }
}

/** The names saved, for messages. */
export function savedWorkloadNames(dir: string): string[] {
  try {
    return readdirSync(dir).filter((f) => f.endsWith('.json')).map((f) => f.slice(0, -5)).filter((n) => NAME.test(n)).sort();
  } catch {
    return [];
  }
}

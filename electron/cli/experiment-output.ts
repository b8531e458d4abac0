// The tail `unhalt bench` and `unhalt tune` share: an experiment's id, its report shown on stdout or
// written through to the user's --output file, and its record kept under UNHALT_HOME/experiments.
// The report is shown even when keeping the record fails; each failure is said in one line.
import { randomUUID } from 'node:crypto';
import { join } from 'node:path';
import { writeFileAtomic } from '../service/atomic-file.ts';
import { describeIoError } from '../service/io-errors.ts';
import { makeDirs } from '../service/make-dir.ts';
import { OutputError, writeOutputFile } from '../service/output-file.ts';
import { homeLayout, unhaltHome } from '../service/paths.ts';
import { say } from './args.ts';
import { flushStdout, stdoutProblem } from './stdout.ts';

/** A sortable, unique record id: the time, the kind (if any), a random tail. */
export function experimentId(kind?: string): string {
  return `${new Date().toISOString().replace(/[:.]/g, '-')}${kind ? `-${kind}` : ''}-${randomUUID().slice(0, 8)}`;
}

/** Writes `text` through to `output`, or to stdout; false (and said, or left to main for stdout) when it could not. */
export async function deliverReport(text: string, output: string | undefined, what: string): Promise<boolean> {
  if (output) {
    try {
      writeOutputFile(output, text, what);
      return true;
    } catch (e) {
      if (!(e instanceof OutputError)) throw e;
      say(e.message);
      return false;
    }
  }
  process.stdout.write(text);
  await flushStdout();
  return !stdoutProblem(); // main says it
}

/** Keeps `record` as UNHALT_HOME/experiments/ID.json and says where (`noun saved: FILE`) or why not. */
export function keepRecord(id: string, record: object, noun: string): boolean {
  const dir = homeLayout(unhaltHome()).experiments;
  const file = join(dir, `${id}.json`);
  try {
    makeDirs(dir, 0o700);
    writeFileAtomic(file, `${JSON.stringify(record, null, 2)}\n`);
    say(`${noun} saved: ${file}`);
    return true;
  } catch (e) {
    say(`the ${noun} was not saved in ${dir}: ${describeIoError(e)}`);
    return false;
  }
}

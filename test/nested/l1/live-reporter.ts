// A vitest reporter for the runs inside L1: one line per check as it starts and as it ends, at
// once (the default reporter shows a file's checks only when the whole file is done, and under
// emulation a file takes many minutes). The lane outside prints these lines as its progress.
import { readFileSync } from 'node:fs';
import type { Reporter, TestCase, TestModule } from 'vitest/node';
import { repoPath as short } from '../inner-report.ts';

/** L1's uptime, the clock of its init's phase lines too (uptime_s=). */
const uptime = () => readFileSync('/proc/uptime', 'utf8').split('.')[0];

export default class LiveReporter implements Reporter {
  onTestModuleStart(m: TestModule): void {
    process.stdout.write(`@l1 file-start ${short(m.moduleId)} uptime_s=${uptime()}\n`);
  }

  onTestCaseReady(t: TestCase): void {
    process.stdout.write(`@l1 check-start ${short(t.module.moduleId)} > ${t.fullName} uptime_s=${uptime()}\n`);
  }

  onTestCaseResult(t: TestCase): void {
    const r = t.result();
    const why = r.state === 'failed' ? `: ${(r.errors?.[0]?.message ?? '').split('\n')[0]!.slice(0, 300)}` : '';
    process.stdout.write(`@l1 check-${r.state} ${short(t.module.moduleId)} > ${t.fullName} (${((t.diagnostic()?.duration ?? 0) / 1000).toFixed(1)} s)${why}\n`);
  }
}

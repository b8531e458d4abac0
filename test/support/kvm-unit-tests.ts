// kvm-unit-tests for the tests and benches: the product's reader and runner
// (electron/kvm-unit-tests/), with `unhalt` started from this checkout's bin/unhalt.mjs.
import { runUnderUnhalt as run, type RunResult, type UnhaltRunOptions } from '../../electron/kvm-unit-tests/runner.ts';
import type { UnitTest } from '../../electron/kvm-unit-tests/suite.ts';
import { UNHALT_BIN } from './cli.ts';

export { judge, outOfScope, parseUnittestsCfg, unitTests, type UnitTest, type Verdict } from '../../electron/kvm-unit-tests/suite.ts';
export { QEMU_CPU, runUnderQemu, type RunResult } from '../../electron/kvm-unit-tests/runner.ts';

/** Runs one test under this checkout's `unhalt` CLI; `timeoutMs` already scaled for this host. */
export function runUnderUnhalt(suiteDir: string, t: UnitTest, timeoutMs: number, opts: Omit<UnhaltRunOptions, 'cli'> = {}): Promise<RunResult> {
  return run(suiteDir, t, timeoutMs, { ...opts, cli: [process.execPath, UNHALT_BIN] });
}

// `unhalt selftest`: the knobs' mechanisms and kvm-unit-tests on this host's own KVM, and a report
// to share (docs/cli.md). What needs hardware no build machine has is checked where users run it.
import { spawnSync } from 'node:child_process';
import { appVersion } from '../app-version.ts';
import { OutputError, checkOutputPath } from '../service/output-file.ts';
import { hostFacts } from '../selftest/host-facts.ts';
import { runKnobChecks } from '../selftest/knob-checks.ts';
import { formatReport, verdictOf, type SelftestReport } from '../selftest/report.ts';
import { runSuiteChecks, suiteFolder, type SuiteReport } from '../selftest/suite-checks.ts';
import { unitTests } from '../kvm-unit-tests/suite.ts';
import { VMEXIT_ALL } from '../kvm-unit-tests/vmexit.ts';
import { hostSpeed } from '../vmm/host-speed.ts';
import { hostVirtualization } from '../vmm/host.ts';
import { describeKvmAccess, kvmAccess } from '../vmm/kvm-access.ts';
import { EXIT_CODES, SIGNAL_EXIT_CODES, UsageError, parse, say } from './args.ts';
import { deliverReport } from './experiment-output.ts';
import { onStopSignals, type StopSignal } from './stop-signals.ts';

export const SELFTEST_OPTIONS = {
  'kvm-unit-tests': { type: 'string' },
  'no-suite': { type: 'boolean' },
  'no-qemu': { type: 'boolean' },
  only: { type: 'string' },
  exits: { type: 'string' },
  format: { type: 'string', default: 'md' },
  output: { type: 'string' },
} as const;

function qemuInstalled(): boolean {
  return spawnSync('qemu-system-x86_64', ['--version'], { stdio: 'ignore' }).status === 0;
}

export async function selftestCommand(argv: string[]): Promise<number> {
  let values: ReturnType<typeof parse<typeof SELFTEST_OPTIONS>>['values'];
  let exits: string[] | undefined;
  try {
    ({ values } = parse(argv, SELFTEST_OPTIONS));
    if (!['md', 'json'].includes(values.format)) throw new UsageError(`--format must be md or json, got "${values.format}"`);
    if (values['no-suite'] && (values['kvm-unit-tests'] || values.only || values.exits)) throw new UsageError('--no-suite runs no kvm-unit-tests: drop --kvm-unit-tests, --only and --exits, or --no-suite');
    exits = values.exits === undefined ? undefined : values.exits === 'none' ? [] : values.exits.split(',').map((e) => e.trim()).filter(Boolean);
    const unknownExit = exits?.find((e) => !(VMEXIT_ALL as readonly string[]).includes(e));
    if (unknownExit !== undefined) throw new UsageError(`--exits: "${unknownExit.slice(0, 30)}" is not one of vmexit's exits (${VMEXIT_ALL.join(', ')}), or none`);
    // Refused now, not after minutes of runs: a report path that can never be written.
    if (values.output) checkOutputPath(values.output, 'the selftest report');
  } catch (e) {
    if (!(e instanceof UsageError) && !(e instanceof OutputError)) throw e;
    say(e.message);
    return EXIT_CODES.badInput;
  }
  const access = kvmAccess();
  if (!access.ok) {
    say(`selftest needs KVM: ${describeKvmAccess(access)}`);
    return EXIT_CODES.badInput;
  }
  const startedAt = new Date().toISOString().replace(/\.\d+Z$/, 'Z');
  const host = hostFacts();
  const progress = (line: string) => say(`selftest: ${line}`);
  // A stop signal aborts whatever runs; the abort's reason is the signal, the one record of it.
  const abort = new AbortController();
  const stoppedBy = (): StopSignal | undefined => (abort.signal.aborted ? (abort.signal.reason as StopSignal) : undefined);
  const cancelled = (signal: StopSignal): number => {
    say(`${signal}: the selftest was cancelled; no report`);
    return SIGNAL_EXIT_CODES[signal];
  };
  const offSignals = onStopSignals((signal) => abort.abort(signal), 'exiting without waiting for the run in progress');
  let report: SelftestReport;
  try {
    // The suite first (built if need be): a bad --only is refused before any run.
    let suite: SuiteReport = { source: 'not asked for (--no-suite)', ran: false, rows: [], outOfScope: [], vmexit: [] };
    const found = values['no-suite'] ? undefined : await suiteFolder(values['kvm-unit-tests'], progress);
    // The build blocks; a signal sent during it (make died of it too) is handled now.
    await new Promise((r) => setImmediate(r));
    if (stoppedBy()) throw new Error(`${stoppedBy()} during the suite's build`);
    if (found) suite = { ...suite, source: found.why };
    // A suite named on the command line that cannot run is bad input; one not found is only said.
    if (found && !found.dir && values['kvm-unit-tests']) throw new UsageError(found.why);
    const only = values.only?.split(',').map((s) => s.trim()).filter(Boolean);
    if ((only || exits) && !found?.dir) throw new UsageError(`--${only ? 'only' : 'exits'} names kvm-unit-tests, and none can run: ${found?.why}`);
    if (only && found?.dir) {
      const names = new Set(unitTests(found.dir).map((t) => t.name));
      const unknown = only.filter((name) => !names.has(name));
      if (unknown.length) throw new UsageError(`--only: no test ${unknown.join(', ')} in the suite's x86/unittests.cfg (${[...names].slice(0, 8).join(', ')}, ...)`);
    }
    const checks = await runKnobChecks(host.kvm, progress, abort.signal);
    if (found?.dir && !abort.signal.aborted) {
      const qemu = !values['no-qemu'] && qemuInstalled();
      if (!values['no-qemu'] && !qemu) progress('qemu-system-x86_64 is not installed: kvm-unit-tests run under Unhalt alone (nothing to judge them against)');
      const ran = await runSuiteChecks(found.dir, host.kvm, {
        qemu, cli: [process.execPath, process.argv[1]!], slowdown: hostSpeed().guestSlowdown, progress, signal: abort.signal, ...(only ? { only } : {}), ...(exits ? { exits } : {}),
      });
      suite = { ...suite, ran: true, ...ran };
    }
    const stopped = stoppedBy();
    if (stopped) return cancelled(stopped);
    report = {
      startedAt, unhalt: { version: appVersion(), node: process.versions.node }, host, platform: hostVirtualization(), checks, suite,
      ...verdictOf(checks, suite),
    };
  } catch (e) {
    const stopped = stoppedBy();
    if (stopped) return cancelled(stopped);
    if (e instanceof UsageError) {
      say(e.message);
      return EXIT_CODES.badInput;
    }
    say(`selftest failed: ${(e as Error).message}`);
    return EXIT_CODES.badInput;
  } finally {
    offSignals();
  }
  const text = values.format === 'json' ? `${JSON.stringify(report, null, 2)}\n` : formatReport(report);
  const shown = await deliverReport(text, values.output, 'the selftest report');
  say(report.summary);
  if (!shown) return EXIT_CODES.badInput;
  return report.verdict === 'pass' ? EXIT_CODES.ok : EXIT_CODES.vmFailed;
}

// `unhalt tune VM|--config S --workload W [--goal G] --budget 5m`: the tuning advisor from the
// command line (electron/experiments/advisor.ts, tune.ts); kept under UNHALT_HOME/experiments
// like `unhalt bench`'s results, with the same exit codes: 0 every run gave a result; 1 bad
// input, nothing ran (or the result could not be written); 2 one or more runs failed (each named
// on stderr; the advice is still printed, from the runs that gave values); 130 / 143 cancelled
// by SIGINT / SIGTERM (the run in progress ends at once, nothing is saved).
import { LibraryFileError } from '../service/library-schema.ts';
import { MakeDirError, makeDirs } from '../service/make-dir.ts';
import { OutputError, checkOutputPath } from '../service/output-file.ts';
import { homeLayout, unhaltHome } from '../service/paths.ts';
import { ConfigError, decimal } from '../vmm/config/vm-config.ts';
import { hostKind } from '../vmm/host.ts';
import { workloadNames } from '../experiments/workloads.ts';
import { AdvisorError } from '../experiments/advisor.ts';
import { ExperimentCancelled, ExperimentError, LINUX_ON_PVM } from '../experiments/runner.ts';
import { GOAL_KINDS, parseBudget } from '../experiments/tune-limits.ts';
import { formatTuneMarkdown } from '../experiments/tune-format.ts';
import { formatConfigString } from '../vmm/config/config-string.ts';
import { benchGoal, prepareTune, runTune, type TuneSpec } from '../experiments/tune.ts';
import { EXIT_CODES, SIGNAL_EXIT_CODES, UsageError, parse, say } from './args.ts';
import { libraryRecord } from './library-vm.ts';
import { onStopSignals, type StopSignal } from './stop-signals.ts';
import { deliverReport, experimentId, keepRecord } from './experiment-output.ts';
import { isBuiltInWorkload, loadWorkload } from '../experiments/saved-workloads.ts';
import { vmImage } from '../experiments/vm-base.ts';

export const TUNE_OPTIONS = {
  config: { type: 'string' },
  guest: { type: 'string' },
  workload: { type: 'string' },
  'workload-args': { type: 'string' },
  goal: { type: 'string' },
  'latency-bound': { type: 'string' },
  budget: { type: 'string' },
  format: { type: 'string', default: 'markdown' },
  output: { type: 'string' },
} as const;

export async function tuneCommand(argv: string[]): Promise<number> {
  try {
    const named = argv[0] !== undefined && !argv[0].startsWith('-') ? argv[0] : undefined;
    const { values } = parse(named === undefined ? argv : argv.slice(1), TUNE_OPTIONS);
    if ((named === undefined) === (values.config === undefined)) throw new UsageError('name one VM of the library (unhalt tune VM ...) or give --config \'cpus=1,...\', not both');
    if (values.guest !== undefined && values.config === undefined) throw new UsageError('--guest goes with --config (a library VM has its guest)');
    if (!values.workload) throw new UsageError(`--workload NAME is required (${workloadNames()})`);
    if (values.goal !== undefined && !(GOAL_KINDS as readonly string[]).includes(values.goal)) throw new UsageError(`--goal must be one of ${GOAL_KINDS.join(', ')}, got "${values.goal.slice(0, 40)}"`);
    // A saved workload (the user's own benchmark): its metric's direction is the goal unless --goal says otherwise.
    const saved = !isBuiltInWorkload(values.workload) ? loadWorkload(homeLayout(unhaltHome()).workloads, values.workload) : undefined;
    if (saved && named === undefined) throw new UsageError(`--workload ${values.workload} is a saved benchmark: tune it on a VM of the library (unhalt tune VM --workload ${values.workload})`);
    const goal = values.goal ?? (saved ? benchGoal(saved) : 'latency-p50');
    if (values.budget === undefined) throw new UsageError('--budget is required: how long the search may take, such as 90s, 5m or 1h');
    if (!['markdown', 'md', 'json'].includes(values.format)) throw new UsageError(`--format must be markdown or json, got "${values.format.slice(0, 20)}"`);
    let budgetS: number;
    try {
      budgetS = parseBudget(values.budget);
    } catch (e) {
      throw new UsageError(`--budget: ${(e as Error).message}`);
    }
    if (values.output) checkOutputPath(values.output, 'the tune output');
    const raw: Record<string, unknown> = { workload: values.workload, goal, budgetS };
    if (named !== undefined && saved) {
      // The VM as saved (its own disks, attached snapshot=on by every run) and the user's benchmark.
      const vm = libraryRecord(named);
      const image = vmImage(vm.config);
      Object.assign(raw, { vm: { name: vm.config.name, config: vm.config, ...(image ? { image } : {}) }, bench: saved, config: '', vmId: vm.id, vmName: vm.config.name });
    } else if (named !== undefined) {
      const vm = libraryRecord(named);
      if (vm.config.guest !== 'probe' && vm.config.guest !== 'linux') throw new UsageError(`VM "${vm.config.name}" boots its own kernel: the advisor runs the bench workloads, which need the probe or the Linux guest`);
      Object.assign(raw, { guest: vm.config.guest, config: formatConfigString(vm.config), vmId: vm.id, vmName: vm.config.name });
    } else {
      Object.assign(raw, { guest: values.guest ?? 'probe', config: values.config });
    }
    if (raw.guest === 'linux' && hostKind() === 'pvm') throw new ExperimentError(LINUX_ON_PVM);
    if (values['latency-bound'] !== undefined) raw.latencyBound = decimal(values['latency-bound'], '--latency-bound', 0, Number.MAX_SAFE_INTEGER);
    if (values['workload-args'] !== undefined) raw.workloadArgs = values['workload-args'];
    const spec: TuneSpec = prepareTune(raw);
    makeDirs(homeLayout(unhaltHome()).experiments, 0o700);

    const tty = process.stderr.isTTY === true;
    const abort = new AbortController();
    let stoppedBy: StopSignal | undefined;
    const offSignals = onStopSignals((signal) => { stoppedBy = signal; abort.abort(); }, 'exiting without waiting for the run in progress');
    let result;
    try {
      let lastRound: string | undefined;
      result = await runTune(spec, (p) => {
        const line = `unhalt tune: ${p.done}/${p.total} s${p.current ? ` ${p.current}` : ' done'}`;
        // On a terminal one line that updates; otherwise a line per round, not per second or run.
        if (tty) { process.stderr.write(`\r${line}\x1b[K`); return; }
        const round = p.current?.replace(/, run .*$/, '') ?? 'done';
        if (round === lastRound) return;
        lastRound = round;
        process.stderr.write(`${line.replace(/, run .*$/, '')}\n`);
      }, abort.signal);
    } catch (e) {
      if (!(e instanceof ExperimentCancelled) || !stoppedBy) throw e;
      if (tty) process.stderr.write('\n');
      say(`${stoppedBy}: the tune was cancelled; nothing was saved`);
      return SIGNAL_EXIT_CODES[stoppedBy];
    } finally {
      offSignals();
    }
    if (tty) process.stderr.write('\n');
    const id = experimentId('tune');
    const record = { id, createdAt: Date.now(), ...result };
    const out = values.format === 'json' ? `${JSON.stringify(record, null, 2)}\n` : formatTuneMarkdown(result);
    const shown = await deliverReport(out, values.output, 'the tune output');
    const kept = keepRecord(id, record, 'tune');
    const ok = shown && kept;
    if (result.failures.length) {
      for (const f of result.failures) say(`failed: ${f.config} run ${f.run}: ${f.error}`);
      return EXIT_CODES.vmFailed;
    }
    return ok ? EXIT_CODES.ok : EXIT_CODES.badInput;
  } catch (e) {
    const known = e instanceof UsageError || e instanceof ExperimentError || e instanceof AdvisorError || e instanceof OutputError
      || e instanceof ConfigError || e instanceof MakeDirError || e instanceof LibraryFileError;
    say(known ? (e instanceof LibraryFileError ? `the VM library cannot be read: ${e.message}` : e.message) : `tune failed: ${(e as Error).message}`);
    return EXIT_CODES.badInput;
  }
}

// `unhalt bench`: an A/B experiment from the command line; results kept under UNHALT_HOME.
// Exit codes (docs/cli.md): 0 every run gave a result; 1 bad input, nothing ran (or the results could
// not be written); 2 one or more runs failed (the VM or its guest did not deliver: "the VM
// failed"), each named on stderr in one line and in the output, whose table marks them
// (partial results are still printed).
import { OutputError, checkOutputPath } from '../service/output-file.ts';
import { ConfigError, integer } from '../vmm/config/vm-config.ts';
import { homeLayout, unhaltHome } from '../service/paths.ts';
import { failureLines, formatCsv, formatMarkdown, statusLine } from '../experiments/format.ts';
import { ExperimentCancelled, ExperimentError, LINUX_ON_PVM, prepareExperiment, runExperiment } from '../experiments/runner.ts';
import { userBenchLabel, fewRunsWarning } from '../experiments/spec.ts';
import { hostKind } from '../vmm/host.ts';
import { workloadNames } from '../experiments/workloads.ts';
import type { ExperimentSpec } from '../experiments/types.ts';
import { EXIT_CODES, SIGNAL_EXIT_CODES, UsageError, parse, say } from './args.ts';
import { onStopSignals, type StopSignal } from './stop-signals.ts';
import { deliverReport, experimentId, keepRecord } from './experiment-output.ts';
import { MakeDirError, makeDirs } from '../service/make-dir.ts';
import { confirmHostCommand } from '../service/host-commands.ts';
import { splitCommand } from '../experiments/argv-split.ts';
import { checkSaveName, isBuiltInWorkload, loadWorkload, saveWorkload, savedWorkloadNames } from '../experiments/saved-workloads.ts';
import { validateUserBenchmark, type UserBenchmark } from '../experiments/user-bench.ts';
import { vmImage } from '../experiments/vm-base.ts';
import { libraryRecord } from './library-vm.ts';
import { LibraryFileError } from '../service/library-schema.ts';

export const BENCH_OPTIONS = {
  guest: { type: 'string' },
  vm: { type: 'string' },
  workload: { type: 'string' },
  'host-cmd': { type: 'string' },
  'guest-cmd': { type: 'string' },
  ready: { type: 'string' },
  metric: { type: 'string' },
  'higher-is-better': { type: 'boolean' },
  unit: { type: 'string' },
  'save-workload': { type: 'string' },
  'workload-args': { type: 'string' },
  config: { type: 'string', multiple: true },
  runs: { type: 'string', default: '3' },
  bare: { type: 'boolean' },
  'vs-qemu': { type: 'boolean' },
  deadline: { type: 'string' },
  contention: { type: 'string' },
  format: { type: 'string', default: 'md' },
  output: { type: 'string' },
} as const;

export async function benchCommand(argv: string[]): Promise<number> {
  let spec: ExperimentSpec;
  try {
    const { values } = parse(argv, BENCH_OPTIONS);
    if (values.vm !== undefined && values.guest !== undefined) throw new UsageError('--guest goes without --vm (a library VM has its guest); drop --guest');
    const vm = values.vm !== undefined ? libraryRecord(values.vm).config : undefined;
    const guest = vm?.guest ?? values.guest ?? 'probe';
    if (!vm && guest !== 'probe' && guest !== 'linux') throw new UsageError(`--guest must be probe or linux, got "${guest.slice(0, 20)}"`);
    // Before anything else: on PVM the Linux guest cannot boot, whatever the other options say.
    if (guest === 'linux' && hostKind() === 'pvm') throw new ExperimentError(LINUX_ON_PVM);
    const bench = userBenchmarkOf(values);
    if (!values.workload && !bench) throw new UsageError(`--workload NAME, --host-cmd 'CMD' or --guest-cmd 'CMD' (with --metric 'REGEX') is required (${workloadNames()}${savedList()})`);
    if (!['md', 'json', 'csv'].includes(values.format)) throw new UsageError(`--format must be md, json or csv, got "${values.format}"`);
    // Its range is the spec's (experiments/spec.ts, checked by prepareExperiment for every surface).
    const runs = integer(values.runs, '--runs', Number.MIN_SAFE_INTEGER, Number.MAX_SAFE_INTEGER);
    // Refused now, not after minutes of runs: an output path that can never be written.
    if (values.output) checkOutputPath(values.output, 'the bench output');
    const configs = (values.config ?? []).map((c) => {
      const eq = c.indexOf('=');
      if (eq <= 0) throw new UsageError(`--config must be NAME='key=value,...', got "${c.slice(0, 40)}"`);
      return { name: c.slice(0, eq), config: c.slice(eq + 1) };
    });
    spec = { guest: guest as ExperimentSpec['guest'], workload: bench ? bench.name ?? userBenchLabel(bench.bench) : values.workload!, configs, runs };
    if (vm) spec.vm = { name: vm.name, config: vm, ...(vmImage(vm) ? { image: vmImage(vm)! } : {}) };
    if (bench) spec.bench = bench.bench;
    if (values.deadline !== undefined) {
      // Decimal seconds only (no hex, no exponent); the range is the spec's.
      if (!/^[0-9]+(\.[0-9]+)?$/.test(values.deadline)) throw new UsageError(`--deadline must be a number of seconds, got "${values.deadline.slice(0, 20)}"`);
      spec.deadlineS = Number(values.deadline);
    }
    // Its range is the spec's, like --runs.
    if (values.contention !== undefined) spec.contention = integer(values.contention, '--contention', Number.MIN_SAFE_INTEGER, Number.MAX_SAFE_INTEGER);
    if (values['workload-args'] !== undefined) spec.workloadArgs = values['workload-args'];
    if (values['vs-qemu']) spec.vsQemu = true;
    if (values.bare) spec.bare = true;
    prepareExperiment(spec);
    if (bench?.save) {
      // Saving is the user's confirmation of a host command: the app may then run it by name.
      const layout = homeLayout(unhaltHome());
      if (spec.bench!.hostCmd) spec.bench!.hostCmdId = confirmHostCommand(layout.hostCommands, spec.bench!.hostCmd).id;
      say(`workload saved: ${saveWorkload(layout.workloads, bench.name!, spec.bench!)} (use it with --workload ${bench.name})`);
    }
    const few = fewRunsWarning(spec.runs);
    if (few) say(`warning: ${few}`);
    // Where the record will be kept must exist before minutes of runs (and ends under /proc).
    makeDirs(homeLayout(unhaltHome()).experiments, 0o700);
    const tty = process.stderr.isTTY === true;
    // SIGINT / SIGTERM cancel the experiment: the run in progress ends at once (its VM stopped,
    // QEMU killed), nothing is saved, and the exit code is 128 + the signal; a second one exits now.
    const abort = new AbortController();
    let stoppedBy: StopSignal | undefined;
    const offSignals = onStopSignals((signal) => { stoppedBy = signal; abort.abort(); }, 'exiting without waiting for the run in progress');
    let result;
    try {
      result = await runExperiment(spec, (p) => {
        const line = `unhalt bench: ${p.done}/${p.total}${p.current ? ` ${p.current}` : ' done'}`;
        process.stderr.write(tty ? `\r${line}\x1b[K` : `${line}\n`);
      }, abort.signal);
    } catch (e) {
      if (!(e instanceof ExperimentCancelled) || !stoppedBy) throw e;
      if (tty) process.stderr.write('\n');
      say(`${stoppedBy}: the experiment was cancelled; nothing was saved`);
      return SIGNAL_EXIT_CODES[stoppedBy];
    } finally {
      offSignals();
    }
    if (tty) process.stderr.write('\n');
    const id = experimentId();
    const record = { id, createdAt: Date.now(), ...result };
    const out = values.format === 'json' ? `${JSON.stringify(record, null, 2)}\n` : values.format === 'csv' ? formatCsv(result) : formatMarkdown(result);
    // The results are shown (or written) even if keeping them fails, and each failure is said.
    const shown = await deliverReport(out, values.output, 'the bench output');
    const kept = keepRecord(id, record, 'experiment');
    const ok = shown && kept;
    const status = statusLine(result);
    if (status) {
      for (const line of [...failureLines(result.failures), status]) say(line);
      return EXIT_CODES.vmFailed;
    }
    return ok ? EXIT_CODES.ok : EXIT_CODES.badInput;
  } catch (e) {
    if (e instanceof LibraryFileError) say(`the VM library cannot be read: ${e.message}`);
    else say(e instanceof UsageError || e instanceof ExperimentError || e instanceof OutputError || e instanceof ConfigError || e instanceof MakeDirError ? e.message : `bench failed: ${(e as Error).message}`);
    return EXIT_CODES.badInput;
  }
}

type BenchValues = ReturnType<typeof parse<typeof BENCH_OPTIONS>>['values'];

/**
 * The user's own benchmark from the options: --host-cmd or --guest-cmd with its --metric (and
 * --ready, --higher-is-better, --unit), or a saved workload's by --workload NAME; undefined for
 * a built-in workload. `name` labels the experiment (the saved or to-be-saved name).
 */
function userBenchmarkOf(values: BenchValues): { bench: UserBenchmark; name?: string; save?: true } | undefined {
  const home = homeLayout(unhaltHome());
  const partsOnly = (['ready', 'metric', 'higher-is-better', 'unit'] as const).filter((k) => values[k] !== undefined);
  if (values['host-cmd'] !== undefined && values['guest-cmd'] !== undefined) throw new UsageError('--host-cmd and --guest-cmd both name what to measure: give one');
  const opt = values['guest-cmd'] !== undefined ? 'guest-cmd' : 'host-cmd';
  const cmd = values[opt];
  if (cmd === undefined) {
    if (values['save-workload'] !== undefined) throw new UsageError('--save-workload NAME saves the user\'s own benchmark; give --host-cmd \'CMD\' or --guest-cmd \'CMD\' with --metric \'REGEX\'');
    const saved = values.workload !== undefined && !isBuiltInWorkload(values.workload) ? loadWorkload(home.workloads, values.workload) : undefined;
    if (partsOnly.length && !saved) throw new UsageError(`--${partsOnly[0]} goes with --host-cmd 'CMD' or --guest-cmd 'CMD' (the user's own benchmark); add one or drop --${partsOnly[0]}`);
    if (partsOnly.length) throw new UsageError(`--${partsOnly[0]}: the saved workload ${values.workload} has its own; save a new one with --host-cmd or --guest-cmd ... --save-workload NAME`);
    return saved ? { bench: saved, name: values.workload } : undefined;
  }
  if (values.workload !== undefined) throw new UsageError(`--workload and --${opt} both name what to measure: give one (save a command with --save-workload NAME, reuse it with --workload NAME)`);
  if (values.metric === undefined) throw new UsageError(`--${opt} needs --metric 'REGEX' with one capture group: the figure in the command's output, such as 'latency_ms=([0-9.]+)'`);
  const raw: Record<string, unknown> = { [opt === 'guest-cmd' ? 'guestCmd' : 'hostCmd']: splitCommand(cmd), metric: values.metric };
  if (values.ready !== undefined) raw.ready = values.ready;
  if (values['higher-is-better']) raw.higherIsBetter = true;
  if (values.unit !== undefined) raw.unit = values.unit;
  const bench = validateUserBenchmark(raw);
  const save = values['save-workload'];
  if (save === undefined) return { bench };
  return { bench, name: checkSaveName(save), save: true };
}

function savedList(): string {
  const names = savedWorkloadNames(homeLayout(unhaltHome()).workloads);
  return names.length ? `; saved: ${names.join(', ')}` : '';
}

/** Keeps the record under UNHALT_HOME/experiments (a folder of ours: plain atomic writes). */

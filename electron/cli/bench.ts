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
import { fewRunsWarning } from '../experiments/spec.ts';
import { hostKind } from '../vmm/host.ts';
import { workloadNames } from '../experiments/workloads.ts';
import type { ExperimentSpec } from '../experiments/types.ts';
import { EXIT_CODES, SIGNAL_EXIT_CODES, UsageError, parse, say } from './args.ts';
import { onStopSignals, type StopSignal } from './stop-signals.ts';
import { deliverReport, experimentId, keepRecord } from './experiment-output.ts';
import { MakeDirError, makeDirs } from '../service/make-dir.ts';

export const BENCH_OPTIONS = {
  guest: { type: 'string', default: 'probe' },
  workload: { type: 'string' },
  'workload-args': { type: 'string' },
  config: { type: 'string', multiple: true },
  runs: { type: 'string', default: '3' },
  bare: { type: 'boolean' },
  'vs-qemu': { type: 'boolean' },
  deadline: { type: 'string' },
  format: { type: 'string', default: 'md' },
  output: { type: 'string' },
} as const;

export async function benchCommand(argv: string[]): Promise<number> {
  let spec: ExperimentSpec;
  try {
    const { values } = parse(argv, BENCH_OPTIONS);
    if (values.guest !== 'probe' && values.guest !== 'linux') throw new UsageError(`--guest must be probe or linux, got "${values.guest.slice(0, 20)}"`);
    // Before anything else: on PVM the Linux guest cannot boot, whatever the other options say.
    if (values.guest === 'linux' && hostKind() === 'pvm') throw new ExperimentError(LINUX_ON_PVM);
    if (!values.workload) throw new UsageError(`--workload NAME is required (${workloadNames()})`);
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
    spec = { guest: values.guest, workload: values.workload, configs, runs };
    if (values.deadline !== undefined) {
      // Decimal seconds only (no hex, no exponent); the range is the spec's.
      if (!/^[0-9]+(\.[0-9]+)?$/.test(values.deadline)) throw new UsageError(`--deadline must be a number of seconds, got "${values.deadline.slice(0, 20)}"`);
      spec.deadlineS = Number(values.deadline);
    }
    if (values['workload-args'] !== undefined) spec.workloadArgs = values['workload-args'];
    if (values['vs-qemu']) spec.vsQemu = true;
    if (values.bare) spec.bare = true;
    prepareExperiment(spec);
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
    say(e instanceof UsageError || e instanceof ExperimentError || e instanceof OutputError || e instanceof ConfigError || e instanceof MakeDirError ? e.message : `bench failed: ${(e as Error).message}`);
    return EXIT_CODES.badInput;
  }
}

/** Keeps the record under UNHALT_HOME/experiments (a folder of ours: plain atomic writes). */

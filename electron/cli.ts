// `unhalt` command line: run, bench, tune, serve, doctor, selftest, machines, import, export, watch. Exit codes (docs/cli.md, "Exit codes, help and options"): 0
// the guest shut down, 1 bad input or configuration, 2 the VM failed, 124 --timeout expired,
// 130/143 stopped by SIGINT/SIGTERM. stdout carries ttyS0 only; every message goes to stderr.
// Commands are imported lazily: `unhalt run` should not pay for loading the service, host mode
// and the experiment runner (about 100 ms of module loading at every start).
import { EXIT_CODES, UsageError, parse, say, wantsHelp } from './cli/args.ts';
import { flushStdout, guardStdout, stdoutProblem, stdoutProblemReported } from './cli/stdout.ts';
import { BENCH_USAGE, DOCTOR_USAGE, SELFTEST_USAGE, EXPORT_USAGE, IMPORT_USAGE, MACHINES_USAGE, OVERVIEW, RUN_USAGE, SERVE_USAGE, TUNE_USAGE, WATCH_USAGE } from './cli/usage.ts';

interface Command {
  usage: string;
  load(): Promise<{ options: Parameters<typeof parse>[1]; run(argv: string[]): Promise<number> }>;
}

const COMMANDS: Record<string, Command> = {
  run: { usage: RUN_USAGE, load: async () => { const m = await import('./cli/run.ts'); return { options: m.RUN_OPTIONS, run: m.runCommand }; } },
  bench: { usage: BENCH_USAGE, load: async () => { const m = await import('./cli/bench.ts'); return { options: m.BENCH_OPTIONS, run: m.benchCommand }; } },
  tune: { usage: TUNE_USAGE, load: async () => { const m = await import('./cli/tune.ts'); return { options: m.TUNE_OPTIONS, run: m.tuneCommand }; } },
  doctor: { usage: DOCTOR_USAGE, load: async () => { const m = await import('./cli/doctor.ts'); return { options: m.DOCTOR_OPTIONS, run: m.doctorCommand }; } },
  selftest: { usage: SELFTEST_USAGE, load: async () => { const m = await import('./cli/selftest.ts'); return { options: m.SELFTEST_OPTIONS, run: m.selftestCommand }; } },
  serve: { usage: SERVE_USAGE, load: async () => { const m = await import('./cli/serve.ts'); return { options: m.SERVE_OPTIONS, run: m.serveCommand }; } },
  import: { usage: IMPORT_USAGE, load: async () => { const m = await import('./cli/import.ts'); return { options: m.IMPORT_OPTIONS, run: m.importCommand }; } },
  watch: { usage: WATCH_USAGE, load: async () => { const m = await import('./cli/watch.ts'); return { options: m.WATCH_OPTIONS, run: m.watchCommand }; } },
  export: { usage: EXPORT_USAGE, load: async () => { const m = await import('./cli/export.ts'); return { options: m.EXPORT_OPTIONS, run: m.exportCommand }; } },
  machines: { usage: MACHINES_USAGE, load: async () => ({ options: {}, run: machinesCommand }) },
};

export async function main(argv: string[]): Promise<number> {
  guardStdout();
  const code = await dispatch(argv);
  await flushStdout();
  const problem = stdoutProblem();
  if (!problem) return code;
  if (!stdoutProblemReported()) say(problem);
  return code === EXIT_CODES.ok ? EXIT_CODES.badInput : code;
}

async function dispatch(argv: string[]): Promise<number> {
  const [name, ...rest] = argv;
  // Bare `unhalt` is a request for the overview, not a mistake: usage on stdout, exit 0.
  if (name === undefined || name === '-h' || name === '--help' || name === 'help') {
    process.stdout.write(OVERVIEW);
    return EXIT_CODES.ok;
  }
  const command = Object.hasOwn(COMMANDS, name) ? COMMANDS[name]! : undefined;
  if (!command) {
    say(`unknown command "${name.slice(0, 40)}"`);
    process.stderr.write(OVERVIEW);
    return EXIT_CODES.badInput;
  }
  const loaded = await command.load();
  if (wantsHelp(rest, loaded.options)) {
    process.stdout.write(command.usage);
    return EXIT_CODES.ok;
  }
  return loaded.run(rest);
}

async function machinesCommand(argv: string[]): Promise<number> {
  try {
    parse(argv, {});
  } catch (e) {
    if (!(e instanceof UsageError)) throw e;
    say(e.message);
    return EXIT_CODES.badInput;
  }
  process.stdout.write((await import('./cli/describe.ts')).describeMachines());
  return EXIT_CODES.ok;
}

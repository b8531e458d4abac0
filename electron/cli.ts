// `unhalt` command line: run, doctor. Exit codes (DESIGN.md): 0 the guest shut down, 1 bad input
// or configuration (nothing started), 2 the VM failed, 124 --timeout expired.
// stdout carries ttyS0 only; every message goes to stderr.
// Commands are imported lazily: `unhalt run` should not pay for loading the service, host mode
// and the experiment runner (about 100 ms of module loading at every start).
import { EXIT_CODES } from './cli/args.ts';

const USAGE = `usage: unhalt <command> [options]

commands:
  run       boot a VM with ttyS0 on this terminal (Ctrl-A x quits)
  doctor    check this host: /dev/kvm, KVM capabilities, halt polling, built guests
  machines  list machine types and their default properties
  serve     host mode: the app in a browser, on 127.0.0.1 with a token in the URL
  bench     A/B experiment: one workload under two or more configurations

unhalt run [--guest probe|linux|custom] [--kernel F] [--initrd F] [--append S] [--cpus N]
           [--memory MiB] [--name NAME] [--machine TYPE] [--cpu host,FEATURE=on|off,...]
           [--overcommit cpu-pm=on|off,mem-lock=on|off] [--halt-poll-ns N] [--pin CPU,...]
           [--pvm-profile on|off] [--agent-log F] [--stats F] [--stats-interval MS]
           [--timeout S] [--dry-run]
unhalt bench --workload NAME --config A='cpus=2,cpu-pm=off' --config B='cpus=2,cpu-pm=on'
             [--guest probe|linux] [--workload-args S] [--runs N] [--vs-qemu] [--bare]
             [--deadline S] [--format md|json|csv] [--output F]
unhalt doctor [--json]
unhalt serve [--port N] [--no-open] [--demo]
`;

export async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  switch (command) {
    case 'run': return (await import('./cli/run.ts')).runCommand(rest);
    case 'doctor': return (await import('./cli/doctor.ts')).doctorCommand(rest);
    case 'serve': return (await import('./cli/serve.ts')).serveCommand(rest);
    case 'bench': return (await import('./cli/bench.ts')).benchCommand(rest);
    case 'machines':
      process.stdout.write((await import('./cli/describe.ts')).describeMachines());
      return EXIT_CODES.ok;
    case undefined:
    case '-h':
    case '--help':
    case 'help':
      process.stdout.write(USAGE);
      return command === undefined ? EXIT_CODES.badInput : EXIT_CODES.ok;
    default:
      process.stderr.write(`unhalt: unknown command "${command}"\n${USAGE}`);
      return EXIT_CODES.badInput;
  }
}

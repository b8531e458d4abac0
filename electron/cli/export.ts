// `unhalt export VM --format qemu|libvirt|kubevirt [--output F] [--for-host pvm|hardware]`, or
// `--config 'cpus=2,...'` instead of VM for a configuration that is not in the library (a
// recommendation). The library is only read, never changed or locked (a rename is atomic, so a
// read sees the old file or the new one): the app may own it meanwhile.
import { LibraryFileError } from '../service/library-schema.ts';
import { OutputError, writeOutputFile } from '../service/output-file.ts';
import { parseConfigString } from '../vmm/config/config-string.ts';
import { resolveBoot } from '../vmm/config/resolve.ts';
import { ConfigError, GUESTS } from '../vmm/config/vm-config.ts';
import { EXPORT_FORMATS, exportConfig, exportHostProblem, isExportFormat, isExportHost } from '../vmm/export/export.ts';
import { hostKind } from '../vmm/host.ts';
import { EXIT_CODES, UsageError, parse, say } from './args.ts';
import { flushStdout, stdoutProblem } from './stdout.ts';
import { libraryVm } from './library-vm.ts';

export const EXPORT_OPTIONS = {
  format: { type: 'string' },
  output: { type: 'string' },
  config: { type: 'string' },
  guest: { type: 'string' },
  'for-host': { type: 'string' },
} as const;

export async function exportCommand(argv: string[]): Promise<number> {
  try {
    // The VM's name comes first, as in `unhalt export VM --format F`.
    const named = argv[0] !== undefined && !argv[0].startsWith('-') ? argv[0] : undefined;
    const { values } = parse(named === undefined ? argv : argv.slice(1), EXPORT_OPTIONS);
    if (values.format === undefined) throw new UsageError(`--format is required: ${EXPORT_FORMATS.join(', ')}`);
    if (!isExportFormat(values.format)) throw new UsageError(`--format must be one of ${EXPORT_FORMATS.join(', ')}, got "${values.format.slice(0, 40)}"`);
    if ((named === undefined) === (values.config === undefined)) {
      throw new UsageError('name one VM of the library (unhalt export VM --format F) or give --config \'cpus=2,...\', not both');
    }
    if (values.guest !== undefined && values.config === undefined) throw new UsageError('--guest goes with --config (a library VM has its guest)');
    const kind = values['for-host'] ?? hostKind();
    if (!isExportHost(kind)) throw new UsageError(exportHostProblem(kind, '--for-host'));
    if (values.guest !== undefined && !GUESTS.includes(values.guest as never)) {
      throw new UsageError(`--guest must be one of ${GUESTS.join(', ')}, got "${values.guest.slice(0, 40)}"`);
    }
    const config = named !== undefined ? libraryVm(named) : parseConfigString(values.config!, values.guest ? { guest: values.guest } : {});
    const { text } = exportConfig(values.format, { config, boot: resolveBoot(config, kind), hostKind: kind });
    if (values.output !== undefined) {
      writeOutputFile(values.output, text, 'the export');
      return EXIT_CODES.ok;
    }
    process.stdout.write(text);
    await flushStdout();
    return stdoutProblem() ? EXIT_CODES.badInput : EXIT_CODES.ok; // main says what went wrong
  } catch (e) {
    if (!(e instanceof UsageError || e instanceof ConfigError || e instanceof OutputError || e instanceof LibraryFileError)) throw e;
    say(e instanceof LibraryFileError ? `the VM library cannot be read: ${e.message}` : e.message);
    return EXIT_CODES.badInput;
  }
}

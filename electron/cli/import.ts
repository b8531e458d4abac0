// `unhalt import IMAGE [--name NAME] [--memory MiB] [--cpus N] [--user NAME] [--ssh-key FILE |
// --password-file FILE]`: a distribution's cloud image (qcow2 or raw) into the library as a VM that
// boots the image's own kernel with a cloud-init seed (service/image-import.ts). The library is
// changed under its lock, so the app may be running meanwhile. SIGINT/SIGTERM stop the import and
// remove what it made; the image is never written.
import { LibraryFileError } from '../service/library-schema.ts';
import { LibraryStore } from '../service/library-store.ts';
import { ImageError, SeedError, forwardedPorts, importImage } from '../service/image-import.ts';
import { describeIoError, errnoCode } from '../service/io-errors.ts';
import { MakeDirError } from '../service/make-dir.ts';
import { unhaltHome } from '../service/paths.ts';
import { shownPath } from '../vmm/config/shown-path.ts';
import { ConfigError, checkCpus, checkMemoryMiB } from '../vmm/config/vm-config.ts';
import { EXIT_CODES, SIGNAL_EXIT_CODES, UsageError, parse, say } from './args.ts';
import { onStopSignals } from './stop-signals.ts';

export const IMPORT_OPTIONS = {
  name: { type: 'string' },
  memory: { type: 'string' },
  cpus: { type: 'string' },
  user: { type: 'string' },
  'ssh-key': { type: 'string' },
  'password-file': { type: 'string' },
} as const;

export async function importCommand(argv: string[]): Promise<number> {
  let stopped: keyof typeof SIGNAL_EXIT_CODES | undefined;
  const abort = new AbortController();
  const off = onStopSignals((signal) => {
    stopped = signal;
    say(`${signal}: stopping the import and removing what it made`);
    abort.abort();
  }, 'exiting now');
  try {
    const image = argv[0] !== undefined && !argv[0].startsWith('-') ? argv[0] : undefined;
    if (image === undefined) throw new UsageError('name the image to import first: unhalt import IMAGE.qcow2 [--name NAME]');
    const { values } = parse(argv.slice(1), IMPORT_OPTIONS);
    const home = unhaltHome();
    const store = await LibraryStore.open(home);
    const vms = store.list();
    const result = await importImage({
      image,
      ...(values.name !== undefined ? { name: values.name } : {}),
      ...(values.memory !== undefined ? { memoryMiB: checkMemoryMiB(numberArg(values.memory, '--memory')) } : {}),
      ...(values.cpus !== undefined ? { cpus: checkCpus(numberArg(values.cpus, '--cpus')) } : {}),
      ...(values.user !== undefined ? { user: values.user } : {}),
      ...(values['ssh-key'] !== undefined ? { sshKeyFile: values['ssh-key'] } : {}),
      ...(values['password-file'] !== undefined ? { passwordFile: values['password-file'] } : {}),
    }, {
      home,
      names: vms.map((v) => v.config.name),
      usedPorts: forwardedPorts(vms),
      progress: progressLine(),
      signal: abort.signal,
    });
    if (stopped) { result.discard(); return SIGNAL_EXIT_CODES[stopped]; }
    const now = Date.now();
    await store.mutate((list) => {
      result.claim(list);
      list.push({ id: crypto.randomUUID(), config: result.config, createdAt: now, updatedAt: now, imported: result.imported });
    }).catch((e) => { result.discard(); throw e; });
    const { config, imported } = result;
    say(`imported ${shownPath(imported.image)} as the VM "${config.name}" (${imported.os ?? 'Linux'}; ${config.cpus} vCPUs, ${config.memoryMiB} MiB)`);
    process.stdout.write([
      `VM:      ${config.name}`,
      `kernel:  ${config.kernel}`,
      `append:  ${config.append}`,
      `login:   ${imported.user} (cloud-init seed ${imported.dir}/seed.iso)`,
      `ssh:     ssh -p ${imported.sshPort} ${imported.user}@127.0.0.1   (once the guest is up)`,
      `next:    unhalt run --vm '${config.name}'  |  unhalt bench --vm '${config.name}' ...  |  unhalt tune '${config.name}' ...`,
      '',
    ].join('\n'));
    return EXIT_CODES.ok;
  } catch (e) {
    if (stopped) return SIGNAL_EXIT_CODES[stopped];
    // UNHALT_HOME not writable, or full: the host's condition, said in one line like a refusal.
    if (e instanceof MakeDirError || /^E[A-Z]+$/.test(errnoCode(e) ?? '')) {
      say(e instanceof MakeDirError ? e.message : `the import failed in ${unhaltHome()}: ${describeIoError(e)}`);
      return EXIT_CODES.badInput;
    }
    if (!(e instanceof UsageError || e instanceof ConfigError || e instanceof ImageError || e instanceof SeedError || e instanceof LibraryFileError)) throw e;
    say(e instanceof LibraryFileError ? `the VM library cannot be read: ${e.message}` : e.message);
    return EXIT_CODES.badInput;
  } finally {
    off();
  }
}

function numberArg(text: string, option: string): number {
  if (!/^\d{1,9}$/.test(text)) throw new UsageError(`${option} must be a whole number, got "${text.slice(0, 40)}"`);
  return Number(text);
}

/** Progress on stderr: a step per line; a percent only when it moved by 10 or more. */
function progressLine(): (step: string, percent?: number) => void {
  let lastStep = '';
  let lastPct = -10;
  return (step, percent) => {
    if (step !== lastStep) { lastStep = step; lastPct = -10; if (percent === undefined) { say(step); return; } }
    if (percent !== undefined && (percent >= lastPct + 10 || percent === 100)) { lastPct = percent; say(`${step}: ${percent}%`); }
  };
}

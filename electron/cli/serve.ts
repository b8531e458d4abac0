// `unhalt serve [--port N] [--no-open]`: host mode. Serves the UI and the API on 127.0.0.1 and
// prints the URL (with its token) on stdout. Ctrl-C / SIGTERM stop the VMs and the server.
import { spawn } from 'node:child_process';
import { rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { startHostServer, type HostServer } from '../service/host-server.ts';
import { HomeBusyError } from '../service/home-owner.ts';
import { HomeFileError } from '../service/home-file.ts';
import { persistentHostToken } from '../service/host-token.ts';
import { describeIoError } from '../service/io-errors.ts';
import { unhaltHome } from '../service/paths.ts';
import { SERVICE_SPARE_VCPU_WORKERS, createService, type UnhaltService } from '../service/service.ts';
import { integer } from '../vmm/config/vm-config.ts';
import { EXIT_CODES, SIGNAL_EXIT_CODES, parse, say } from './args.ts';
import { onStopSignals, type StopSignal } from './stop-signals.ts';
import { traceStepsToStderr } from '../vmm/start-trace.ts';
import { MakeDirError, makeDirs } from '../service/make-dir.ts';

export const SERVE_OPTIONS = { port: { type: 'string' }, 'no-open': { type: 'boolean' }, demo: { type: 'boolean' } } as const;

export async function serveCommand(argv: string[]): Promise<number> {
  // Where each start's and stop's time goes, for bench/app-start.ts --breakdown (start-trace.ts).
  if (process.env.UNHALT_TRACE_STARTS === '1') traceStepsToStderr();
  let port = 0;
  let open = true;
  let demo = false;
  try {
    const { values } = parse(argv, SERVE_OPTIONS);
    demo = values.demo === true;
    // 0 picks a free port.
    if (values.port !== undefined) port = integer(values.port, '--port (0 picks a free one)', 0, 65535);
    open = !values['no-open'];
  } catch (e) {
    say((e as Error).message);
    return EXIT_CODES.badInput;
  }

  const home = unhaltHome();
  let service: UnhaltService;
  let server: HostServer;
  try {
    // A host command's confirmation code goes to this terminal only: the browser's token cannot read it.
    service = await createService({ home, ownerCommand: 'unhalt serve', spareVcpuWorkers: SERVICE_SPARE_VCPU_WORKERS, announce: (text) => say(text) });
  } catch (e) {
    const known = e instanceof MakeDirError || e instanceof HomeBusyError || e instanceof HomeFileError;
    say(known ? e.message : `cannot open the VM library in ${home}: ${describeIoError(e)}`);
    return EXIT_CODES.badInput;
  }
  try {
    // The same token as the last start on this home: tabs left open reconnect by themselves.
    server = await startHostServer({ service, port, token: persistentHostToken(home) });
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    say(code === 'EADDRINUSE' ? `port ${port} on 127.0.0.1 is in use: pick another with --port, or --port 0 for any free one` : `cannot serve: ${(e as Error).message}`);
    await service.shutdown();
    return EXIT_CODES.badInput;
  }

  // Before the URL is printed: whoever reads it may send SIGTERM at once, and must get exit 0.
  let stoppedBy: StopSignal | undefined;
  const stopRequested = new Promise<void>((resolve) => {
    onStopSignals((signal) => {
      stoppedBy = signal;
      const running = service.runningVmIds().length;
      say(`stopping${running ? ` ${running} VM${running > 1 ? 's' : ''} and` : ''} the server… (again to exit at once)`);
      resolve();
    }, 'exiting without waiting for the VMs');
  });
  service.announceAddress(server.origin);
  if (demo) await startDemo(service);
  process.stdout.write(`${server.url}\n`);
  say(`host mode on ${server.origin} (loopback only; the token in the URL is the key). Ctrl-C stops the server and its VMs.`);
  const opener = open ? openBrowser(home, server) : undefined;

  await stopRequested;
  if (opener) rmSync(opener, { force: true });
  await server.close();
  await service.shutdown();
  // Asked to stop (Ctrl-C, SIGTERM): done as asked, 0. The terminal went away (SIGHUP): a clean
  // stop still, reported as the signal that caused it.
  return stoppedBy === 'SIGHUP' ? SIGNAL_EXIT_CODES.SIGHUP : EXIT_CODES.ok;
}

/** `--demo`: a 2-vCPU probe VM (its echo shell, the probe's default memory) in the library, started, so the app opens on a live guest. */
async function startDemo(service: UnhaltService): Promise<void> {
  const name = 'probe-demo';
  try {
    const existing = (await service.listVms()).find((v) => v.config.name === name);
    const vm = existing ?? await service.createVm({ name, guest: 'probe', cpus: 2, append: 'scenario=echo' });
    if (vm.status.state === 'stopped') await service.startVm(vm.id);
    say(`demo: VM "${name}" is running (the probe guest's echo shell; type help in its console)`);
  } catch (e) {
    say(`demo: could not start the probe VM: ${(e as Error).message}`);
  }
}

/**
 * Opens the default browser on the URL — through a redirect file only this user can read, as
 * Jupyter does: a URL on a command line would show the token to every local user in ps.
 */
function openBrowser(home: string, server: HostServer): string | undefined {
  if (!process.env.DISPLAY && !process.env.WAYLAND_DISPLAY) return undefined;
  try {
    const dir = join(home, 'run');
    makeDirs(dir, 0o700);
    const file = join(dir, `open-${server.port}.html`);
    const url = server.url.replace(/&/g, '&amp;').replace(/"/g, '&quot;');
    writeFileSync(file, `<!doctype html><meta charset="utf-8"><meta http-equiv="refresh" content="0;url=${url}"><title>Unhalt</title><a href="${url}">Open Unhalt</a>\n`, { mode: 0o600 });
    const child = spawn('xdg-open', [file], { stdio: 'ignore', detached: true });
    child.on('error', () => say('could not open a browser (xdg-open): open the URL above by hand'));
    child.unref();
    return file;
  } catch {
    return undefined;
  }
}

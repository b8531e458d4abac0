// `unhalt watch qmp:PATH [--stats F] [--interval MS] [--duration S]`: a QEMU someone else runs,
// watched read-only through its QMP socket (docs/watch.md). Its vCPUs' KVM stats go to --stats as
// the same NDJSON `unhalt run --stats` writes; without --stats, one summary line per interval on
// stderr. Ends with exit 0 when QEMU exits or --duration passes, 130/143/129 on a signal.
import { existsSync, rmSync } from 'node:fs';
import { resolve as resolvePath } from 'node:path';
import { OutputError, OutputStream } from '../service/output-file.ts';
import { ConfigError, decimal, integer } from '../vmm/config/vm-config.ts';
import type { TelemetryEvent } from '../vmm/telemetry/fields.ts';
import { NdjsonStatsWriter } from '../vmm/telemetry/ndjson.ts';
import { listQemuProcesses, unixSocketUsers, watchVerdict } from '../watch/discover.ts';
import { QmpClient, QmpError } from '../watch/qmp-client.ts';
import { DEFAULT_WATCH_INTERVAL_MS, MAX_WATCH_INTERVAL_MS, MIN_WATCH_INTERVAL_MS, QmpSampler } from '../watch/qmp-sampler.ts';
import { EXIT_CODES, SIGNAL_EXIT_CODES, UsageError, parse, say } from './args.ts';
import { setLongTimeout } from './long-timer.ts';
import { onStopSignals, type StopSignal } from './stop-signals.ts';

export const WATCH_OPTIONS = {
  stats: { type: 'string' },
  interval: { type: 'string' },
  duration: { type: 'string' },
  list: { type: 'boolean' },
  json: { type: 'boolean' },
} as const;

/** `--list` takes only --json: the watch's own options refused with it. */
const LIST_OPTIONS = { list: WATCH_OPTIONS.list, json: WATCH_OPTIONS.json };

/** A year, as run's --timeout: longer is surely a typo. */
const MAX_DURATION_S = 365 * 24 * 3600;

/** `qmp:PATH` -> the socket's absolute path; anything else is one line naming the forms. */
export function watchTarget(arg: string | undefined): string {
  if (arg === undefined || arg.startsWith('-')) throw new UsageError('name the VM to watch first: unhalt watch qmp:/path/to/qmp.sock (unhalt watch --list shows the QEMUs running here)');
  if (!arg.startsWith('qmp:') || arg.length === 4) throw new UsageError(`cannot watch "${arg.slice(0, 60)}": give qmp:PATH, the socket of QEMU's -qmp unix:PATH,server=on,wait=off`);
  return resolvePath(arg.slice(4));
}

export async function watchCommand(argv: string[]): Promise<number> {
  if (argv.includes('--list')) return listCommand(argv);
  let qmp: QmpClient | undefined;
  let statsOut: OutputStream | undefined;
  let createdStats: string | undefined;
  let sampler: QmpSampler;
  let durationS: number | undefined;
  try {
    const path = watchTarget(argv[0]);
    const { values } = parse(argv.slice(1), WATCH_OPTIONS);
    if (values.json) throw new UsageError('--json goes with --list: unhalt watch --list --json');
    const intervalMs = values.interval === undefined ? DEFAULT_WATCH_INTERVAL_MS : integer(values.interval, '--interval (ms)', MIN_WATCH_INTERVAL_MS, MAX_WATCH_INTERVAL_MS);
    if (values.duration !== undefined) {
      durationS = decimal(values.duration, '--duration (s)', 0, MAX_DURATION_S);
      if (durationS <= 0) throw new UsageError(`--duration must be a positive number of seconds, got "${values.duration.slice(0, 40)}"`);
    }
    if (values.stats) {
      if (!existsSync(values.stats)) createdStats = values.stats;
      statsOut = await OutputStream.open(values.stats, 'the stats file');
    }
    qmp = await QmpClient.connect(path);
    sampler = await QmpSampler.start(qmp, intervalMs);
    const name = await qmp.execute('query-name') as { name?: string };
    say(`watching QEMU ${qmp.version}${name.name ? ` "${name.name}"` : ''} through ${path}: vCPUs ${sampler.vcpus.join(', ')}, every ${intervalMs} ms, read-only`);
  } catch (e) {
    qmp?.close();
    await statsOut?.close();
    // Nothing watched: leave no stats file behind that this command created.
    if (createdStats) rmSync(createdStats, { force: true });
    const known = e instanceof UsageError || e instanceof QmpError || e instanceof OutputError || e instanceof ConfigError;
    say(known ? (e as Error).message : `cannot watch: ${(e as Error).message}`);
    return EXIT_CODES.badInput;
  }

  let outputFailed = false;
  let writer: NdjsonStatsWriter | undefined;
  if (statsOut) {
    writer = new NdjsonStatsWriter(statsOut.stream);
    statsOut.onError(() => { outputFailed = true; sampler.stop(); });
    writer.attach(sampler);
    await statsOut.begin();
  } else {
    sampler.subscribe(summaryLine);
  }

  let stoppedBy: StopSignal | undefined;
  let timedOut = false;
  const offSignals = onStopSignals((signal) => { stoppedBy = signal; sampler.stop(); }, 'exiting now');
  const cancelTimer = durationS === undefined ? undefined : setLongTimeout(() => { timedOut = true; sampler.stop(); }, durationS * 1000);
  const ended = await Promise.race([sampler.ended, qmp.closed.then((why) => new QmpError(why))]);
  sampler.stop();
  cancelTimer?.();
  offSignals();
  qmp.close();
  await writer?.close();
  await statsOut?.close();
  const problem = statsOut?.failure();
  if (problem) say(problem);
  if (stoppedBy) { say(`${stoppedBy}: stopped watching; the VM runs on`); return SIGNAL_EXIT_CODES[stoppedBy]; }
  if (outputFailed || problem) return EXIT_CODES.badInput;
  if (timedOut) { say(`watched for ${durationS} s; the VM runs on`); return EXIT_CODES.ok; }
  say(`${ended?.message ?? 'the watch stopped'}; the watch ended`);
  // QEMU's exit is the clean end; a QEMU that stopped answering or refused a query is not.
  return qmp.peerClosed ? EXIT_CODES.ok : EXIT_CODES.badInput;
}

/** Without --stats: each interval in one line, all vCPUs summed. */
function summaryLine(e: TelemetryEvent): void {
  if (e.type !== 'sample') return;
  const sum = (f: string) => e.records.reduce((s, r) => s + (r[f] ?? 0), 0);
  const parts = [`t=${(e.t / 1000).toFixed(1)}s`, `halt_exits/s=${sum('halt_exits_per_s').toFixed(0)}`, `exits/s=${sum('exits_per_s').toFixed(0)}`];
  if (e.records.some((r) => r.halt_wait_ns_delta !== undefined)) parts.push(`halt_wait=${(sum('halt_wait_ns_delta') / 1e6).toFixed(1)}ms`);
  say(parts.join(' '));
}

/** `unhalt watch --list [--json]`: the QEMUs on this host and how to watch each, from /proc alone. */
function listCommand(argv: string[]): number {
  let json: boolean | undefined;
  try {
    ({ json } = parse(argv, LIST_OPTIONS).values);
  } catch (e) {
    if (!(e instanceof UsageError)) throw e;
    say(`${e.message} (--list takes only --json)`);
    return EXIT_CODES.badInput;
  }
  const users = unixSocketUsers();
  const rows = listQemuProcesses().map((p) => ({
    ...p,
    sockets: p.qmp.map((q) => ({ ...q, ...watchVerdict(p, q, users) })),
  }));
  if (json) {
    process.stdout.write(`${JSON.stringify(rows.map(({ qmp: _, ...r }) => r), null, 2)}\n`);
    return EXIT_CODES.ok;
  }
  if (!rows.length) {
    process.stdout.write('no QEMU process is running here (or none this user may see)\n');
    return EXIT_CODES.ok;
  }
  for (const r of rows) {
    const who = r.libvirt ? `libvirt domain ${r.name ?? '?'} (${r.libvirt.uri})` : r.name ? `"${r.name}"` : 'unnamed';
    process.stdout.write(`QEMU pid ${r.pid} ${who}, -accel ${r.accel}, uid ${r.uid}\n`);
    if (!r.sockets.length) process.stdout.write('  no QMP server socket: start it with -qmp unix:PATH,server=on,wait=off to watch it\n');
    for (const q of r.sockets) {
      const where = q.path ?? '(an fd)';
      process.stdout.write(q.watchable ? `  ${where}: unhalt watch ${q.target}\n` : `  ${where}: ${q.why}\n`);
    }
  }
  return EXIT_CODES.ok;
}

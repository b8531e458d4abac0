// `unhalt bench --vm NAME` with the user's own benchmark, on real KVM with probe-guest library
// VMs: an A/B of halt-poll-ns whose figure comes from a host command that connects through a
// forwarded port to the probe's net-listen scenario; the VM's disk image byte-identical after runs
// in which the guest wrote to it; a failing command, a metric without a match and a guest that
// never gets ready as failed runs with their reasons; a saved workload reused; the refusals of
// bad input in one line; and the API, which runs a host command only once it was confirmed.
import { createHash } from 'node:crypto';
import { readFileSync, readdirSync, truncateSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { LibraryStore } from '../../electron/service/library-store.ts';
import { saveWorkload } from '../../electron/experiments/saved-workloads.ts';
import { createService } from '../../electron/service/service.ts';
import { validateConfig } from '../../electron/vmm/config/vm-config.ts';
import { parseNetOption } from '../../electron/vmm/config/net-config.ts';
import { rejection } from '../support/api-errors.ts';
import { runCli } from '../support/cli.ts';
import { freePort } from '../support/free-port.ts';
import { kvmAvailable } from '../support/probe.ts';
import { removeTempHomes, tempHome } from '../support/temp-home.ts';
import { scaled } from '../support/time-scale.ts';

afterAll(removeTempHomes);

const sha = (f: string) => createHash('sha256').update(readFileSync(f)).digest('hex');
const AB = ['--config', 'a=halt-poll-ns=0', '--config', 'b=halt-poll-ns=200000'];
const node = process.execPath;

/** A home with library VMs: `web` (net-listen behind a forward, a disk) and `blk` (writes its disk, then holds). */
async function homeWithVms(): Promise<{ home: string; port: number; webDisk: string; blkDisk: string; client: string }> {
  const home = tempHome('bench-vm');
  const port = await freePort();
  const webDisk = join(home, 'web.img');
  const blkDisk = join(home, 'blk.img');
  for (const f of [webDisk, blkDisk]) {
    writeFileSync(f, Buffer.alloc(1 << 20, 0x5a));
    truncateSync(f, 1 << 20);
  }
  // The user's load generator: connect through the forward, time until the guest's answer closes it.
  const client = join(home, 'client.mjs');
  writeFileSync(client, [
    "import { connect } from 'node:net';",
    'const t0 = performance.now();',
    "const s = connect(Number(process.argv[2]), '127.0.0.1');",
    "s.on('error', () => {});",
    "s.on('close', () => { console.log(`latency_ms=${(performance.now() - t0).toFixed(3)}`); });",
    'setTimeout(() => s.destroy(), 20000).unref();',
  ].join('\n'));
  const store = await LibraryStore.open(home);
  const now = Date.now();
  await store.mutate((vms) => {
    vms.push({ id: 'vm-web', createdAt: now, updatedAt: now, config: validateConfig({
      name: 'web', guest: 'probe', cpus: 1, append: 'scenario=net-listen port=8080 wait_ms=60000',
      net: parseNetOption(`user,hostfwd=tcp:127.0.0.1:${port}-:8080`), disks: [{ path: webDisk }],
    }) });
    vms.push({ id: 'vm-blk', createdAt: now, updatedAt: now, config: validateConfig({
      name: 'blk', guest: 'probe', cpus: 1, append: 'scenario=virtio-blk sector=8 sectors=8 seed=4 hold=1', disks: [{ path: blkDisk }],
    }) });
  });
  return { home, port, webDisk, blkDisk, client };
}

const printer = (text: string) => `${node} -e 'console.log("${text}")'`;

describe.skipIf(!kvmAvailable)('unhalt bench --vm with a host command', () => {
  it('A/B of halt-poll-ns on a library VM: two rows of the metric, the VM and its image named, conditions kept, the disk unchanged', async () => {
    const { home, port, webDisk, client } = await homeWithVms();
    const before = sha(webDisk);
    const r = await runCli(['bench', '--vm', 'web', ...AB, '--runs', '2', '--host-cmd', `${node} ${client} ${port}`,
      '--ready', 'listening on 8080', '--metric', 'latency_ms=([0-9.]+)', '--unit', 'ms', '--format', 'json'], { env: { UNHALT_HOME: home }, killAfterMs: scaled(300_000) });
    expect(r.code, r.stderr).toBe(0);
    const j = JSON.parse(r.stdout);
    expect(j.rows.map((x: { config: string }) => x.config)).toEqual(['a', 'b']);
    for (const row of j.rows) {
      expect(row).toMatchObject({ runner: 'unhalt', unit: 'ms', failedRuns: 0 });
      expect(row.runs).toHaveLength(2);
      expect(row.median).toBeGreaterThan(0);
    }
    expect(j.spec).toMatchObject({ workload: 'host-cmd', guest: 'probe', vm: { name: 'web', image: webDisk }, bench: { hostCmd: [node, client, String(port)], ready: 'listening on 8080', unit: 'ms' } });
    expect(j.environment.vm).toEqual({ name: 'web', image: webDisk });
    // Each config is the VM with one knob changed, its disk attached snapshot=on.
    expect(j.environment.configs.map((c: { config: { haltPollNs: number } }) => c.config.haltPollNs)).toEqual([0, 200000]);
    expect(j.environment.configs[0].config).toMatchObject({ name: 'web', append: 'scenario=net-listen port=8080 wait_ms=60000', disks: [{ path: webDisk, snapshot: true }] });
    expect(j.knobsApplied).toBe('boot');
    expect(j.conditions).toMatchObject({ kernel: expect.any(String), cpuModel: expect.any(String), governor: expect.any(String), boost: expect.any(String), smt: expect.any(String),
      kvm: { haltPollNs: expect.any(String), haltPollNsGrow: expect.any(String), haltPollNsShrink: expect.any(String) }, load: { samples: 4 } });
    expect(j.comparisons).toHaveLength(1);
    expect(sha(webDisk)).toBe(before);
    // The library's record still has the disk read-write: only the runs made it throwaway.
    expect(JSON.parse(readFileSync(join(home, 'vms.json'), 'utf8')).vms[0].config.disks).toEqual([{ path: webDisk }]);
  }, scaled(300_000));

  it('--vs-qemu: the same VM under QEMU with the export\'s command line, the same host command against the same forward; the disk unchanged', async () => {
    const { home, port, webDisk, client } = await homeWithVms();
    const before = sha(webDisk);
    const r = await runCli(['bench', '--vm', 'web', ...AB, '--runs', '1', '--vs-qemu', '--host-cmd', `${node} ${client} ${port}`,
      '--ready', 'listening on 8080', '--metric', 'latency_ms=([0-9.]+)', '--unit', 'ms', '--format', 'json'], { env: { UNHALT_HOME: home }, killAfterMs: scaled(300_000) });
    expect(r.code, r.stderr + r.stdout.slice(0, 3000)).toBe(0);
    const j = JSON.parse(r.stdout);
    expect(j.rows.map((x: { config: string; runner: string }) => `${x.config} ${x.runner}`)).toEqual(['a unhalt', 'b unhalt', 'a qemu', 'b qemu']);
    for (const row of j.rows) expect(row.median).toBeGreaterThan(0);
    // QEMU has no per-VM halt polling: its rows say they ran at the host's.
    expect(j.notes.join('\n')).toMatch(/a \(qemu\): ran at the host's halt polling .* not halt-poll-ns=0/);
    expect(sha(webDisk)).toBe(before);
    const refused = await runCli(['bench', '--vm', 'web', ...AB, '--vs-qemu', '--guest-cmd', 'true', '--metric', 'v=(\\d)'], { env: { UNHALT_HOME: home } });
    expect(refused.stderr).toMatch(/probe guest does not have/); // the probe VM: no agent at all, said first
  }, scaled(300_000));

  it('a guest that wrote its disk: the image is byte-identical; a saved workload is reused by name; the report header says it all', async () => {
    const { home, blkDisk } = await homeWithVms();
    const before = sha(blkDisk);
    const saved = await runCli(['bench', '--vm', 'blk', ...AB, '--runs', '1', '--host-cmd', printer('ops_per_s=4100'),
      '--ready', 'flushed, holding', '--metric', 'ops_per_s=([0-9.]+)', '--higher-is-better', '--unit', 'ops/s', '--save-workload', 'blk-ops'], { env: { UNHALT_HOME: home } });
    expect(saved.code, saved.stderr).toBe(0);
    expect(saved.stderr).toContain(`unhalt: workload saved: ${join(home, 'workloads', 'blk-ops.json')} (use it with --workload blk-ops)`);
    expect(saved.stdout).toContain(`vm: blk, image ${blkDisk}; every writable disk attached snapshot=on (the runs leave the images unchanged)`);
    expect(saved.stdout).toContain(`benchmark: host command ${node} -e 'console.log("ops_per_s=4100")' after the console printed /flushed, holding/; metric /ops_per_s=([0-9.]+)/ in ops/s, higher is better`);
    expect(saved.stdout).toContain('knobs: every run booted its configuration (none was changed in a running guest)');
    expect(saved.stdout).toMatch(/^host: .+, kernel .+, governor .+, boost .+, SMT .+, load [\d.]+–[\d.]+ \(mean [\d.]+\) during the runs$/m);
    expect(saved.stdout).toMatch(/^kvm: halt_poll_ns \S+, grow \S+, shrink \S+; mitigations: .+$/m);
    expect(saved.stdout).toMatch(/^\| a \| unhalt \| 4100 \|/m);
    const again = await runCli(['bench', '--vm', 'blk', ...AB, '--runs', '1', '--workload', 'blk-ops', '--format', 'json'], { env: { UNHALT_HOME: home } });
    expect(again.code, again.stderr).toBe(0);
    const j = JSON.parse(again.stdout);
    expect(j.spec).toMatchObject({ workload: 'blk-ops', bench: { metric: 'ops_per_s=([0-9.]+)', higherIsBetter: true, unit: 'ops/s', hostCmdId: expect.stringMatching(/^[0-9a-f]{16}$/) } });
    expect(j.rows.map((x: { median: number }) => x.median)).toEqual([4100, 4100]);
    // Saving confirmed the command, so the app may run it by name.
    expect(JSON.parse(readFileSync(join(home, 'host-commands.json'), 'utf8')).commands[0].id).toBe(j.spec.bench.hostCmdId);
    expect(sha(blkDisk)).toBe(before);
  }, scaled(300_000));

  it('a failing command, a metric without a match, a guest never ready: failed runs with their reasons, never a number', async () => {
    const { home } = await homeWithVms();
    const env = { UNHALT_HOME: home };
    // It prints a figure, but its exit status says it failed: no number.
    const script = join(home, 'fail.mjs');
    writeFileSync(script, 'console.log("v=1"); console.error("boom: no server"); process.exit(3);');
    const failing = await runCli(['bench', '--vm', 'blk', ...AB, '--runs', '1', '--ready', 'flushed, holding', '--metric', 'v=(\\d+)',
      '--host-cmd', `${node} ${script}`], { env });
    expect(failing.code).toBe(2);
    const why = `the host command (${node} ${script}) exited with status 3: boom: no server`;
    expect(failing.stderr).toContain(`unhalt: failed: a (unhalt) run 1: ${why}\n`);
    expect(failing.stdout).toContain(`failed: b (unhalt) run 1: ${why}`);
    expect(failing.stdout).toMatch(/^\*\*the experiment failed: none of its 2 runs gave a result\.\*\*$/m);

    const nomatch = await runCli(['bench', '--vm', 'blk', ...AB, '--runs', '1', '--ready', 'flushed, holding', '--metric', 'latency_ms=([0-9.]+)',
      '--host-cmd', printer('latency: 12 ms'), '--format', 'json'], { env });
    expect(nomatch.code).toBe(2);
    expect(JSON.parse(nomatch.stdout)).toMatchObject({ status: 'failed', rows: [], failures: [
      { config: 'a', error: 'the host command\'s output has no match for --metric /latency_ms=([0-9.]+)/ (last line: "latency: 12 ms")' },
      { config: 'b', error: expect.stringMatching(/no match for --metric/) },
    ] });

    const never = await runCli(['bench', '--vm', 'blk', ...AB, '--runs', '1', '--ready', 'NEVER PRINTED', '--deadline', '2', '--metric', 'v=(\\d+)',
      '--host-cmd', printer('v=1'), '--format', 'json'], { env });
    expect(never.code).toBe(2);
    const j = JSON.parse(never.stdout);
    expect(j.failures.map((f: { error: string }) => f.error)).toEqual(Array(2).fill('the guest never printed /NEVER PRINTED/ on its console: stopped at its 2.0 s deadline (set by --deadline)'));
    expect(j.raw.every((x: { value: null }) => x.value === null)).toBe(true);

    const slow = await runCli(['bench', '--vm', 'blk', ...AB, '--runs', '1', '--ready', 'flushed, holding', '--deadline', '2', '--metric', 'v=(\\d+)',
      '--host-cmd', `${node} -e 'setTimeout(() => {}, 60000)'`, '--format', 'json'], { env });
    expect(slow.code).toBe(2);
    expect(JSON.parse(slow.stdout).failures[0].error).toBe(`the host command (${node} -e 'setTimeout(() => {}, 60000)') stopped at its 2.0 s deadline (set by --deadline)`);

    const missing = await runCli(['bench', '--vm', 'blk', ...AB, '--runs', '1', '--ready', 'flushed, holding', '--metric', 'v=(\\d+)',
      '--host-cmd', '/nonexistent/loadgen --rate 10'], { env });
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain('unhalt: failed: a (unhalt) run 1: the host command (/nonexistent/loadgen --rate 10) could not start: no program "/nonexistent/loadgen" (give its path, or put it on PATH)\n');
  }, scaled(300_000));

  it('the advisor tunes a library VM for a saved workload, with the metric\'s direction as its goal', async () => {
    const { home, blkDisk } = await homeWithVms();
    const before = sha(blkDisk);
    const script = join(home, 'rate.mjs');
    writeFileSync(script, 'console.log(`rate=${(1000 + 50 * Math.random()).toFixed(1)}`);');
    const saved = await runCli(['bench', '--vm', 'blk', ...AB, '--runs', '1', '--host-cmd', `${node} ${script}`, '--ready', 'flushed, holding',
      '--metric', 'rate=([0-9.]+)', '--higher-is-better', '--unit', 'ops/s', '--save-workload', 'rate'], { env: { UNHALT_HOME: home } });
    expect(saved.code, saved.stderr).toBe(0);
    const refused = await runCli(['tune', '--config', 'cpus=1', '--workload', 'rate', '--budget', '30s'], { env: { UNHALT_HOME: home } });
    expect(refused.stderr).toBe('unhalt: --workload rate is a saved benchmark: tune it on a VM of the library (unhalt tune VM --workload rate)\n');
    const wrongGoal = await runCli(['tune', 'blk', '--workload', 'rate', '--goal', 'latency-p50', '--budget', '30s'], { env: { UNHALT_HOME: home } });
    expect(wrongGoal.stderr).toBe('unhalt: workload rate measures a rate (ops/s), not a latency; use --goal throughput\n');
    const r = await runCli(['tune', 'blk', '--workload', 'rate', '--budget', '30s', '--format', 'json'], { env: { UNHALT_HOME: home }, killAfterMs: scaled(180_000) });
    expect(r.code, r.stderr).toBe(0);
    const j = JSON.parse(r.stdout);
    expect(j.tune).toMatchObject({ goal: 'throughput', workload: 'rate', vmName: 'blk', vm: { name: 'blk', image: blkDisk }, bench: { metric: 'rate=([0-9.]+)', higherIsBetter: true } });
    expect(j.rows.length).toBeGreaterThanOrEqual(2);
    expect(j.rows[0]).toMatchObject({ config: 'current', unit: 'ops/s' });
    expect(j.advice.recommendation.kind).toMatch(/^(keep|change)$/);
    expect(j.conditions).toMatchObject({ kvm: { haltPollNs: expect.any(String) }, load: { samples: expect.any(Number) } });
    // A recommendation is the VM's own configuration (its disk as saved), never the runs' throwaway one.
    if (j.recommendedConfig) expect(j.recommendedConfig).toContain(`disk=${blkDisk}`), expect(j.recommendedConfig).not.toContain('snapshot');
    expect(sha(blkDisk)).toBe(before);
  }, scaled(240_000));

  it('a command that leaves a background child holding its stdout still gives its figure', async () => {
    const { home } = await homeWithVms();
    const t0 = performance.now();
    const r = await runCli(['bench', '--vm', 'blk', ...AB, '--runs', '1', '--ready', 'flushed, holding', '--metric', 'v=(\\d+)',
      '--host-cmd', "sh -c 'sleep 20 & echo v=5'", '--format', 'json'], { env: { UNHALT_HOME: home } });
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout).rows.map((x: { median: number }) => x.median)).toEqual([5, 5]);
    expect(performance.now() - t0).toBeLessThan(scaled(15_000)); // not the sleep's 20 s
  }, scaled(120_000));

  it('refuses bad input in one line, before anything runs', async () => {
    const { home } = await homeWithVms();
    const cases: [string[], string][] = [
      [['--vm', 'web', ...AB, '--host-cmd', 'x'], "--host-cmd needs --metric 'REGEX' with one capture group: the figure in the command's output, such as 'latency_ms=([0-9.]+)'"],
      [['--vm', 'web', ...AB, '--workload', 'timer', '--metric', 'v=(\\d)'], "--metric goes with --host-cmd 'CMD' or --guest-cmd 'CMD' (the user's own benchmark); add one or drop --metric"],
      [['--vm', 'web', ...AB, '--host-cmd', 'x', '--guest-cmd', 'y', '--metric', 'v=(\\d)'], '--host-cmd and --guest-cmd both name what to measure: give one'],
      [['--vm', 'web', ...AB, '--guest-cmd', 'y'], "--guest-cmd needs --metric 'REGEX' with one capture group: the figure in the command's output, such as 'latency_ms=([0-9.]+)'"],
      [['--vm', 'web', ...AB, '--guest-cmd', 'y', '--metric', 'v=(\\d)'], 'a guest command runs through the Linux agent, which the probe guest does not have: use --guest linux, or --vm with a Linux VM (an imported one has the agent)'],
      [['--vm', 'web', ...AB, '--host-cmd', "x 'y", '--metric', 'v=(\\d)'], 'the command has an unbalanced single quote (at character 3): close it'],
      [['--vm', 'web', ...AB, '--host-cmd', 'x', '--metric', 'v=\\d'], "--metric must have exactly one capture group (the figure), such as 'latency_ms=([0-9.]+)'; it has 0"],
      [['--vm', 'web', ...AB, '--host-cmd', 'x', '--metric', 'v=(\\d)', '--save-workload', 'timer'], "--save-workload timer: that is a built-in workload's name; choose another (a saved workload never shadows one of ours)"],
      [['--vm', 'web', ...AB, '--workload', 'timer', '--host-cmd', 'x', '--metric', 'v=(\\d)'], '--workload and --host-cmd both name what to measure: give one (save a command with --save-workload NAME, reuse it with --workload NAME)'],
      [['--vm', 'web', '--guest', 'probe', ...AB, '--workload', 'timer'], '--guest goes without --vm (a library VM has its guest); drop --guest'],
      [['--vm', 'web', '--config', 'a=disk=/etc/passwd', '--config', 'b=cpus=1', '--workload', 'timer'], "configuration \"a\": disk= is not a bench knob: the runs use the VM's own disks, each attached snapshot=on; drop it"],
      [['--vm', 'nope', ...AB, '--workload', 'timer'], `no VM named "nope" in ${join(home, 'vms.json')}; VMs: web, blk`],
      [['--vm', 'web', ...AB, '--workload', 'mine'], 'unknown probe workload "mine"; valid: ipi, timer, spinlock, pio, idle'],
    ];
    for (const [args, message] of cases) {
      const r = await runCli(['bench', ...args], { env: { UNHALT_HOME: home } });
      expect(r.code, args.join(' ')).toBe(1);
      expect(r.stderr).toBe(`unhalt: ${message}\n`);
    }
    // Nothing ran: no experiment kept, no workload saved.
    expect(readdirSync(home).filter((f) => f === 'experiments' || f === 'workloads').flatMap((f) => readdirSync(join(home, f)))).toEqual([]);
  }, scaled(120_000));

  it('the API runs a host command only once it was confirmed, on a VM named by its id', async () => {
    const home = tempHome('bench-vm-api');
    const shown: string[] = [];
    const svc = await createService({ home, announce: (t) => shown.push(t) });
    try {
      const vm = await svc.createVm({ name: 'echo', guest: 'probe', cpus: 1, append: 'scenario=echo' });
      const argv = [node, '-e', 'console.log("v=7")'];
      const spec = (bench: Record<string, unknown>) => ({ vm: vm.id, runs: 1, configs: [{ name: 'a', config: 'halt-poll-ns=0' }, { name: 'b', config: 'halt-poll-ns=200000' }], bench: { metric: 'v=(\\d+)', ready: 'probe> ', ...bench } });
      const confirmFirst = 'a host command from the API must be confirmed first: requestHostCommand(argv), then confirmHostCommand(requestId, code) with the code the person at this machine was shown, then give bench.hostCmdId';
      expect(await rejection(svc.startExperiment(spec({ hostCmd: argv }) as never))).toMatchObject({ code: 'invalid', message: confirmFirst });
      expect(await rejection(svc.startExperiment(spec({ hostCmdId: '0123456789abcdef' }) as never))).toMatchObject({ code: 'invalid', message: `host command 0123456789abcdef was never confirmed: ${confirmFirst}` });
      expect(await rejection(svc.startExperiment({ ...spec({}), vm: { name: 'x', config: {} } } as never))).toMatchObject({ code: 'invalid', message: 'vm must be the id of a VM of the library' });
      expect(await rejection(svc.requestHostCommand('sh -c x' as never))).toMatchObject({ code: 'invalid', message: expect.stringMatching(/must be a list of one or more strings/) });
      // The token holder gets a request, never its code: that goes to the person at this machine.
      const asked = await svc.requestHostCommand(argv);
      expect(asked).toEqual({ requestId: expect.any(String), argv });
      const code = /type the code (\d{3}) (\d{3})/.exec(shown.at(-1)!)!.slice(1).join('');
      expect(shown.at(-1)).toContain(`run this command on this machine: ${node} -e 'console.log("v=7")'`);
      const wrong = code === '000000' ? '000001' : '000000';
      expect(await rejection(svc.confirmHostCommand(asked.requestId, wrong))).toMatchObject({ code: 'invalid', message: 'wrong code: type the 6 digits Unhalt showed where it runs (2 tries left)' });
      const confirmed = await svc.confirmHostCommand(asked.requestId, `${code.slice(0, 3)} ${code.slice(3)}`);
      expect(confirmed).toEqual({ id: expect.stringMatching(/^[0-9a-f]{16}$/), argv });
      // A code works once.
      expect(await rejection(svc.confirmHostCommand(asked.requestId, code))).toMatchObject({ code: 'invalid', message: expect.stringMatching(/^no such host command request/) });
      const started = await svc.startExperiment(spec({ hostCmdId: confirmed.id }) as never);
      let d = await svc.getExperiment(started.id);
      for (const t0 = performance.now(); d.state === 'running' && performance.now() - t0 < scaled(120_000);) {
        await new Promise((r) => setTimeout(r, 200));
        d = await svc.getExperiment(started.id);
      }
      expect(d.state, JSON.stringify(d).slice(0, 2000)).toBe('done');
      expect(d.rows.map((x) => [x.config, x.median])).toEqual([['a', 7], ['b', 7]]);
      expect(d.spec).toMatchObject({ vm: { name: 'echo' }, bench: { hostCmd: argv, hostCmdId: confirmed.id } });
      // A saved workload runs from the API only with the command it was confirmed with: a file
      // edited to run something else under a confirmed id is refused.
      saveWorkload(join(home, 'workloads'), 'edited', { hostCmd: ['sh', '-c', 'id'], hostCmdId: confirmed.id, metric: 'v=(\\d+)' });
      const { bench: _b, ...noBench } = spec({});
      expect(await rejection(svc.startExperiment({ ...noBench, workload: 'edited' } as never)))
        .toMatchObject({ code: 'invalid', message: `the saved workload edited's host command is not a confirmed one: ${confirmFirst}` });
      saveWorkload(join(home, 'workloads'), 'seven', { hostCmd: argv, hostCmdId: confirmed.id, metric: 'v=(\\d+)', ready: 'probe> ' });
      const bySaved = await svc.startExperiment({ ...noBench, workload: 'seven' } as never);
      let s2 = await svc.getExperiment(bySaved.id);
      for (const t0 = performance.now(); s2.state === 'running' && performance.now() - t0 < scaled(120_000);) {
        await new Promise((r) => setTimeout(r, 200));
        s2 = await svc.getExperiment(bySaved.id);
      }
      expect(s2.rows.map((x) => x.median)).toEqual([7, 7]);
    } finally {
      await svc.shutdown();
    }
  }, scaled(180_000));
});

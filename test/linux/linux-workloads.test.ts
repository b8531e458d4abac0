// The workloads disk and a user's own root file system, with a stock Linux on hardware-semantics
// KVM (the nested lane's L1): `unhalt bench --guest linux --workload perf-messaging` runs
// Debian's `perf bench sched messaging` in the guest from the disk it attaches; in one guest the
// agent's own pipe/messaging figures agree with perf's within 20 %; every tool of the disk runs
// and reports; and a distribution's own kernel and initrd (a Debian root made with mmdebstrap,
// its /boot's vmlinuz and the initrd Debian's initramfs-tools made) find a root file system on
// our virtio disk by `root=/dev/vda` and hand over to it, up to a shell there (where that root
// was not built: the kit's kernel and initramfs with a busybox root the test makes).
import { spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import type { AgentEvent } from '../../electron/vmm/agent/line-protocol.ts';
import { nextCalibrationSize } from '../../electron/experiments/pacing.ts';
import { median, medianInterval } from '../../electron/experiments/stats.ts';
import { resolveMachine } from '../../electron/vmm/config/resolve.ts';
import { validateConfig, type VmConfig } from '../../electron/vmm/config/vm-config.ts';
import { LINUX_BZIMAGE, LINUX_INITRD, LINUX_KIT_DIR, LINUX_WORKLOADS_DISK, linuxKitBuilt } from '../../electron/vmm/guests-linux.ts';
import { probeHost } from '../../electron/vmm/machine/host-caps.ts';
import { VirtualMachine } from '../../electron/vmm/vm.ts';
import { runCli } from '../support/cli.ts';
import { hardwareKvm, NEEDS_HARDWARE } from '../support/kvm-semantics.ts';
import { kvmAvailable, watch, type Watched } from '../support/probe.ts';
import { scaled } from '../support/time-scale.ts';

const built = linuxKitBuilt() && existsSync(LINUX_WORKLOADS_DISK);
const hw = kvmAvailable && built && hardwareKvm();
if (!hw) console.log(`linux-workloads: skipped: ${built ? NEEDS_HARDWARE : 'the Linux kit or its workloads disk is not built (npm run build:linux)'}`);

const STEP_MS = scaled(60_000);
const DEBIAN_ROOT = `${LINUX_KIT_DIR}debian-root.ext4`;
const dir = mkdtempSync(join(tmpdir(), 'unhalt-linux-workloads-'));
const home = mkdtempSync(join(tmpdir(), 'unhalt-linux-workloads-home-'));

let running: VirtualMachine | undefined;
afterEach(async () => {
  if (running && running.state !== 'stopped') await running.stop();
  running = undefined;
});
afterAll(() => {
  rmSync(dir, { recursive: true, force: true });
  rmSync(home, { recursive: true, force: true });
});

async function start(config: Partial<VmConfig>): Promise<Watched> {
  const { spec } = resolveMachine(validateConfig({ guest: 'linux', cpus: 2, memoryMiB: 512, name: 'linux-workloads', ...config }), probeHost());
  running = await VirtualMachine.start(spec);
  return watch(running);
}

/** An agent session: `run` sends one command and resolves with its result event and `done`. */
function agent(vm: VirtualMachine) {
  const events: AgentEvent[] = [];
  let waiter: (() => void) | undefined;
  vm.on('agent', (e: AgentEvent) => { events.push(e); waiter?.(); });
  const until = async (test: (e: AgentEvent) => boolean, what: string, ms = STEP_MS): Promise<AgentEvent> => {
    const end = performance.now() + ms;
    for (let seen = 0; ;) {
      for (; seen < events.length; seen++) if (test(events[seen]!)) return events.splice(0, seen + 1).at(-1)!;
      // A VM that has ended can say nothing more: fail now, not at a deadline scaled for emulation.
      if (vm.state === 'stopped') throw new Error(`no ${what}: the VM ended; agent said: ${events.map((e) => e.event).join(', ')}`);
      if (performance.now() > end) throw new Error(`no ${what} within ${ms / 1000} s; agent said: ${events.map((e) => e.event).join(', ')}`);
      await new Promise<void>((r) => { waiter = r; setTimeout(r, 200); });
    }
  };
  return {
    ready: () => until((e) => e.event === 'ready', 'agent readiness'),
    async run(cmd: string, event: string): Promise<AgentEvent> {
      vm.sendAgent(`run ${cmd}\n`);
      const result = await until((e) => e.event === event || e.event === 'error' || e.event === 'done', `${event} after "run ${cmd}"`, 4 * STEP_MS);
      expect(result.event, `run ${cmd}: ${JSON.stringify(result.fields)}`).toBe(event);
      const done = await until((e) => e.event === 'done', `done after "run ${cmd}"`);
      expect(done.fields.status).toBe(0);
      return result;
    },
  };
}

describe.skipIf(!hw)('the workloads disk in a stock Linux on hardware-semantics KVM', () => {
  it('unhalt bench --guest linux --workload perf-messaging runs Debian\'s perf bench sched messaging from the disk it attaches', async () => {
    const out = join(dir, 'bench.json');
    const r = await runCli(['bench', '--guest', 'linux', '--workload', 'perf-messaging', '--workload-args', 'groups=2 loops=20', '--runs', '1',
      '--config', 'A=cpus=2,kvm-pv-unhalt=off', '--config', 'B=cpus=2,kvm-pv-unhalt=on', '--format', 'json', '--output', out],
    // The check's own budget, not runCli's default: two Linux boots and runs took over its 90 s in L1.
    { env: { ...process.env, UNHALT_HOME: home }, killAfterMs: 11 * STEP_MS });
    expect(r.code, r.stdout + r.stderr).toBe(0);
    const result = JSON.parse(readFileSync(out, 'utf8'));
    console.log(`linux-workloads bench: ${result.rows.map((x: { config: string; median: number; unit: string }) => `${x.config} ${x.median.toFixed(1)} ${x.unit}`).join('; ')}`);
    expect(result.failures).toEqual([]);
    expect(result.rows).toHaveLength(2);
    for (const row of result.rows) expect(row.median).toBeGreaterThan(0);
    expect(result.unit).toBe('ms');
  }, 12 * STEP_MS);

  it('unhalt bench --guest linux --guest-cmd: the user\'s own command in the guest through the agent, the tools disk on its PATH, an A/B of halt-poll-ns', async () => {
    const out = join(dir, 'guest-cmd.json');
    const r = await runCli(['bench', '--guest', 'linux', '--guest-cmd', 'perf bench sched pipe -l 2000', '--metric', 'Total time: ([0-9.]+) \\[sec\\]', '--unit', 's', '--runs', '1',
      '--config', 'a=cpus=2,halt-poll-ns=0', '--config', 'b=cpus=2,halt-poll-ns=200000', '--format', 'json', '--output', out],
    { env: { ...process.env, UNHALT_HOME: home }, killAfterMs: 6 * STEP_MS });
    expect(r.code, r.stdout + r.stderr).toBe(0);
    const result = JSON.parse(readFileSync(out, 'utf8'));
    console.log(`linux-workloads guest-cmd: ${result.rows.map((x: { config: string; median: number }) => `${x.config} ${x.median} s`).join('; ')}`);
    expect(result.failures).toEqual([]);
    expect(result.spec).toMatchObject({ workload: 'guest-cmd', bench: { guestCmd: ['perf', 'bench', 'sched', 'pipe', '-l', '2000'] } });
    for (const row of result.rows) expect(row.median).toBeGreaterThan(0);
    expect(result.environment.configs.map((c: { config: { haltPollNs: number } }) => c.config.haltPollNs)).toEqual([0, 200000]);
    // A command that fails in the guest is a failed run with its reason, never a number.
    const failing = await runCli(['bench', '--guest', 'linux', '--guest-cmd', "sh -c 'echo v=1; echo no server >&2; exit 3'", '--metric', 'v=(\\d+)', '--runs', '1',
      '--config', 'a=cpus=1', '--config', 'b=cpus=2'], { env: { ...process.env, UNHALT_HOME: home }, killAfterMs: 5 * STEP_MS });
    expect(failing.code).toBe(2);
    expect(failing.stderr).toContain("unhalt: failed: a (unhalt) run 1: the guest command (sh -c 'echo v=1; echo no server >&2; exit 3') exited with status 3: no server");
  }, 12 * STEP_MS);

  it('in one guest the agent\'s pipe and messaging agree with perf bench sched within 20 %; cyclictest, iperf3, stress-ng and sockperf\'s request-response run and report', async () => {
    // One vCPU: both tools then time the same thing, context switches on one CPU. With two, where
    // each side of a round trip runs is the scheduler's choice, and in L1 a round trip that
    // crosses vCPUs costs an IPI through TCG's emulated SVM (~1.7 ms against tens of us on one
    // vCPU): a run 2026-12-02 read agent/perf 0.67 for pipe and 1.76 for messaging with two.
    const g = await start({ cpus: 1, disks: [{ path: LINUX_WORKLOADS_DISK, readonly: true }] });
    const a = agent(g.vm);
    await a.ready();
    expect(g.console()).toMatch(/workloads disk \/dev\/vda on \/opt\/workloads: cyclictest iperf3 perf sockperf stress-ng/);
    const tools = ['ours', 'perf'] as const;
    type Tool = (typeof tools)[number];
    type Work = 'pipe' | 'messaging';
    const cmds = {
      ours: { pipe: (n: number) => a.run(`pipe loops=${n}`, 'pipe'), messaging: (n: number) => a.run(`messaging groups=1 fds=20 loops=${n}`, 'messaging') },
      perf: { pipe: (n: number) => a.run(`perf-pipe loops=${n}`, 'perf_pipe'), messaging: (n: number) => a.run(`perf-messaging groups=1 loops=${n}`, 'perf_messaging') },
    };
    const time = async (tool: Tool, w: Work, n: number) => (await cmds[tool][w](n)).fields.total_ns!;
    // What is compared is the time the loops add: each tool's fixed cost is taken out (perf times
    // its workers' exits, a large process that links Python, Perl, libdw...; ours its fork). The
    // fastest of two 1-loop runs of each tool is that cost (in a one-CPU L1, 2026-12-02: 12 ms
    // perf-pipe, ~500 ms perf-messaging, against our 7 and 90 ms). In L1 whole runs are 0.85x to
    // 1.27x one another whenever the host has other work, so the loops must add far more than
    // either fixed cost, or that cost's spread decides the ratio: a run of 2026-12-02 sized
    // messaging from one 5-loop run of ours (its fixed cost counted as loops, so too few loops)
    // and read agent/perf -0.65. So each tool's cost per loop is measured as Go's testing.B
    // does (grow the size until the loops add at least twice the fixed cost), and the compared
    // runs add at least TARGET_NS and 8x either fixed cost. The two tools then run in pairs, each
    // pair in turn ours-first and perf-first, and the median of the pairs' ratios is compared.
    const PAIRS = 8;
    const TARGET_NS = { pipe: 4e9, messaging: 2e9 };
    const MAX_LOOPS = { pipe: 100_000_000, messaging: 1_000_000 };
    const costOf = async (tool: Tool, w: Work) => {
      let fixed = Infinity;
      for (let i = 0; i < 2; i++) fixed = Math.min(fixed, await time(tool, w, 1));
      // Calibration's own growth rule (pacing.ts), on the time the loops add, which must reach twice the fixed cost.
      const enoughMs = Math.max(2 * fixed, 2e8) / 1e6;
      for (let n = w === 'pipe' ? 1000 : 4; ;) {
        const added = (await time(tool, w, n)) - fixed;
        const next = nextCalibrationSize(n, added / 1e6, MAX_LOOPS[w], enoughMs);
        if (next === undefined) return { fixed, perLoop: Math.max(added, 1) / (n - 1) };
        n = next;
      }
    };
    // Under emulation (the nested lane's L1, QEMU TCG, sharing the host with the other L1) single
    // pairs scatter widely (runs of 2026-12-03 read messaging pairs 0.46-1.51, pipe 0.49-1.87,
    // medians 1.04-1.08 and 0.98-0.99): so pairs are added, two at a time to keep the order
    // balanced, while the median's 95 % interval (stats.ts medianInterval, distribution-free) still
    // straddles a bound of the 20 %, up to MAX_PAIRS; then the median must lie within 20 %, on any CPU.
    const MAX_PAIRS = 32;
    const BOUNDS = [0.8, 1.2] as const;
    const straddles = (ci: [number, number] | null) => !ci || BOUNDS.some((b) => ci[0] < b && b < ci[1]);
    const ratio = { pipe: 0, messaging: 0 };
    const shown: string[] = [];
    for (const w of ['pipe', 'messaging'] as const) {
      const cost = { ours: await costOf('ours', w), perf: await costOf('perf', w) };
      const n = Math.min(MAX_LOOPS[w], Math.ceil(Math.max(...tools.map((t) => Math.max(TARGET_NS[w], 8 * cost[t].fixed) / cost[t].perLoop))));
      const pairs: number[] = [];
      const pair = async () => {
        const t = { ours: 0, perf: 0 };
        for (const tool of pairs.length % 2 ? [...tools].reverse() : tools) t[tool] = await time(tool, w, n);
        pairs.push((t.ours - cost.ours.fixed) / (t.perf - cost.perf.fixed));
      };
      for (let i = 0; i < PAIRS; i++) await pair();
      while (pairs.length < MAX_PAIRS && straddles(medianInterval(pairs))) { await pair(); await pair(); }
      ratio[w] = median(pairs);
      const ci = medianInterval(pairs)!;
      const c = (t: Tool) => `${t} ${(cost[t].fixed / 1e6).toFixed(1)} ms + ${(cost[t].perLoop / 1e3).toFixed(1)} us/loop`;
      shown.push(`${w} ${ratio[w].toFixed(3)} (95 % interval ${ci[0].toFixed(2)}-${ci[1].toFixed(2)}) of ${pairs.length} pairs at loops=${n} (pairs ${pairs.map((r) => r.toFixed(2)).join(' ')}; ${c('ours')}, ${c('perf')})`);
    }
    console.log(`linux-workloads: agent/perf, medians of pairs: ${shown.join('; ')}`);
    for (const w of ['pipe', 'messaging'] as const) {
      expect(ratio[w], `${w}: the loops' time of agent and perf: ${shown.join('; ')}`).toBeGreaterThan(BOUNDS[0]);
      expect(ratio[w], `${w}: the loops' time of agent and perf: ${shown.join('; ')}`).toBeLessThan(BOUNDS[1]);
    }
    const cyc = await a.run('cyclictest loops=200 interval_us=1000', 'cyclictest');
    expect(cyc.fields.samples).toBeGreaterThanOrEqual(200);
    expect(cyc.fields.p50_ns).toBeLessThanOrEqual(cyc.fields.max_ns!);
    const ip = await a.run('iperf3-tcp mbytes=16', 'iperf3_tcp');
    expect(ip.fields.bits_per_s).toBeGreaterThan(0);
    const sw = await a.run('stress-ng-switch workers=1 ops=2000', 'stress_switch');
    expect(sw.fields.ops_per_s).toBeGreaterThan(0);
    const rr = await a.run('sockperf-tcp-rr seconds=2', 'sockperf_rr');
    expect(rr.fields.observations).toBeGreaterThan(0);
    expect(rr.fields.p50_ns).toBeGreaterThan(0);
    expect(rr.fields.p50_ns).toBeLessThanOrEqual(rr.fields.p99_ns!);
    expect(rr.fields.p99_ns).toBeLessThanOrEqual(rr.fields.max_ns!);
    console.log(`linux-workloads: sockperf tcp rr in this guest: ${rr.fields.observations} round trips, p50 ${(rr.fields.p50_ns! / 1e3).toFixed(1)} us, p99 ${(rr.fields.p99_ns! / 1e3).toFixed(1)} us`);
    g.vm.sendAgent('poweroff\n');
    expect((await g.vm.ended).kind).toBe('poweroff');
  }, 30 * STEP_MS);
});

/** A root file system of busybox (Debian's busybox-static, from the kit's package cache) with an init that says where it is. */
function busyboxRoot(): string {
  const deb = readdirSync(`${LINUX_KIT_DIR}.debs`).find((f) => f.startsWith('busybox-static_'));
  expect(deb, 'the kit keeps busybox-static in its .debs cache').toBeTruthy();
  const tree = join(dir, 'root');
  spawnSync('dpkg-deb', ['-x', `${LINUX_KIT_DIR}.debs/${deb}`, tree]);
  for (const d of ['proc', 'sys', 'dev', 'run', 'sbin', 'etc']) mkdirSync(join(tree, d), { recursive: true });
  for (const applet of ['sh', 'cat', 'head', 'grep', 'mount']) symlinkSync('busybox', join(tree, 'bin', applet));
  writeFileSync(join(tree, 'etc', 'os-release'), 'PRETTY_NAME="busybox root of the test"\n');
  return tree;
}

describe.skipIf(!hw)('a user\'s own root file system on a virtio disk', () => {
  it('a distribution\'s own kernel and initrd (Debian\'s initramfs-tools) find root=/dev/vda on our virtio-blk and hand over to its init: a shell answers, poweroff', async () => {
    // The nested lane builds the Debian root before L1 (test/nested/nested.test.ts); elsewhere it
    // is built by hand (root, mmdebstrap), and without it the kit's kernel and initramfs boot a
    // busybox root the test makes (the same hand-over, but not a distribution's initrd).
    if (!existsSync(DEBIAN_ROOT) && process.env.UNHALT_NESTED_LANE) throw new Error(`${DEBIAN_ROOT} is missing: the nested lane builds it before L1`);
    const debian = existsSync(DEBIAN_ROOT);
    let g: Watched;
    if (debian) {
      // The root's own kernel and initrd, taken out of its /boot as a user copies them from an
      // install; the image itself is attached read-only and mounted ro, so it is never changed
      // (and needs no copy: it is hundreds of MiB). Its init is a shell: a distribution's
      // /sbin/init is systemd, too slow for L1. (No rootdelay=: initramfs-tools sleeps that long
      // before it even looks; it waits up to 30 s for root= by itself.)
      const stamp = JSON.parse(readFileSync(DEBIAN_ROOT.replace(/\.ext4$/, '.json'), 'utf8')) as { vmlinuz?: string; initrd?: string };
      if (!stamp.vmlinuz || !stamp.initrd) throw new Error(`${DEBIAN_ROOT} was built without a kernel and initrd: rebuild it (node native/guest/linux/build-debian-root.mjs --force)`);
      const kernel = join(dir, 'vmlinuz');
      const initrd = join(dir, 'initrd.img');
      for (const [from, to] of [[stamp.vmlinuz, kernel], [stamp.initrd, initrd]] as const) {
        const d = spawnSync('debugfs', ['-R', `dump ${from} ${to}`, DEBIAN_ROOT], { encoding: 'utf8' });
        expect(existsSync(to) && readFileSync(to).length > 0, `debugfs dump ${from}: ${d.stderr}`).toBe(true);
      }
      g = await start({
        guest: 'custom', kernel, initrd, disks: [{ path: DEBIAN_ROOT, readonly: true }],
        append: 'console=ttyS0 panic=-1 root=/dev/vda ro init=/bin/sh',
      } as Partial<VmConfig>);
      // initramfs-tools' own /init says this first; then it mounts root= and runs init= there.
      await g.waitForConsole(/Loading, please wait\.\.\./, 5 * STEP_MS);
      let from = g.console().length;
      // The shell is there once it answers (its prompt may come before or after the kernel's last lines).
      for (const end = performance.now() + 5 * STEP_MS; !/OWN-ROOT-42/.test(g.console().slice(from));) {
        if (performance.now() > end) throw new Error(`no shell on the Debian root; console: ${JSON.stringify(g.console().slice(-800))}`);
        g.vm.sendConsole('echo OWN-ROOT-$((6*7))\r');
        await g.waitForConsole(/OWN-ROOT-42/, STEP_MS / 4).catch(() => {});
      }
      from = g.console().length;
      g.vm.sendConsole('head -1 /etc/os-release; grep " / " /proc/mounts; grep -E "^virtio_(blk|pci) " /proc/modules | cut -d" " -f1; echo answer=$((6*7))\r');
      await g.waitForConsole(/answer=42/, STEP_MS);
      const answer = g.console().slice(from);
      expect(answer).toMatch(/PRETTY_NAME="Debian GNU\/Linux/);
      expect(answer).toMatch(/\/dev\/vda \/ ext4 ro/);
      // Debian's initrd loaded the virtio drivers (modules of its kernel) for our PCI device.
      expect(answer).toMatch(/^virtio_blk\r?$/m);
      expect(answer).toMatch(/^virtio_pci\r?$/m);
    } else {
      console.log(`linux-workloads: ${DEBIAN_ROOT} not built (node native/guest/linux/build-debian-root.mjs, as root): a busybox root with the kit's kernel and initramfs`);
      const tree = busyboxRoot();
      const img = join(dir, 'root.ext4');
      expect(spawnSync('mke2fs', ['-q', '-F', '-t', 'ext4', '-E', 'root_owner=0:0', '-d', tree, img, '64M']).status).toBe(0);
      const init = join(dir, 'own-init');
      writeFileSync(init, '#!/bin/sh\nmount -t proc proc /proc 2>/dev/null\necho "own root: $(cat /etc/os-release | head -1)"\necho OWN-ROOT-SHELL\nexec /bin/sh\n');
      chmodSync(init, 0o755);
      expect(spawnSync('debugfs', ['-w', '-R', `write ${init} /own-init`, img]).status).toBe(0);
      expect(spawnSync('debugfs', ['-w', '-R', 'sif /own-init mode 0100755', img]).status).toBe(0);
      g = await start({
        guest: 'custom', kernel: LINUX_BZIMAGE, initrd: LINUX_INITRD, disks: [{ path: img }],
        append: 'console=ttyS0 panic=-1 root=/dev/vda rw init=/own-init',
      } as Partial<VmConfig>);
      await g.waitForConsole('OWN-ROOT-SHELL', 3 * STEP_MS);
      expect(g.console()).toMatch(/switching to the root file system on \/dev\/vda/);
      const from = g.console().length;
      // The marker last: once it is in, the mounts line the shell wrote before it is in too.
      g.vm.sendConsole('cat /proc/mounts | grep " / "; echo answer=$((6*7))\r');
      await g.waitForConsole(/answer=42/, STEP_MS);
      expect(g.console().slice(from)).toMatch(/\/dev\/vda \/ ext4 rw/);
    }
    g.vm.sendConsole('echo o > /proc/sysrq-trigger\r');
    expect((await g.vm.ended).kind).toBe('poweroff');
  }, 14 * STEP_MS);
});

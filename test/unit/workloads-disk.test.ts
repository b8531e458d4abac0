// The Linux kit's workloads disk on this host (no KVM needed): the build (Debian packages and
// their library closure, resolved inside the unpacked packages), its cache (reused, rebuilt when
// an input changes), the image's contents read with debugfs, every tool run on the HOST from the
// tree with its bundled libraries, the agent's tool workloads end to end through its --stdio
// command path, and `unhalt bench`'s checks of the new workloads.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { prepareExperiment } from '../../electron/experiments/runner.ts';
import type { ExperimentSpec } from '../../electron/experiments/types.ts';
import { LINUX_WORKLOADS, linuxWorkloadArgs, workload } from '../../electron/experiments/workloads.ts';
import { type AgentEvent, parseAgentLine } from '../../electron/vmm/agent/line-protocol.ts';
import { LINUX_BZIMAGE, LINUX_HOST_AGENT, LINUX_INITRD, LINUX_KIT_DIR, LINUX_WORKLOADS_DISK, LINUX_WORKLOADS_TREE } from '../../electron/vmm/guests-linux.ts';
import { AGENT_UNIT_SRC, START_AGENT_SRC, toolsDiskAgentFiles } from '../../native/guest/linux/tools-disk.mjs';
import { runCli } from '../support/cli.ts';
import { kvmAvailable } from '../support/probe.ts';
import { simulatedHost } from '../support/simulated-host.ts';

const BUILD = fileURLToPath(new URL('../../native/guest/linux/build-workloads-disk.mjs', import.meta.url));
const AGENT_BUILD = fileURLToPath(new URL('../../native/guest/linux/build-workloads.mjs', import.meta.url));
const TOOLS = ['perf', 'cyclictest', 'iperf3', 'stress-ng', 'sockperf'];
const built = existsSync(LINUX_WORKLOADS_DISK) && existsSync(`${LINUX_KIT_DIR}workloads.json`);
if (!built) console.log('workloads-disk: the kit\'s workloads disk is not built (npm run build:linux): its content checks are skipped');
const aptHere = spawnSync('apt-cache', ['policy', 'iperf3'], { encoding: 'utf8' }).stdout.includes('Candidate:');
const scratch = mkdtempSync(join(tmpdir(), 'unhalt-workloads-disk-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

const build = (...args: string[]) => spawnSync(process.execPath, [BUILD, '--out', scratch, '--debs', `${LINUX_KIT_DIR}.debs`, ...args], { encoding: 'utf8' });
/** The agent's `@u1` events in its output. */
const eventsOf = (out: string): AgentEvent[] => out.split('\n').map(parseAgentLine).filter((e): e is AgentEvent => typeof e === 'object' && e !== null);
/** Whether an ELF file names a loader (PT_INTERP): a static one does not. */
const elfNeeds = (file: string) => {
  const b = readFileSync(file);
  const phoff = Number(b.readBigUInt64LE(32));
  for (let i = 0; i < b.readUInt16LE(56); i++) if (b.readUInt32LE(phoff + i * b.readUInt16LE(54)) === 3) return true;
  return false;
};
const debugfs = (img: string, cmd: string) => {
  const r = spawnSync('debugfs', ['-R', cmd, img], { encoding: 'utf8' });
  expect(r.status, r.stderr).toBe(0);
  return r.stdout;
};

describe.skipIf(!aptHere)('building a workloads disk', () => {
  it('builds from the packages, reuses its cache, rebuilds when the inputs change, refuses an unknown tool', () => {
    const first = build('--tools', 'iperf3');
    expect(first.status, first.stderr).toBe(0);
    expect(first.stdout).toMatch(/built .*workloads\.ext4: 1 tools, \d+ libraries/);
    const stamp = JSON.parse(readFileSync(join(scratch, 'workloads.json'), 'utf8'));
    expect(stamp.tools.iperf3.package).toBe('iperf3');
    // iperf3's library is in its own package (libiperf0): found through the closure, not the host.
    expect(stamp.libraries).toEqual(expect.arrayContaining(['libiperf.so.0', 'libc.so.6']));
    expect(debugfs(join(scratch, 'workloads.ext4'), 'stats')).toMatch(/Filesystem volume name:\s+unhalt-workloads/);
    // The tools disk's agent files (tools-disk.mjs): the static agent, its unit and sh starter.
    const agentDir = debugfs(join(scratch, 'workloads.ext4'), 'ls -l /agent');
    for (const f of toolsDiskAgentFiles('')) {
      expect(agentDir).toMatch(new RegExp(`100${f.mode.toString(8)} .* ${basename(f.path).replace('.', '\\.')}\\s`));
      expect(Object.keys(stamp.agent)).toContain(f.path);
    }
    expect(debugfs(join(scratch, 'workloads.ext4'), 'cat /agent/unhalt-agent.service')).toBe(readFileSync(AGENT_UNIT_SRC, 'utf8'));
    expect(readFileSync(join(scratch, 'workloads', 'agent', 'start-agent'), 'utf8')).toBe(readFileSync(START_AGENT_SRC, 'utf8'));
    const agentElf = readFileSync(join(scratch, 'workloads', 'agent', 'unhalt-agent'));
    expect(agentElf.subarray(0, 4).toString('latin1')).toBe('\x7fELF');
    expect(elfNeeds(join(scratch, 'workloads', 'agent', 'unhalt-agent'))).toBe(false); // static: no loader, no libraries
    const again = build('--tools', 'iperf3');
    expect(again.status, again.stderr).toBe(0);
    expect(again.stdout).toMatch(/up to date/);
    expect(JSON.parse(readFileSync(join(scratch, 'workloads.json'), 'utf8')).image.sha256).toBe(stamp.image.sha256);
    const changed = build('--tools', 'iperf3,cyclictest');
    expect(changed.status, changed.stderr).toBe(0);
    expect(changed.stdout).toMatch(/built .*: 2 tools/);
    expect(debugfs(join(scratch, 'workloads.ext4'), 'ls /libexec')).toMatch(/cyclictest/);
    const bad = build('--tools', 'nope');
    expect(bad.status).toBe(1);
    expect(bad.stderr.trim()).toBe('workloads disk: unknown tool "nope"; valid: perf, cyclictest, iperf3, stress-ng, sockperf');
  }, 300_000);
});

describe.skipIf(!built)('the kit\'s workloads disk', () => {
  const stamp = built ? JSON.parse(readFileSync(`${LINUX_KIT_DIR}workloads.json`, 'utf8')) : undefined;

  it('the image holds every tool, its wrapper, the loader and every library the tools need (read with debugfs)', () => {
    expect(Object.keys(stamp.tools).sort()).toEqual([...TOOLS].sort());
    const bin = debugfs(LINUX_WORKLOADS_DISK, 'ls -l /bin');
    const libexec = debugfs(LINUX_WORKLOADS_DISK, 'ls -l /libexec');
    const lib = debugfs(LINUX_WORKLOADS_DISK, 'ls /lib');
    for (const t of TOOLS) {
      expect(bin).toMatch(new RegExp(`100755 .* ${t.replace('-', '\\-')}\\s`));
      expect(libexec).toMatch(new RegExp(`100755 .* ${t.replace('-', '\\-')}\\s`));
    }
    expect(stamp.libraries.length).toBeGreaterThan(10);
    for (const l of [stamp.loader, ...stamp.libraries]) expect(lib, l).toContain(l);
    // The image's bytes are what the stamp says.
    expect(readFileSync(LINUX_WORKLOADS_DISK).length).toBe(stamp.image.bytes);
  });

  it('each tool runs on the host from the tree with only its bundled libraries', () => {
    const expected: Record<string, RegExp> = { perf: /^perf version \d/, cyclictest: /cyclictest V \d/, iperf3: /^iperf 3\.\d+/, 'stress-ng': /^stress-ng, version \d/, sockperf: /^sockperf, version \d/ };
    for (const t of TOOLS) {
      // cyclictest has no --version: it prints its version in the complaint.
      const r = spawnSync(`${LINUX_WORKLOADS_TREE}bin/${t}`, ['--version'], { encoding: 'utf8', env: { PATH: '/usr/bin:/bin' } });
      expect(r.stdout + r.stderr, t).toMatch(expected[t]!);
    }
  });

  it('the agent runs each tool workload and reports its result lines (its --stdio command path, on the host)', () => {
    const b = spawnSync(process.execPath, [AGENT_BUILD, '--quiet'], { encoding: 'utf8' });
    expect(b.status, b.stderr).toBe(0);
    const input = ['run perf-pipe loops=2000', 'run perf-messaging groups=1 loops=5', 'run cyclictest loops=50 interval_us=500',
      'run iperf3-tcp mbytes=8', 'run stress-ng-switch workers=1 ops=2000', 'run sockperf-tcp-rr seconds=2', 'run perf-pipe loops=0'].join('\n');
    const r = spawnSync(LINUX_HOST_AGENT, ['--stdio'], { input: `${input}\n`, encoding: 'utf8', env: { ...process.env, UNHALT_WORKLOADS: LINUX_WORKLOADS_TREE }, timeout: 120_000 });
    expect(r.status, r.stderr).toBe(0);
    const events = eventsOf(r.stdout);
    const by = (name: string) => events.filter((e) => e.event === name);
    for (const w of LINUX_WORKLOADS.filter((x) => x.tool)) {
      const [result] = by(w.event);
      expect(result, `${w.name}: ${r.stdout}`).toBeTruthy();
      expect(w.value(result!), w.name).toBeGreaterThan(0);
      expect(by('done').some((d) => d.fields.workload === w.id && d.fields.status === 0), w.name).toBe(true);
    }
    // loops=0 is out of range: the agent refuses it as the TypeScript side does.
    expect(by('done').at(-1)!.fields).toMatchObject({ workload: 10, status: 1 });
    expect(r.stderr).toMatch(/perf-pipe: loops must be from 1 to 1000000000/);
  }, 150_000);

  it('every limit of a tool workload the runner allows, the agent allows too (and one past it, neither does)', () => {
    for (const w of LINUX_WORKLOADS.filter((x) => x.tool)) {
      const lines: string[] = [];
      for (const [key, p] of Object.entries(w.params!)) {
        for (const v of [p.min - 1, p.max + 1]) {
          expect(() => linuxWorkloadArgs(w, `${key}=${v}`), `${w.name} ${key}=${v}`).toThrow(`${w.name}: ${key} must be from ${p.min} to ${p.max}, got ${v}`);
          lines.push(`run ${w.name} ${key}=${v}`);
        }
      }
      const r = spawnSync(LINUX_HOST_AGENT, ['--stdio'], { input: `${lines.join('\n')}\n`, encoding: 'utf8', env: { ...process.env, UNHALT_WORKLOADS: LINUX_WORKLOADS_TREE } });
      const done = eventsOf(r.stdout).filter((e) => e.event === 'done');
      expect(done.map((d) => `${d.fields.workload}:${d.fields.status}`), w.name).toEqual(lines.map(() => `${w.id}:1`));
      // And the agent names the same range: one past each end being refused on both sides does
      // not rule out a stricter bound in C.
      for (const [key, p] of Object.entries(w.params!)) expect(r.stderr, `${w.name} ${key}`).toContain(`${w.name}: ${key} must be from ${p.min} to ${p.max}\n`);
    }
  });

  it('without the disk the agent says so: error no_workloads_disk=1, then a failed done', () => {
    const r = spawnSync(LINUX_HOST_AGENT, ['--stdio'], { input: 'run cyclictest\n', encoding: 'utf8', env: { ...process.env, UNHALT_WORKLOADS: join(scratch, 'none') } });
    const events = eventsOf(r.stdout);
    expect(events.find((e) => e.event === 'error')!.fields).toEqual({ workload: 12, no_workloads_disk: 1 });
    expect(events.find((e) => e.event === 'done')!.fields).toMatchObject({ workload: 12, status: 2 });
    expect(r.stderr).toMatch(/the VM has no workloads disk/);
  });
});

describe('unhalt bench with the tool workloads', () => {
  const spec = (over: Partial<ExperimentSpec> = {}): ExperimentSpec => ({
    guest: 'linux', workload: 'perf-messaging', workloadArgs: 'groups=2 loops=10', runs: 1,
    configs: [{ name: 'a', config: 'cpus=2' }, { name: 'b', config: 'cpus=2,kvm-pv-unhalt=off' }], ...over,
  });

  it.skipIf(!built)('accepts them and attaches the workloads disk read-only to every configuration', () => {
    for (const w of LINUX_WORKLOADS.filter((x) => x.tool)) {
      const p = prepareExperiment(spec({ workload: w.name, workloadArgs: '' }), simulatedHost());
      for (const c of p.prepared) expect(c.config.disks).toEqual([{ path: LINUX_WORKLOADS_DISK, readonly: true }]);
    }
    expect(prepareExperiment(spec(), simulatedHost()).linuxArgs).toEqual(['groups=2', 'loops=10']);
    // The agent's own workloads get no disk.
    expect(prepareExperiment(spec({ workload: 'pipe', workloadArgs: '' }), simulatedHost()).prepared[0]!.config.disks).toBeUndefined();
  });

  it('refuses bad arguments, --bare, and a user disk with one clear line each', () => {
    expect(() => prepareExperiment(spec({ workloadArgs: 'groups=0' }), simulatedHost())).toThrow('perf-messaging: groups must be from 1 to 200, got 0');
    expect(() => prepareExperiment(spec({ workload: 'cyclictest', workloadArgs: 'threads=2 fds=3' }), simulatedHost())).toThrow('cyclictest: unknown argument "fds"; valid: loops, interval_us, threads');
    expect(() => prepareExperiment(spec({ bare: true }), simulatedHost())).toThrow(/--bare is not available for perf-messaging: it runs Debian's perf from the workloads disk/);
    expect(() => prepareExperiment(spec({ workload: 'stress-ng-nope' }), simulatedHost())).toThrow(/unknown linux workload "stress-ng-nope"; valid: pipe, messaging, ctx, perf-pipe, perf-messaging, cyclictest, iperf3-tcp, stress-ng-switch, sockperf-tcp-rr/);
    expect(workload('linux', 'iperf3-tcp').lowerIsBetter).toBe(false);
  });
});

// A dry run resolves the VM against the host's KVM (the runnability check): it needs a /dev/kvm.
describe.skipIf(!existsSync(LINUX_BZIMAGE) || !existsSync(LINUX_INITRD) || !kvmAvailable)('a user\'s own root file system: the documented command line', () => {
  it('unhalt run --kernel --initrd --disk --append root=/dev/vda1 is accepted and shows the disk as virtio-blk (dry run)', async () => {
    const root = join(scratch, 'root.img');
    expect(spawnSync('truncate', ['-s', '64M', root]).status).toBe(0);
    const r = await runCli(['run', '--dry-run', '--kernel', LINUX_BZIMAGE, '--initrd', LINUX_INITRD, '--disk', root, '--memory', '1024',
      '--append', 'console=ttyS0 root=/dev/vda1 rw']);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/virtio-blk 00:0\d\.0 \(.*root\.img\)/);
    expect(r.stdout).toContain("--append 'console=ttyS0 root=/dev/vda1 rw'");
    // A qcow2 root is refused with the conversion the docs describe.
    const q = join(scratch, 'root.qcow2');
    writeFileSync(q, Buffer.concat([Buffer.from('QFI\xfb', 'latin1'), Buffer.alloc(508)]));
    const bad = await runCli(['run', '--dry-run', '--kernel', LINUX_BZIMAGE, '--initrd', LINUX_INITRD, '--disk', q, '--append', 'root=/dev/vda']);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toMatch(/qemu-img convert -f qcow2 -O raw/);
  });
});

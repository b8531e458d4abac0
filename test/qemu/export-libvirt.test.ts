// The exported libvirt domain: it passes libvirt's own schema check (virt-xml-validate, Debian
// libvirt-clients + libxml2-utils), and where a libvirt daemon can run here it is defined and
// started with virsh and the probe guest prints its banner on the serial console.
//
// The daemon: an already running libvirtd is used as it is; otherwise, as root, the test starts
// virtlogd (libvirt's QEMU driver logs every chardev through it) and libvirtd itself, and stops
// them again (by pid) when done. It skips, saying why, only when no daemon can be had.
//
// Slow on this development machine: /dev/kvm is root's alone, so libvirt finds its cached QEMU
// capabilities stale at every call ("KVM was enabled when probing ..., but it is not available
// now", for its libvirt-qemu user) and probes QEMU again, close to a minute per virsh call
// under load. Hence the long deadlines.
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { closeSync, existsSync, mkdtempSync, openSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { type AgentEvent, parseAgentLine } from '../../electron/vmm/agent/line-protocol.ts';
import { resolveBoot, resolveKnobs } from '../../electron/vmm/config/resolve.ts';
import { validateConfig } from '../../electron/vmm/config/vm-config.ts';
import { exportConfig } from '../../electron/vmm/export/export.ts';
import { featureMask, PV_FEATURES } from '../../electron/vmm/machine/features.ts';
import { probeHost } from '../../electron/vmm/machine/host-caps.ts';
import { qemuSkipReason } from '../support/qemu-probe.ts';
import { scaled } from '../support/time-scale.ts';

const CONNECT = ['-c', 'qemu:///system'];
const has = (cmd: string) => !spawnSync(cmd, ['--version']).error;
const validateSkip = !has('virt-xml-validate') ? 'virt-xml-validate is not installed (Debian libvirt-clients)'
  : !has('xmllint') ? 'xmllint is not installed (Debian libxml2-utils; virt-xml-validate runs it)' : undefined;
if (validateSkip) console.warn(`skipping the libvirt schema checks: ${validateSkip}`);

const CONFIGS: Record<string, Record<string, unknown>> = {
  plain: { name: 'plain' },
  tuned: { name: 'tuned', cpus: 4, memoryMiB: 256, cpuPm: true, memLock: true, haltPollNs: 1_000_000, pin: [0, 1] },
  features: { name: 'feat', cpus: 2, machine: 'unhalt-1.0', cpuFeatures: { 'kvm-steal-time': false, 'kvm-hint-dedicated': true, kvmclock: false, 'kvm-pv-eoi': false } },
  // A disk of each mode: <readonly/> and <transient/> (snapshot=on) where the schema allows them.
  disks: { name: 'disks', disks: [{ path: '/srv/a.img' }, { path: '/srv/b.img', readonly: true }, { path: '/srv/c.img', snapshot: true }] },
};

function virsh(...args: string[]): { ok: boolean; out: string } {
  const r = spawnSync('virsh', [...CONNECT, ...args], { encoding: 'utf8', timeout: scaled(240_000) });
  return { ok: r.status === 0, out: `${r.stdout ?? ''}${r.stderr ?? ''}`.trim() };
}

describe('the exported libvirt domain', () => {
  for (const [name, raw] of Object.entries(CONFIGS)) {
    for (const hostKind of ['hardware', 'pvm'] as const) {
      it.skipIf(!!validateSkip)(`passes virt-xml-validate: ${name}, for a ${hostKind} host`, () => {
        const dir = mkdtempSync(join(tmpdir(), 'unhalt-export-libvirt-'));
        try {
          const config = validateConfig(raw);
          const file = join(dir, 'domain.xml');
          writeFileSync(file, exportConfig('libvirt', { config, boot: { kernelPath: '/srv/probe.elf', cmdline: 'scenario=hello' }, hostKind }).text);
          const r = spawnSync('virt-xml-validate', [file, 'domain'], { encoding: 'utf8' });
          expect(`${r.stdout}${r.stderr}`.trim()).toBe(`${file} validates`);
          expect(r.status).toBe(0);
        } finally {
          rmSync(dir, { recursive: true, force: true });
        }
      });
    }
  }

  const daemons: ChildProcess[] = [];
  let logDir: string | undefined;
  afterAll(async () => {
    for (const d of daemons.reverse()) {
      if (d.exitCode !== null) continue;
      const gone = new Promise((resolve) => d.once('exit', resolve));
      d.kill('SIGTERM');
      await Promise.race([gone, new Promise((resolve) => setTimeout(resolve, 10_000))]);
      if (d.exitCode === null) d.kill('SIGKILL');
    }
    if (logDir) rmSync(logDir, { recursive: true, force: true });
  }, 30_000);

  /** A reachable libvirtd (started here if need be), or why there is none. */
  async function libvirtDaemon(): Promise<string | undefined> {
    if (virsh('version').ok) return undefined;
    if (process.getuid?.() !== 0) return 'no libvirt daemon is running and starting one needs root';
    for (const bin of ['virtlogd', 'libvirtd']) {
      if (!existsSync(`/usr/sbin/${bin}`)) return `no libvirt daemon is running and /usr/sbin/${bin} is not installed (Debian libvirt-daemon-system)`;
    }
    // Their logs go to files: virsh calls block this thread for long, and a full pipe would stall a daemon.
    logDir = mkdtempSync(join(tmpdir(), 'unhalt-libvirtd-'));
    const dir = logDir;
    const logs = ['virtlogd', 'libvirtd'].map((bin) => join(dir, `${bin}.log`));
    for (const [i, bin] of ['virtlogd', 'libvirtd'].entries()) {
      const fd = openSync(logs[i]!, 'w');
      daemons.push(spawn(`/usr/sbin/${bin}`, [], { stdio: ['ignore', 'ignore', fd] }));
      closeSync(fd);
    }
    const deadline = Date.now() + scaled(120_000);
    while (Date.now() < deadline) {
      if (virsh('version').ok) return undefined;
      const dead = daemons.find((d) => d.exitCode !== null);
      if (dead) break;
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
    const errors = logs.map((f) => readFileSync(f, 'utf8')).join('\n').split('\n').filter((l) => / error : /.test(l)).slice(-2).join('; ');
    return `libvirtd did not answer (${virsh('version').out.split('\n').at(-1)}${errors ? `; ${errors}` : ''})`;
  }

  it.skipIf(!!qemuSkipReason())('is defined and started with virsh, and the probe guest prints its banner on the serial console', async (ctx) => {
    const why = await libvirtDaemon();
    if (why) {
      console.warn(`skipping the libvirt boot: ${why}`);
      ctx.skip(why);
      return;
    }
    const host = probeHost();
    const dir = mkdtempSync(join(tmpdir(), 'unhalt-export-libvirt-'));
    const name = `unhalt-export-test-${process.pid}`;
    const config = validateConfig({
      name, cpus: 2, append: 'scenario=hello', pin: [1, 0], cpuFeatures: { 'kvm-steal-time': false }, cpuPm: true, haltPollNs: 0,
    });
    const consoleLog = join(dir, 'ttyS0.log');
    const agentLog = join(dir, 'ttyS1.log');
    let xml = exportConfig('libvirt', { config, boot: resolveBoot(config, host.kind), hostKind: host.kind, consoleLog, agentLog }).text;
    // libvirt runs QEMU as libvirt-qemu:kvm, and fleets give /dev/kvm to the kvm group. Where
    // /dev/kvm is root's alone (this development machine) the domain runs QEMU as root instead.
    if ((statSync('/dev/kvm').mode & 0o060) !== 0o060) {
      xml = xml.replace('</domain>', "  <seclabel type='static' model='dac' relabel='no'>\n    <label>+0:+0</label>\n  </seclabel>\n</domain>");
    }
    const file = join(dir, 'domain.xml');
    writeFileSync(file, xml);
    /** libvirt's log of the domain's QEMU (its command line first), in the system daemon's default place. */
    const qemuLog = `/var/log/libvirt/qemu/${name}.log`;
    try {
      const defined = virsh('define', file);
      expect(defined.out).toContain(`Domain '${name}' defined`);
      // libvirt pins the board version at define time (docs/export.md, Machine types).
      expect(virsh('dumpxml', name).out).toMatch(/<type arch='x86_64' machine='pc-q35-\d+\.\d+'>hvm<\/type>/);
      const started = virsh('start', name);
      expect(started.out, started.out).toContain(`Domain '${name}' started`);
      const deadline = Date.now() + scaled(60_000);
      const read = (f: string) => (existsSync(f) ? readFileSync(f, 'latin1') : '');
      while (Date.now() < deadline && !read(consoleLog).includes('hello from 2 CPUs')) await new Promise((resolve) => setTimeout(resolve, 250));
      const ttyS0 = read(consoleLog);
      expect(ttyS0, `ttyS0: ${JSON.stringify(ttyS0.slice(-300))}`).toContain('Unhalt probe guest: 2 of 2 CPUs up');
      // What the guest saw of its paravirt features: as under Unhalt (kvm-steal-time off through
      // -global, kvm-pv-unhalt off because of cpu-pm=on, which came through <qemu:commandline>).
      const events = read(agentLog).split('\n').map(parseAgentLine).filter((e): e is AgentEvent => typeof e === 'object');
      const leaf = events.find((e) => e.event === 'cpuid' && e.fields.leaf === 0x40000001)?.fields;
      const known = PV_FEATURES.filter((f) => f.register === 'eax').reduce((m, f) => (m | featureMask(f)) >>> 0, 0);
      expect(((leaf!.eax! & known) >>> 0).toString(16)).toBe(resolveKnobs(config, host).kvmFeatures.toString(16));
      // cpu-pm=on has no libvirt element: it reached QEMU through <qemu:commandline>.
      expect(readFileSync(qemuLog, 'utf8')).toMatch(/^-overcommit cpu-pm=on \\$/m);
      // <cputune><vcpupin>: libvirt pinned each vCPU where the export says.
      const pins = virsh('vcpupin', name, '--config');
      expect(pins.out).toMatch(/^\s*0\s+1\s*$/m);
      expect(pins.out).toMatch(/^\s*1\s+0\s*$/m);
    } finally {
      virsh('destroy', name);
      virsh('undefine', name);
      rmSync(dir, { recursive: true, force: true });
      rmSync(qemuLog, { force: true });
    }
  }, scaled(900_000));
});

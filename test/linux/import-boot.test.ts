// A distribution's cloud image from import to login, on hardware-semantics KVM (the nested lane's
// L1): `unhalt import` takes the image's own kernel, initrd and command line out of it and makes
// a cloud-init seed; the VM boots Debian's systemd to a login on ttyS0, cloud-init applied the
// seed (the user logs in with its password on the console, and with its key over SSH through the
// forward the import proposed), the agent from the tools disk reports on ttyS1, and poweroff ends
// the VM. The image is attached snapshot=on, so it is byte for byte as before.
// The image is native/guest/linux/build-cloud-image.mjs's (Debian packages only), built by the
// nested lane before L1; a systemd boot under TCG takes minutes, so this is the lane's one.
import { execFile, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { AgentEvent } from '../../electron/vmm/agent/line-protocol.ts';
import { execLine, GuestExec } from '../../electron/experiments/guest-exec.ts';
import { resolveMachine } from '../../electron/vmm/config/resolve.ts';
import { validateConfig, type VmConfig } from '../../electron/vmm/config/vm-config.ts';
import { LINUX_KIT_DIR, linuxKitBuilt } from '../../electron/vmm/guests-linux.ts';
import { probeHost } from '../../electron/vmm/machine/host-caps.ts';
import { VirtualMachine } from '../../electron/vmm/vm.ts';
import { runCli } from '../support/cli.ts';
import { hardwareKvm, NEEDS_HARDWARE } from '../support/kvm-semantics.ts';
import { kvmAvailable, watch } from '../support/probe.ts';
import { scaled } from '../support/time-scale.ts';

const CLOUD_IMAGE = `${LINUX_KIT_DIR}cloud-image.raw`;
const hw = kvmAvailable && linuxKitBuilt() && hardwareKvm();
if (!hw) console.log(`import-boot: skipped: ${NEEDS_HARDWARE}`);
const STEP_MS = scaled(60_000);
const dir = mkdtempSync(join(tmpdir(), 'unhalt-import-boot-'));
let running: VirtualMachine | undefined;
afterAll(async () => {
  if (running && running.state !== 'stopped') await running.stop();
  rmSync(dir, { recursive: true, force: true });
});

const home = join(dir, 'home');
const unhalt = join(home, 'unhalt');
const sha256 = (file: string) => createHash('sha256').update(readFileSync(file)).digest('hex');

describe.skipIf(!hw)('a cloud image imported and booted', () => {
  it('boots to a login on ttyS0 with the seed applied (password on the console, key over SSH), the agent on ttyS1, poweroff; the image unchanged', async () => {
    if (!existsSync(CLOUD_IMAGE)) throw new Error(`${CLOUD_IMAGE} is missing: the nested lane builds it before L1 (node native/guest/linux/build-cloud-image.mjs, as root)`);
    const before = sha256(CLOUD_IMAGE);
    const key = join(dir, 'id_ed25519');
    expect(spawnSync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-f', key]).status).toBe(0);
    const pw = join(dir, 'password');
    writeFileSync(pw, 'l1-secret-42\n');
    const t0 = performance.now();
    const r = await runCli(['import', CLOUD_IMAGE, '--name', 'cloud', '--user', 'tester', '--ssh-key', `${key}.pub`, '--password-file', pw, '--cpus', '1'],
      { env: { HOME: home, UNHALT_HOME: unhalt }, killAfterMs: 5 * STEP_MS });
    expect(r.code, r.stderr).toBe(0);
    console.log(`import-boot: import took ${((performance.now() - t0) / 1000).toFixed(1)} s`);
    const lib = JSON.parse(readFileSync(join(unhalt, 'vms.json'), 'utf8')) as { vms: { config: VmConfig; imported: { sshPort: number } }[] };
    const { config, imported } = lib.vms[0]!;
    // A boot that never changes the user's image: its writes go to a throwaway overlay.
    const disks = config.disks!.map((d, i) => (i === 0 ? { ...d, snapshot: true } : d));
    const { spec } = resolveMachine(validateConfig({ ...config, disks }), probeHost());
    const t1 = performance.now();
    running = await VirtualMachine.start(spec);
    const vm = running;
    const g = watch(vm);
    const events: AgentEvent[] = [];
    vm.on('agent', (e: AgentEvent) => events.push(e));

    await g.waitForConsole(/login: $/m, 20 * STEP_MS);
    console.log(`import-boot: boot to login took ${((performance.now() - t1) / 1000).toFixed(1)} s`);
    vm.sendConsole('tester\r');
    await g.waitForConsole(/Password: $/m, 2 * STEP_MS);
    let from = g.console().length;
    vm.sendConsole('l1-secret-42\r');
    await g.waitForConsole(/\$ $/m, 3 * STEP_MS);
    from = g.console().length;
    vm.sendConsole('cloud-init status --wait; hostname; echo seed=$((6*7))\r');
    await g.waitForConsole(/seed=42/, 10 * STEP_MS);
    let said = g.console().slice(from);
    if (!/status: done/.test(said)) {
      // Say which module failed before failing.
      from = g.console().length;
      vm.sendConsole('cloud-init status --long; echo long=$((6*7))\r');
      await g.waitForConsole(/long=42/, 2 * STEP_MS).catch(() => {});
      said += g.console().slice(from);
    }
    expect(said).toMatch(/status: done/);
    expect(said).toMatch(/^cloud\r?$/m);

    // The key the seed authorized, through the forward the import proposed.
    // Asynchronously: the VM's user network is served by this process, which must keep running.
    const ssh = await new Promise<{ stdout: string; stderr: string }>((done) => {
      execFile('ssh', ['-i', key, '-p', String(imported.sshPort), '-o', 'StrictHostKeyChecking=no', '-o', 'UserKnownHostsFile=/dev/null',
        '-o', 'BatchMode=yes', '-o', `ConnectTimeout=${Math.round(STEP_MS / 1000)}`, 'tester@127.0.0.1', 'echo ssh=$((6*7))'],
      { encoding: 'utf8', timeout: 3 * STEP_MS }, (_e, stdout, stderr) => done({ stdout, stderr }));
    });
    expect(ssh.stdout, ssh.stderr).toContain('ssh=42');

    // The agent, started by the seed from the tools disk, talks on ttyS1.
    for (const end = performance.now() + 3 * STEP_MS; !events.some((e) => e.event === 'ready');) {
      if (performance.now() > end) throw new Error(`the agent never said ready on ttyS1; it said: ${events.map((e) => e.event).join(', ')}`);
      await new Promise((res) => setTimeout(res, 500));
    }

    // A guest command through it (unhalt bench --guest-cmd's path): a vector, no shell of ours,
    // the distribution's own programs and the tools disk's on its PATH.
    const exec = new GuestExec();
    const answered = new Promise<void>((res) => vm.on('agent', (e: AgentEvent) => { if (exec.onEvent(e)) res(); }));
    vm.sendAgent(execLine(['sh', '-c', 'id -u; hostname; command -v perf; echo "$1"', 'sh', 'two words; $(no)'], 2 * STEP_MS));
    await answered;
    const want = '0\ncloud\n/opt/workloads/bin/perf\ntwo words; $(no)\n';
    expect(exec.result, exec.refused).toEqual({ output: want, status: 0, signal: 0, timedOut: false, outBytes: want.length });

    vm.sendConsole('sudo poweroff\r');
    expect((await vm.ended).kind).toBe('poweroff');
    expect(sha256(CLOUD_IMAGE)).toBe(before);
  }, 45 * STEP_MS);
});

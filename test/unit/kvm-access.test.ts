// Why KVM cannot be opened, and what to do: every cause from a facts object, from a fake sysfs /
// procfs tree with a device path of the test's own, and the permission case for real (a process
// without privileges, `unhalt doctor` as it runs).
import { chmodSync, chownSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { classifyKvmAccess, describeKvmAccess, readKvmFacts, type KvmFacts } from '../../electron/vmm/kvm-access.ts';
import { runCli } from '../support/cli.ts';

const base: KvmFacts = {
  device: '/dev/kvm', override: false, defaultDevice: '/dev/kvm', open: 'ENOENT', nodeKind: 'missing', user: 'ada', uid: 1000,
  modules: [], cpuFlags: { vmx: false, svm: false, hypervisor: false },
};
const facts = (f: Partial<KvmFacts>): KvmFacts => ({ ...base, ...f });

describe('the cause of a KVM that cannot be opened (from facts)', () => {
  it('an open device is fine', () => {
    expect(classifyKvmAccess(facts({ open: 'ok', nodeKind: 'char' }))).toMatchObject({ ok: true, cause: 'ok', problem: '', fix: '' });
  });

  it('no module, CPU with VMX: load kvm_intel (SVM: kvm_amd)', () => {
    const a = classifyKvmAccess(facts({ cpuFlags: { vmx: true, svm: false, hypervisor: false } }));
    expect(a).toMatchObject({ ok: false, cause: 'no-module', problem: expect.stringMatching(/KVM is not loaded/), fix: expect.stringMatching(/^load it: sudo modprobe kvm_intel/) });
    expect(classifyKvmAccess(facts({ cpuFlags: { vmx: false, svm: true, hypervisor: false } })).fix).toMatch(/modprobe kvm_amd/);
  });

  it('no VMX/SVM: firmware on bare metal, nested virtualization in a VM', () => {
    expect(classifyKvmAccess(facts({}))).toMatchObject({ cause: 'no-virtualization', fix: expect.stringMatching(/VT-x or AMD-V .* BIOS\/UEFI/) });
    expect(classifyKvmAccess(facts({ cpuFlags: { vmx: false, svm: false, hypervisor: true } })))
      .toMatchObject({ cause: 'no-virtualization', problem: expect.stringMatching(/virtual machine/), fix: expect.stringMatching(/nested virtualization/) });
  });

  it('kvm and kvm_pvm loaded but no device registered: a PVM guest, not "load kvm_intel"', () => {
    const a = classifyKvmAccess(facts({ modules: ['kvm', 'kvm_pvm'], cpuFlags: { vmx: false, svm: false, hypervisor: true } }));
    expect(a.cause).toBe('pvm-guest');
    expect(a.problem).toMatch(/itself a PVM guest/);
    expect(`${a.problem} ${a.fix}`).not.toMatch(/kvm_intel|kvm_amd|modprobe/);
    // The kernel's own word is enough too.
    expect(classifyKvmAccess(facts({ pvmGuest: true })).cause).toBe('pvm-guest');
  });

  it('registered but no node: mknod with the registered numbers; in a container: --device', () => {
    const loaded = { modules: ['kvm', 'kvm_intel'], registered: '10:232', cpuFlags: { vmx: true, svm: false, hypervisor: false } };
    expect(classifyKvmAccess(facts(loaded))).toMatchObject({ cause: 'no-device-node', fix: expect.stringMatching(/mknod \/dev\/kvm c 10 232/) });
    expect(classifyKvmAccess(facts({ ...loaded, container: 'docker' })))
      .toMatchObject({ cause: 'container-no-device', problem: expect.stringMatching(/docker container was started without \/dev\/kvm/), fix: expect.stringMatching(/--device \/dev\/kvm/) });
  });

  it('no permission: the group to join, by name', () => {
    const a = classifyKvmAccess(facts({ open: 'EACCES', nodeKind: 'char', nodeGroup: 'kvm', nodeMode: 0o660 }));
    expect(a).toMatchObject({ cause: 'permission', problem: expect.stringMatching(/user "ada" may not open \/dev\/kvm .*group "kvm"/), fix: expect.stringMatching(/usermod -aG kvm ada/) });
    // Added to the group, but this session is older than that.
    expect(classifyKvmAccess(facts({ open: 'EACCES', nodeKind: 'char', nodeGroup: 'kvm', nodeMode: 0o660, groupNotActive: true })))
      .toMatchObject({ cause: 'permission', problem: expect.stringMatching(/was added to the group "kvm" .* but this session started before that/), fix: expect.stringMatching(/^log out and in again \(or run: newgrp kvm\)/) });
    // A node only root may open: make it the kvm group's first.
    expect(classifyKvmAccess(facts({ open: 'EACCES', nodeKind: 'char', nodeGroup: 'root', nodeMode: 0o600 })).fix).toMatch(/chgrp kvm \/dev\/kvm && sudo chmod 660/);
  });

  it('UNHALT_KVM_DEVICE naming nothing, or a directory, says so', () => {
    expect(classifyKvmAccess(facts({ device: '/x/kvm', override: true }))).toMatchObject({ cause: 'override-missing', problem: 'UNHALT_KVM_DEVICE names /x/kvm, a path that does not exist' });
    expect(classifyKvmAccess(facts({ device: '/tmp', override: true, open: 'EISDIR', nodeKind: 'dir' }))).toMatchObject({ cause: 'not-a-device' });
  });

  it('describes a verdict in one line: the problem, then the fix', () => {
    const a = classifyKvmAccess(facts({ modules: ['kvm', 'kvm_pvm'], cpuFlags: { vmx: false, svm: false, hypervisor: true } }));
    expect(describeKvmAccess(a)).toBe(`${a.problem}. To fix: ${a.fix}`);
    expect(describeKvmAccess(a)).not.toMatch(/\n/);
  });
});

describe('the facts, read from a sysfs / procfs tree and a device path of the test\'s own', () => {
  const root = mkdtempSync(join(tmpdir(), 'unhalt-kvm-facts-'));
  afterAll(() => rmSync(root, { recursive: true, force: true }));
  let n = 0;
  const tree = (t: { modules?: string[]; registered?: string; flags: string; dockerenv?: boolean; log?: string }) => {
    const dir = join(root, String(n++));
    for (const m of t.modules ?? []) mkdirSync(join(dir, 'sys/module', m, 'parameters'), { recursive: true });
    if (t.registered) {
      mkdirSync(join(dir, 'sys/class/misc/kvm'), { recursive: true });
      writeFileSync(join(dir, 'sys/class/misc/kvm/dev'), `${t.registered}\n`);
    }
    mkdirSync(join(dir, 'proc/1'), { recursive: true });
    writeFileSync(join(dir, 'proc/cpuinfo'), `processor\t: 0\nmodel name\t: Test CPU\nflags\t\t: fpu ${t.flags} sse2\n\n`);
    writeFileSync(join(dir, 'proc/1/cgroup'), '0::/\n');
    mkdirSync(join(dir, 'root'));
    if (t.dockerenv) writeFileSync(join(dir, 'root/.dockerenv'), '');
    return readKvmFacts({ device: join(dir, 'dev-kvm'), override: false, sysRoot: join(dir, 'sys'), procRoot: join(dir, 'proc'), rootDir: join(dir, 'root'), ...(t.log !== undefined ? { kernelLog: t.log } : {}) });
  };

  it('reads each cause from the files', () => {
    expect(classifyKvmAccess(tree({ flags: 'vmx' })).cause).toBe('no-module');
    expect(classifyKvmAccess(tree({ flags: 'hypervisor' })).cause).toBe('no-virtualization');
    const pvm = tree({ modules: ['kvm', 'kvm_pvm'], flags: 'hypervisor', log: '[    0.000000] Hypervisor detected: PVM\n' });
    expect(pvm).toMatchObject({ modules: ['kvm', 'kvm_pvm'], pvmGuest: true, cpuFlags: { vmx: false, svm: false, hypervisor: true } });
    expect(classifyKvmAccess(pvm).cause).toBe('pvm-guest');
    expect(classifyKvmAccess(tree({ modules: ['kvm', 'kvm_amd'], registered: '10:232', flags: 'svm' })).cause).toBe('no-device-node');
    const docker = tree({ modules: ['kvm', 'kvm_amd'], registered: '10:232', flags: 'svm', dockerenv: true });
    expect(docker.container).toBe('docker');
    expect(classifyKvmAccess(docker).cause).toBe('container-no-device');
  });

  it('a device that opens is fine, whatever the tree says', () => {
    const dev = join(root, 'opens');
    writeFileSync(dev, '');
    expect(classifyKvmAccess(readKvmFacts({ device: dev, override: true, sysRoot: join(root, 'none') }))).toMatchObject({ ok: true });
  });
});

describe('no permission, for real: `unhalt doctor` as an unprivileged user', () => {
  const dir = mkdtempSync(join(tmpdir(), 'unhalt-kvm-perm-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('names the device\'s group and how to join it, and ends with a one-line summary', async () => {
    expect(process.getuid?.()).toBe(0); // the tests run as root: drop to nobody below
    chmodSync(dir, 0o755);
    const dev = join(dir, 'kvm');
    writeFileSync(dev, '');
    // The group of the device: "kvm" where it exists (as on most distributions), else root's.
    const kvmGroup = readFileSync('/etc/group', 'utf8').split('\n').map((l) => l.split(':')).find((f) => f[0] === 'kvm');
    const group = kvmGroup ? 'kvm' : 'root';
    chownSync(dev, 0, kvmGroup ? Number(kvmGroup[2]) : 0);
    chmodSync(dev, 0o660);
    for (const d of ['home', 'cache']) mkdirSync(join(dir, d), { mode: 0o777 });
    chmodSync(join(dir, 'home'), 0o777);
    chmodSync(join(dir, 'cache'), 0o777);
    const r = await runCli(['doctor'], {
      prefix: ['setpriv', '--reuid=65534', '--regid=65534', '--clear-groups'],
      env: { UNHALT_KVM_DEVICE: dev, UNHALT_HOME: join(dir, 'home'), XDG_CACHE_HOME: join(dir, 'cache'), HOME: join(dir, 'home') },
    });
    expect(r.stderr).toBe('');
    expect(r.code).toBe(1);
    const lines = r.stdout.trimEnd().split('\n');
    const user = /user "([^"]+)" may not open/.exec(r.stdout)?.[1];
    expect(user).toBeTruthy();
    expect(r.stdout).toMatch(new RegExp(`^FAIL  kvm-device: user "${user}" may not open ${dev}`, 'm'));
    expect(r.stdout).toContain(group === 'kvm' ? `sudo usermod -aG kvm ${user}` : 'sudo chgrp kvm');
    expect(lines.at(-1)).toMatch(/^not ready: no KVM: user ".*" may not open .*; fix: /);
  });
});

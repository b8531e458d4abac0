// Bad inputs everywhere: a table of malformed inputs across the `unhalt` command line, VM
// configurations (JSON objects as saved and sent by the app, bench config strings) and the
// service API. Each must be refused with its own specific message, as an error of the kind the
// layer uses (ConfigError, ApiError, exit code 1 with one `unhalt: …` line), without crashing the
// process or writing a file: a temporary UNHALT_HOME and the working folder stay as they were.
//
// CLI cases that only fail once the host is probed need /dev/kvm (they are skipped without it);
// none of them starts a guest.
import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gunzipSync, gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseConfigString } from '../../electron/vmm/config/config-string.ts';
import { ConfigError, validateConfig } from '../../electron/vmm/config/vm-config.ts';
import { runCli } from '../support/cli.ts';
import { kvmAvailable } from '../support/probe.ts';

const ROOT = new URL('../../', import.meta.url).pathname;
const PROBE_ELF = join(ROOT, 'assets/guests/probe.elf');
const LINUX_INITRD = join(ROOT, 'assets/guests/linux/initramfs.cpio.gz');
const LINUX_BZIMAGE = join(ROOT, 'assets/guests/linux/bzImage');

// ---- Fixtures: files that lie about what they are ------------------------------------------------
const files = mkdtempSync(join(tmpdir(), 'unhalt-bad-inputs-'));
const F = {
  junkKernel: join(files, 'junk.bin'),
  textKernel: join(files, 'README.txt'),
  emptyKernel: join(files, 'empty'),
  truncatedElf: join(files, 'probe-truncated.elf'),
  truncatedBzImage: join(files, 'bzImage-truncated'),
  truncatedGzInitrd: join(files, 'initrd-truncated.cpio.gz'),
  truncatedCpioInitrd: join(files, 'initrd-truncated.cpio'),
  emptyInitrd: join(files, 'initrd-empty'),
  aDirectory: join(files, 'a-directory'),
  missing: join(files, 'does', 'not', 'exist'),
};

function makeFixtures(): void {
  writeFileSync(F.junkKernel, Uint8Array.from({ length: 4096 }, (_, i) => (i * 2654435761) >>> 24));
  writeFileSync(F.textKernel, 'this is not a kernel\n');
  writeFileSync(F.emptyKernel, '');
  writeFileSync(F.truncatedElf, readFileSync(PROBE_ELF).subarray(0, 200));
  // A bzImage header that claims far more than the file holds (the real kernel when built, else a forged header).
  let bz: Buffer;
  try {
    bz = readFileSync(LINUX_BZIMAGE).subarray(0, 4096);
  } catch {
    bz = Buffer.alloc(4096);
    bz.write('HdrS', 0x202, 'latin1');
    bz.writeUInt16LE(0x20f, 0x206);
    bz[0x1f1] = 30;
    bz.writeUInt16LE(0xaa55, 0x1fe);
    bz.writeUInt32LE(0x100000, 0x1f4);
    bz.writeUInt16LE(1, 0x236); // xloadflags: XLF_KERNEL_64 (a 64-bit kernel, as the kit's is)
    bz[0x211] = 1; // loadflags: LOADED_HIGH (a bzImage)
  }
  writeFileSync(F.truncatedBzImage, bz);
  let cpio: Buffer;
  try {
    cpio = gunzipSync(readFileSync(LINUX_INITRD));
  } catch {
    cpio = fakeCpio();
  }
  writeFileSync(F.truncatedCpioInitrd, cpio.subarray(0, cpio.length - 700));
  const gz = gzipSync(cpio);
  writeFileSync(F.truncatedGzInitrd, gz.subarray(0, gz.length >> 1));
  writeFileSync(F.emptyInitrd, '');
  mkdirSync(F.aDirectory);
}

/** A small newc cpio archive (one file and the trailer) for when the Linux guest kit is absent. */
function fakeCpio(): Buffer {
  const entry = (name: string, data: Buffer) => {
    const h = `070701${'0'.repeat(8 * 6)}${data.length.toString(16).padStart(8, '0')}${'0'.repeat(8 * 4)}${(name.length + 1).toString(16).padStart(8, '0')}${'0'.repeat(8)}`;
    const head = Buffer.concat([Buffer.from(h, 'latin1'), Buffer.from(`${name}\0`, 'latin1')]);
    const pad = (b: Buffer) => Buffer.concat([b, Buffer.alloc((4 - (b.length % 4)) % 4)]);
    return Buffer.concat([pad(head), pad(data)]);
  };
  return Buffer.concat([entry('init', Buffer.alloc(5000, 0x41)), entry('TRAILER!!!', Buffer.alloc(0))]);
}

// ---- Snapshots: nothing may be written ------------------------------------------------------------
function snapshot(dir: string): Record<string, string> {
  const out: Record<string, string> = {};
  const walk = (d: string, rel: string) => {
    for (const name of readdirSync(d).sort()) {
      const p = join(d, name);
      const r = rel ? `${rel}/${name}` : name;
      const st = statSync(p);
      if (st.isDirectory()) { out[`${r}/`] = 'dir'; walk(p, r); } else out[r] = `${st.size}:${st.mtimeMs}:${createHash('sha1').update(readFileSync(p)).digest('hex')}`;
    }
  };
  walk(dir, '');
  return out;
}

// ---- The table ----------------------------------------------------------------------------------
type Area = 'config' | 'config-string' | 'cli' | 'service';
interface Case {
  area: Area;
  what: string;
  /** Config/config-string: the call; service: the API call; cli: argv (+ env). */
  call?: (api: import('../../electron/service/service.ts').UnhaltService) => unknown;
  argv?: string[];
  env?: Record<string, string>;
  needsKvm?: boolean;
  message: RegExp;
}

const huge = 'x'.repeat(1_000_000);
const cfg = (raw: unknown) => () => validateConfig(raw);
const str = (s: string) => () => parseConfigString(s);

const CASES: Case[] = [
  // VM configuration objects (saved JSON, API payloads)
  { area: 'config', what: 'not an object (a string)', call: cfg('cpus=2'), message: /^a VM configuration must be an object$/ },
  { area: 'config', what: 'rng neither on nor off', call: cfg({ rng: 1 }), message: /^rng must be on or off, got 1$/ },
  { area: 'config', what: 'not an object (a list)', call: cfg([1, 2]), message: /^a VM configuration must be an object$/ },
  { area: 'config', what: 'null', call: cfg(null), message: /^a VM configuration must be an object$/ },
  { area: 'config', what: 'unknown field', call: cfg({ cpu: 2 }), message: /^unknown configuration field "cpu"$/ },
  { area: 'config', what: '__proto__ key from JSON', call: cfg(JSON.parse('{"__proto__": {"cpus": 9}}')), message: /^unknown configuration field "__proto__"$/ },
  { area: 'config', what: 'cpus of the wrong type', call: cfg({ cpus: 'two' }), message: /^cpus must be a whole number, got "two"$/ },
  { area: 'config', what: 'cpus zero', call: cfg({ cpus: 0 }), message: /^cpus must be between 1 and 254, got 0$/ },
  { area: 'config', what: 'cpus fractional', call: cfg({ cpus: 2.5 }), message: /^cpus must be a whole number, got 2.5$/ },
  { area: 'config', what: 'cpus NaN', call: cfg({ cpus: Number.NaN }), message: /^cpus must be a whole number/ },
  { area: 'config', what: 'memory negative', call: cfg({ memoryMiB: -1 }), message: /^memory \(MiB\) must be between \d+ and 1048576, got -1$/ },
  { area: 'config', what: 'memory beyond 2^53', call: cfg({ memoryMiB: 2 ** 60 }), message: /^memory \(MiB\) must be a whole number/ },
  { area: 'config', what: 'huge name', call: cfg({ name: huge }), message: /^name is 1000000 characters long; at most 64 are allowed$/ },
  { area: 'config', what: 'path traversal in the name', call: cfg({ name: '../../etc/passwd' }), message: /^name "\.\.\/\.\.\/etc\/passwd" may use letters, digits/ },
  { area: 'config', what: 'slash in the name', call: cfg({ name: 'vm/../../x' }), message: /^name "vm\/\.\.\/\.\.\/x" may use letters/ },
  { area: 'config', what: 'NUL in the name', call: cfg({ name: 'a\0b' }), message: /^name contains a NUL character$/ },
  { area: 'config', what: 'unknown guest', call: cfg({ guest: 'windows' }), message: /^guest must be one of probe, linux, custom, got "windows"$/ },
  { area: 'config', what: 'custom guest without a kernel', call: cfg({ guest: 'custom' }), message: /^a custom guest needs a kernel/ },
  { area: 'config', what: 'kernel for the probe guest', call: cfg({ guest: 'probe', kernel: '/boot/vmlinuz' }), message: /^the probe guest brings its own kernel/ },
  { area: 'config', what: 'empty kernel path', call: cfg({ kernel: '  ' }), message: /^kernel is an empty path$/ },
  { area: 'config', what: 'huge kernel path', call: cfg({ kernel: `/${'a'.repeat(5000)}` }), message: /^kernel is 5001 characters long; at most 4096 are allowed$/ },
  { area: 'config', what: 'kernel path of the wrong type', call: cfg({ kernel: 42 }), message: /^kernel must be text, got number$/ },
  { area: 'config', what: 'huge append', call: cfg({ append: huge }), message: /^append is 1000000 characters long; at most 4095 are allowed$/ },
  { area: 'config', what: 'halt-poll-ns negative', call: cfg({ haltPollNs: -5 }), message: /^halt-poll-ns must be between 0 and 1000000000, got -5$/ },
  { area: 'config', what: 'empty pin list', call: cfg({ pin: [] }), message: /^pin must be a non-empty list of host CPU numbers$/ },
  { area: 'config', what: 'pin out of range', call: cfg({ pin: [99999] }), message: /^pin must be between 0 and 4095, got 99999$/ },
  { area: 'config', what: 'feature value not on/off', call: cfg({ cpuFeatures: { 'kvm-pv-unhalt': 'maybe' } }), message: /^kvm-pv-unhalt must be on or off, got "maybe"$/ },
  { area: 'config', what: 'unknown feature', call: cfg({ cpuFeatures: { 'no-such': true } }), message: /^unknown CPU feature "no-such"; valid: / },
  { area: 'config', what: 'features as a list', call: cfg({ cpuFeatures: ['kvm-pv-unhalt'] }), message: /^cpuFeatures must be an object of feature names to on\/off$/ },
  { area: 'config', what: 'unknown machine type', call: cfg({ machine: 'pc-q35-9.0' }), message: /^unknown machine type "pc-q35-9\.0"; valid: / },
  { area: 'config', what: 'future config version', call: cfg({ version: 2 }), message: /^configuration version 2 is not supported/ },
  { area: 'config', what: 'cpu-pm not a boolean', call: cfg({ cpuPm: 'yes' }), message: /^cpu-pm must be on or off, got "yes"$/ },
  { area: 'config', what: 'net as text', call: cfg({ net: 'user' }), message: /^net must be an object: \{ mode: "user", hostfwd: \[\.\.\.\] \} or \{ mode: "tap", tap: NAME \}$/ },
  { area: 'config', what: 'net hostfwd with a port past 65535', call: cfg({ net: { mode: 'user', hostfwd: [{ protocol: 'tcp', hostAddress: '127.0.0.1', hostPort: 70000, guestAddress: '10.0.2.15', guestPort: 22 }] } }), message: /^a host forward: the host port must be 1 to 65535, got 70000$/ },
  { area: 'config', what: 'net tap name with a slash', call: cfg({ net: { mode: 'tap', tap: 'a/b' } }), message: /^tap "a\/b" is not an interface name/ },
  // Bench config strings
  { area: 'config-string', what: 'no key=value', call: str('cpus'), message: /^config string: "cpus" is not key=value$/ },
  { area: 'config-string', what: 'rng=yes', call: str('rng=yes'), message: /^rng must be on or off, got "yes"$/ },
  { area: 'config-string', what: 'hostfwd without net=user', call: str('hostfwd=tcp::2222-:22'), message: /^config string: hostfwd= needs net=user before it$/ },
  { area: 'config-string', what: 'malformed hostfwd', call: str('net=user,hostfwd=tcp:2222-22'), message: /^hostfwd "tcp:2222-22" is malformed; the syntax is / },
  { area: 'config-string', what: 'empty key', call: str('=5'), message: /^config string: "=5" is not key=value$/ },
  { area: 'config-string', what: 'unknown key', call: str('cpus=2,bogus=1'), message: /^config string: unknown key "bogus"; valid: / },
  { area: 'config-string', what: 'too long', call: str(`cpus=1,${'a'.repeat(5000)}`), message: /^config string is too long$/ },
  { area: 'config-string', what: 'hex number', call: str('cpus=0x10'), message: /^cpus must be a whole number, got "0x10"$/ },
  { area: 'config-string', what: 'bad pin list', call: str('pin=0+abc'), message: /^pin: "abc" is not a host CPU number or range/ },
  { area: 'config-string', what: 'memory out of range', call: str('memory=999999999'), message: /^memory \(MiB\) must be between \d+ and 1048576, got 999999999$/ },
  // The command line
  { area: 'cli', what: 'unknown command', argv: ['frobnicate'], message: /^unhalt: unknown command "frobnicate"$/m },
  { area: 'cli', what: 'unknown option', argv: ['run', '--bogus'], message: /^unhalt: Unknown option '--bogus'$/m },
  { area: 'cli', what: '--rng with a bad value', argv: ['run', '--rng', 'maybe'], message: /^unhalt: rng must be on or off, got "maybe"$/m },
  { area: 'cli', what: '--net with an unknown back end', argv: ['run', '--net', 'vde'], message: /^unhalt: --net must be user\[,hostfwd=\.\.\.\] or tap=NAME, got "vde"$/m },
  { area: 'cli', what: '--net hostfwd with a host name', argv: ['run', '--net', 'user,hostfwd=tcp:localhost:8080-:80'], message: /^unhalt: hostfwd "tcp:localhost:8080-:80": the host address must be an IPv4 address/m },
  { area: 'cli', what: 'unknown doctor option (used to crash with a stack trace)', argv: ['doctor', '--bogus'], message: /^unhalt: Unknown option '--bogus'$/m },
  { area: 'cli', what: 'unknown selftest option', argv: ['selftest', '--bogus'], message: /^unhalt: Unknown option '--bogus'$/m },
  { area: 'cli', what: 'positional argument', argv: ['run', 'extra'], message: /^unhalt: Unexpected argument 'extra'/m },
  { area: 'cli', what: 'cpus not a number', argv: ['run', '--cpus', 'abc'], message: /^unhalt: cpus must be a whole number, got "abc"$/m },
  { area: 'cli', what: 'memory too small', argv: ['run', '--memory', '1'], message: /^unhalt: memory \(MiB\) must be between \d+ and/m },
  { area: 'cli', what: 'path traversal in --name', argv: ['run', '--name', '../../etc/x'], message: /^unhalt: name "\.\.\/\.\.\/etc\/x" may use letters/m },
  { area: 'cli', what: 'huge --append', argv: ['run', '--append', 'a'.repeat(100_000)], message: /^unhalt: append is 100000 characters long; at most 4095 are allowed$/m },
  { area: 'cli', what: 'bad --timeout', argv: ['run', '--timeout=-1'], message: /^unhalt: --timeout must be a positive number of seconds, got "-1"$/m },
  { area: 'cli', what: 'bad --pin', argv: ['run', '--pin', '0,abc'], message: /^unhalt: pin: "abc" is not a host CPU number or range/m },
  { area: 'cli', what: 'bad --overcommit', argv: ['run', '--overcommit', 'cpu-pm=maybe'], message: /^unhalt: cpu-pm must be on or off, got "maybe"$/m },
  { area: 'cli', what: 'bad --cpu feature', argv: ['run', '--cpu', 'host,nope=on'], message: /^unhalt: unknown CPU feature "nope"/m },
  { area: 'cli', what: 'missing kernel file', argv: ['run', '--guest', 'custom', '--kernel', F.missing, '--stats', 'stats.ndjson', '--agent-log', 'agent.log'], message: /^unhalt: kernel not found: .*does\/not\/exist$/m },
  { area: 'cli', what: 'kernel is a directory', argv: ['run', '--guest', 'custom', '--kernel', F.aDirectory], message: /^unhalt: kernel is not a regular file: .*a-directory$/m },
  { area: 'cli', what: 'empty kernel', argv: ['run', '--guest', 'custom', '--kernel', F.emptyKernel], message: /^unhalt: kernel is empty: /m },
  { area: 'cli', what: 'kernel neither PVH ELF nor bzImage (binary)', needsKvm: true, argv: ['run', '--guest', 'custom', '--kernel', F.junkKernel, '--stats', 'stats.ndjson', '--agent-log', 'agent.log'], message: /^unhalt: kernel .*junk\.bin is neither a PVH ELF, a Linux bzImage nor a multiboot kernel$/m },
  { area: 'cli', what: 'kernel neither PVH ELF nor bzImage (text)', needsKvm: true, argv: ['run', '--guest', 'custom', '--kernel', F.textKernel], message: /^unhalt: kernel .*README\.txt is neither a PVH ELF, a Linux bzImage nor a multiboot kernel$/m },
  { area: 'cli', what: 'ELF without a PVH note', needsKvm: true, argv: ['run', '--guest', 'custom', '--kernel', process.execPath], message: /^unhalt: kernel \S+ is an ELF without a PVH entry note \(XEN_ELFNOTE_PHYS32_ENTRY\); build it with CONFIG_PVH=y/m },
  { area: 'cli', what: 'truncated PVH ELF', needsKvm: true, argv: ['run', '--guest', 'custom', '--kernel', F.truncatedElf], message: /^unhalt: kernel \S+probe-truncated\.elf: truncated ELF file/m },
  { area: 'cli', what: 'truncated bzImage', needsKvm: true, argv: ['run', '--guest', 'custom', '--kernel', F.truncatedBzImage], message: /^unhalt: cannot start the VM: .*bzImage-truncated: truncated bzImage \(4096 bytes; its header says \d+\)$/m },
  { area: 'cli', what: 'missing initrd', argv: ['run', '--guest', 'custom', '--kernel', PROBE_ELF, '--initrd', F.missing], message: /^unhalt: initrd not found: .*does\/not\/exist$/m },
  { area: 'cli', what: 'empty initrd', argv: ['run', '--guest', 'custom', '--kernel', PROBE_ELF, '--initrd', F.emptyInitrd], message: /^unhalt: initrd is empty: /m },
  { area: 'cli', what: 'truncated gzip initrd', needsKvm: true, argv: ['run', '--guest', 'custom', '--kernel', PROBE_ELF, '--initrd', F.truncatedGzInitrd, '--stats', 'stats.ndjson'], message: /^unhalt: cannot start the VM: initrd .*initrd-truncated\.cpio\.gz is truncated: its gzip stream ends early$/m },
  { area: 'cli', what: 'truncated cpio initrd', needsKvm: true, argv: ['run', '--guest', 'custom', '--kernel', PROBE_ELF, '--initrd', F.truncatedCpioInitrd], message: /^unhalt: cannot start the VM: initrd .*initrd-truncated\.cpio is truncated: its cpio archive stops at byte \d+ before the TRAILER!!! entry$/m },
  { area: 'cli', what: 'UNHALT_KVM_DEVICE is a directory', argv: ['run', '--stats', 'stats.ndjson'], env: { UNHALT_KVM_DEVICE: F.aDirectory }, message: /^unhalt: cannot start the VM: UNHALT_KVM_DEVICE names \S*a-directory, a directory, not a KVM device\. To fix: set UNHALT_KVM_DEVICE to the KVM device \(\/dev\/kvm\), or unset it$/m },
  { area: 'cli', what: 'UNHALT_KVM_DEVICE is /dev/null', argv: ['run', '--agent-log', 'agent.log'], env: { UNHALT_KVM_DEVICE: '/dev/null' }, message: /^unhalt: .*KVM_GET_API_VERSION failed: ENOTTY: .*\(\/dev\/null is not a KVM device\)$/m },
  { area: 'cli', what: 'UNHALT_KVM_DEVICE is missing', argv: ['run'], env: { UNHALT_KVM_DEVICE: F.missing }, message: /^unhalt: cannot start the VM: UNHALT_KVM_DEVICE names \S*does\/not\/exist, a path that does not exist\. To fix: unset UNHALT_KVM_DEVICE to use \/dev\/kvm, or set it to the KVM device's path$/m },
  { area: 'cli', what: 'export without a format', argv: ['export', '--config', 'cpus=2'], message: /^unhalt: --format is required: qemu, libvirt, kubevirt$/m },
  { area: 'cli', what: 'export for an unknown kind of host', argv: ['export', '--config', 'cpus=2', '--format', 'qemu', '--for-host', 'vmx'], message: /^unhalt: --for-host must be pvm or hardware \(the kind of host the export is for\), got "vmx"$/m },
  { area: 'cli', what: 'export of a self-contradicting config', argv: ['export', '--config', 'cpu-pm=on,kvm-pv-unhalt=on', '--format', 'qemu'], message: /^unhalt: kvm-pv-unhalt=on contradicts cpu-pm=on: /m },
  { area: 'cli', what: 'bench config string with a bad value', argv: ['bench', '--workload', 'pio', '--config', 'A=cpus=abc', '--config', 'B=cpus=1'], message: /cpus must be a whole number, got "abc"/m },
  // The service API (temporary UNHALT_HOME)
  { area: 'service', what: 'createVm(null)', call: (s) => s.createVm(null), message: /^a VM configuration must be an object$/ },
  { area: 'service', what: 'createVm with a traversal name', call: (s) => s.createVm({ name: '../../etc/passwd' }), message: /^name "\.\.\/\.\.\/etc\/passwd" may use letters/ },
  { area: 'service', what: 'createVm with /etc/shadow as initrd', call: (s) => s.createVm({ guest: 'custom', kernel: PROBE_ELF, initrd: '/etc/shadow' }), message: /^initrd \/etc\/shadow is outside the folders Unhalt may give to a guest \(.*\); move it into one of them or allow its folder \(library view: Folders for boot files\)$/ },
  { area: 'service', what: 'createVm with a missing kernel', call: (s) => s.createVm({ guest: 'custom', kernel: F.missing }), message: /^kernel not found: / },
  { area: 'service', what: 'createVm with a relative kernel path', call: (s) => s.createVm({ guest: 'custom', kernel: '../../boot/vmlinuz' }), message: /^kernel must be an absolute path \(its full path on the host, starting with \/\), got "\.\.\/\.\.\/boot\/vmlinuz"$/ },
  { area: 'service', what: 'createVm with a junk kernel', call: (s) => s.createVm({ guest: 'custom', kernel: F.junkKernel }), message: /^kernel .*junk\.bin is neither a PVH ELF, a Linux bzImage nor a multiboot kernel$/ },
  { area: 'service', what: 'createVm with a directory initrd', call: (s) => s.createVm({ guest: 'custom', kernel: PROBE_ELF, initrd: F.aDirectory }), message: /^initrd is not a regular file: / },
  { area: 'service', what: 'createVm with an empty initrd', call: (s) => s.createVm({ guest: 'custom', kernel: PROBE_ELF, initrd: F.emptyInitrd }), message: /^initrd is empty: / },
  { area: 'service', what: 'createVm with more memory than the host has', call: (s) => s.createVm({ memoryMiB: 1024 * 1024 }), message: /^memory 1048576 MiB is more than this host has/ },
  { area: 'service', what: 'getVm with a traversal id', call: (s) => s.getVm('../../etc/passwd'), message: /^there is no VM with the id "\.\.\/\.\.\/etc\/passwd"$/ },
  { area: 'service', what: 'getVm with a number', call: (s) => s.getVm(42 as never), message: /^a VM id must be text, got 42$/ },
  { area: 'service', what: 'startVm of an unknown id', call: (s) => s.startVm('abc'), message: /^there is no VM with the id "abc"$/ },
  { area: 'service', what: 'deleteVm with an object', call: (s) => s.deleteVm({} as never), message: /^a VM id must be text, got an object$/ },
  { area: 'service', what: 'describeConfig with a string', call: (s) => s.describeConfig('cpus=2'), message: /^a VM configuration must be an object$/ },
  { area: 'service', what: 'exportConfig to an unknown format', call: (s) => s.exportConfig({ cpus: 2 }, 'vmware' as never), message: /^export format must be one of qemu, libvirt, kubevirt, got "vmware"$/ },
  { area: 'service', what: 'exportConfig of a self-contradicting config', call: (s) => s.exportConfig({ cpuPm: true, cpuFeatures: { 'kvm-pv-unhalt': true } }, 'libvirt'), message: /^kvm-pv-unhalt=on contradicts cpu-pm=on: / },
  { area: 'service', what: 'exportConfig with a string', call: (s) => s.exportConfig('cpus=2', 'qemu'), message: /^a VM configuration must be an object$/ },
  { area: 'service', what: 'exportConfig for an unknown kind of host', call: (s) => s.exportConfig({ cpus: 2 }, 'qemu', 'arm' as never), message: /^the export's host \(forHost\) must be pvm or hardware \(the kind of host the export is for\), got "arm"$/ },
  { area: 'service', what: 'getExperiment with a traversal id', call: (s) => s.getExperiment('../../x'), message: /^there is no experiment with the id "\.\.\/\.\.\/x"$/ },
  { area: 'service', what: 'startExperiment with nothing', call: (s) => s.startExperiment({} as never), message: /^experiment guest must be probe or linux, got undefined$/ },
];

/** Cases that need a VM in the library (filled in once it exists). */
const vmCases = (id: () => string): Case[] => [
  { area: 'service', what: 'sendConsole with 1 MB', call: (s) => s.sendConsole(id(), huge), message: /^console input is 1000000 characters long; at most 65536 are allowed$/ },
  { area: 'service', what: 'sendConsole with a number', call: (s) => s.sendConsole(id(), 5 as never), message: /^console input must be text, got 5$/ },
  { area: 'service', what: 'setHaltPollNs negative', call: (s) => s.setHaltPollNs(id(), -1), message: /^halt-poll-ns must be between 0 and 1000000000, got -1$/ },
  { area: 'service', what: 'setPin with text', call: (s) => s.setPin(id(), ['a'] as never), message: /^pin\[0\] must be a whole number, got "a"$/ },
  { area: 'service', what: 'updateVm with cpus 0', call: (s) => s.updateVm(id(), { cpus: 0 }), message: /^cpus must be between 1 and 254, got 0$/ },
  { area: 'service', what: 'cloneVm with a huge name', call: (s) => s.cloneVm(id(), 'a'.repeat(100_000)), message: /^name is 100000 characters long; at most \d+ are allowed$/ },
  { area: 'service', what: 'stopVm with a negative grace', call: (s) => s.stopVm(id(), -5), message: /^grace period \(ms\) must be between 0 and 60000, got -5$/ },
];

let vmId = '';
const ALL = [...CASES, ...vmCases(() => vmId)];

describe('bad inputs everywhere', () => {
  const home = mkdtempSync(join(tmpdir(), 'unhalt-bad-home-'));
  const cliHome = mkdtempSync(join(tmpdir(), 'unhalt-bad-cli-home-'));
  const cliCwd = mkdtempSync(join(tmpdir(), 'unhalt-bad-cwd-'));
  const savedHome = process.env.UNHALT_HOME;
  let service: import('../../electron/service/service.ts').UnhaltService;
  let homeBefore: Record<string, string>;
  const cwdBefore = readdirSync(process.cwd()).sort();
  const outcomes: { area: Area; what: string; message: string }[] = [];

  beforeAll(async () => {
    makeFixtures();
    process.env.UNHALT_HOME = home;
    const { createService } = await import('../../electron/service/service.ts');
    service = await createService();
    // The fixtures live in a temp folder, outside the folders boot files may come from.
    await service.addAllowedFolder(files);
    vmId = (await service.createVm({ name: 'bad-inputs', guest: 'probe', cpus: 1, memoryMiB: 64 })).id;
    homeBefore = snapshot(home);
  });

  afterAll(async () => {
    await service?.shutdown();
    if (savedHome === undefined) delete process.env.UNHALT_HOME; else process.env.UNHALT_HOME = savedHome;
    const byArea = Object.entries(outcomes.reduce<Record<string, number>>((a, o) => ({ ...a, [o.area]: (a[o.area] ?? 0) + 1 }), {}));
    process.stdout.write(`bad inputs refused: ${outcomes.length} (${byArea.map(([a, n]) => `${a} ${n}`).join(', ')})\n`);
    for (const d of [home, cliHome, cliCwd, files]) rmSync(d, { recursive: true, force: true });
  });

  it('has at least 40 cases across the CLI, configurations and the service API', () => {
    expect(ALL.length).toBeGreaterThanOrEqual(40);
    for (const area of ['config', 'config-string', 'cli', 'service'] as const) expect(ALL.filter((c) => c.area === area).length).toBeGreaterThan(5);
    expect(new Set(ALL.map((c) => `${c.area}: ${c.what}`)).size).toBe(ALL.length);
  });

  describe.each(['config', 'config-string'] as const)('%s', (area) => {
    it.each(ALL.filter((c) => c.area === area).map((c) => [c.what, c] as const))('%s', (_what, c) => {
      let error: unknown;
      try { c.call!(undefined as never); } catch (e) { error = e; }
      expect(error, 'refused').toBeInstanceOf(ConfigError);
      const message = (error as Error).message;
      expect(message).toMatch(c.message);
      expect(message.length, 'a short message, never the whole input').toBeLessThan(400);
      expect(message).not.toContain('\n');
      outcomes.push({ area, what: c.what, message });
    });
  });

  describe('service API', () => {
    it.each(ALL.filter((c) => c.area === 'service').map((c) => [c.what, c] as const))('%s', async (_what, c) => {
      let error: unknown;
      try { await c.call!(service); } catch (e) { error = e; }
      expect(error, 'rejected').toBeInstanceOf(Error);
      expect((error as Error).name).toBe('ApiError');
      expect(['invalid', 'not-found', 'too-large', 'conflict']).toContain((error as { code: string }).code);
      const message = (error as Error).message;
      expect(message).toMatch(c.message);
      expect(message.length).toBeLessThan(400);
      outcomes.push({ area: 'service', what: c.what, message });
    });

    it('left UNHALT_HOME exactly as it was', async () => {
      expect(snapshot(home)).toEqual(homeBefore);
      expect((await service.listVms()).map((v) => v.config.name)).toEqual(['bad-inputs']);
    });
  });

  describe.concurrent('command line', () => {
    it.each(ALL.filter((c) => c.area === 'cli').map((c) => [c.what, c] as const))('%s', async (_what, c) => {
      if (c.needsKvm && !kvmAvailable) return;
      const r = await runCli(c.argv!, { env: { UNHALT_HOME: cliHome, ...c.env }, cwd: cliCwd });
      expect(r.code, r.stderr).toBe(1);
      expect(r.stderr).toMatch(c.message);
      expect(r.stderr, 'no stack trace').not.toMatch(/^\s+at |Error:.*\n\s+at |node:internal/m);
      expect(r.stdout, 'stdout carries ttyS0 only').toBe('');
      expect(r.stderr.trim().split('\n').length, 'one message line').toBeLessThanOrEqual(c.argv![0] === 'frobnicate' ? 40 : 2);
      outcomes.push({ area: 'cli', what: c.what, message: r.stderr.trim().split('\n')[0]! });
    }, 30_000);
  });

  describe('afterwards', () => {
    it('no CLI run wrote a file (working folder and UNHALT_HOME are empty) and the repo folder has no stray files', () => {
      expect(readdirSync(cliCwd)).toEqual([]);
      expect(readdirSync(cliHome)).toEqual([]);
      // (Other test files may run beside this one: only look for what these cases could write.)
      const stray = readdirSync(process.cwd()).filter((f) => !cwdBefore.includes(f) && /stats\.ndjson|agent\.log|bad-inputs/.test(f));
      expect(stray).toEqual([]);
    });
  });
});

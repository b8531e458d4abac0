// A cloud-init NoCloud seed for a user's own cloud image (issue 27): a small disk that
// cloud-init finds by its volume label `cidata` and reads `user-data` and `meta-data` from.
//
// The seed is an ISO 9660 image built by xorriso (`-as mkisofs -V cidata -J -r`), not a vfat:
// one tool, no root, no size to guess (mkfs.vfat wants one up front and mcopy a second tool),
// read-only by nature (what cloud-init mounts and what QEMU's and cloud-localds's seeds are),
// and Rock Ridge keeps the lowercase file names with their dashes exactly as cloud-init asks.
//
// Every string here may come from the user or an image, so none is trusted: the user name and
// the host name are checked against a strict rule and refused otherwise (one line, naming the
// rule); every other string goes into the YAML as a double-quoted scalar with everything that
// is not printable ASCII escaped (`\n`, `\uXXXX`, `\UXXXXXXXX`), so a quote, `: `, `#` or a line
// break in a key's comment is data, never structure. An SSH key must be one line that looks
// like an OpenSSH public key: a line break in it would be a second line in authorized_keys.
//
// With `agent`, the seed also starts Unhalt's guest agent from the tools disk (the workloads
// disk, label `unhalt-workloads`, built by native/guest/linux/build-workloads-disk.mjs): mounted
// read-only at /opt/workloads, then `agent/unhalt-agent.service` under systemd or
// `agent/start-agent` elsewhere (docs/guest-contract.md, "The agent in a distribution's guest").
import { execFile, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { constants } from 'node:fs';
import { mkdtemp, open, readdir, rename, rm, writeFile } from 'node:fs/promises';
import { homedir, tmpdir } from 'node:os';
import { basename, dirname, join } from 'node:path';

export interface SeedSpec {
  /** cloud-init's instance-id: a new one makes cloud-init run its once-per-instance steps again. */
  instanceId: string;
  /** RFC 1123: labels of a-z, 0-9 and `-`, joined by dots. */
  hostname: string;
  /** The login to create (with sudo): `^[a-z_][a-z0-9_-]{0,31}$`. */
  user: string;
  /** OpenSSH public key lines for the user's authorized_keys. */
  sshKeys: string[];
  /** A crypt(3) hash (hashPassword): the user can then log in on the console with it. */
  passwordHash?: string;
  /** Mount the tools disk and start Unhalt's agent on ttyS1. */
  agent: boolean;
}

/** The volume label cloud-init's NoCloud source looks for. */
export const SEED_LABEL = 'cidata';
/** The tools disk's label (build-workloads-disk.mjs WORKLOADS_LABEL) and where the seed mounts it. */
export const TOOLS_DISK_LABEL = 'unhalt-workloads';
export const TOOLS_DISK_MOUNT = '/opt/workloads';

export const USER_RULE = /^[a-z_][a-z0-9_-]{0,31}$/;
const LABEL_RULE = /^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/i;
/** Key types ssh-keygen writes (and the security-key ones). */
const KEY_TYPES = [
  'ssh-ed25519', 'ssh-rsa', 'ecdsa-sha2-nistp256', 'ecdsa-sha2-nistp384', 'ecdsa-sha2-nistp521',
  'sk-ssh-ed25519@openssh.com', 'sk-ecdsa-sha2-nistp256@openssh.com', 'ssh-dss',
];
const KEY_FILE_MAX = 16 * 1024;

/** A refusal with one readable line. */
export class SeedError extends Error {
  override name = 'SeedError';
}

/** What the user typed, shown on one line whatever it holds (JSON, C1 controls and U+2028/9 escaped too). */
const shown = (s: string) => JSON.stringify(s).replace(/[\u007f-\u009f\u2028\u2029]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
/** Any C0/C1 control character or a Unicode line/paragraph separator. */
const CONTROL = /[\u0000-\u001f\u007f-\u009f\u2028\u2029]/;

export function checkUser(user: string): void {
  if (!USER_RULE.test(user)) {
    throw new SeedError(`user ${shown(user)} is not a valid login: it must match ${USER_RULE.source} (a lowercase letter or _, then up to 31 of a-z, 0-9, _ and -)`);
  }
}

export function checkHostname(hostname: string): void {
  const labels = hostname.split('.');
  if (hostname.length > 253 || !labels.every((l) => LABEL_RULE.test(l))) {
    throw new SeedError(`hostname ${shown(hostname)} is not a valid host name: it must be RFC 1123 labels of 1-63 letters, digits and -, not starting or ending with -, joined by dots (253 characters at most)`);
  }
}

function checkInstanceId(id: string): void {
  if (id.length === 0 || id.length > 128 || CONTROL.test(id)) {
    throw new SeedError(`instance-id ${shown(id)} must be 1-128 characters without control characters or line breaks`);
  }
}

function checkPasswordHash(hash: string): void {
  if (!/^\$[0-9a-z]{1,2}\$[./0-9A-Za-z$=,]{1,512}$/.test(hash)) {
    throw new SeedError('the password hash is not a crypt(3) hash such as $6$SALT$HASH (hashPassword makes one)');
  }
}

/**
 * Whether `line` is one OpenSSH public key line: TYPE BASE64 [COMMENT], the base64 holding the
 * same type name (the key blob's first field). Returns the reason it is not, or undefined.
 */
export function sshKeyProblem(line: string): string | undefined {
  if (/-----BEGIN [A-Z ]*PRIVATE KEY-----/.test(line)) return 'is a private key';
  if (/[\r\n\u2028\u2029]/.test(line)) return 'holds more than one line';
  if (CONTROL.test(line.replace(/\t/g, ' '))) return 'holds control characters';
  const m = /^(\S+) ([A-Za-z0-9+/]+={0,2})(?:[ \t]+(.*))?$/.exec(line);
  if (!m || !KEY_TYPES.includes(m[1]!)) return 'does not look like an OpenSSH public key (a line "ssh-ed25519 AAAA... comment")';
  const blob = Buffer.from(m[2]!, 'base64');
  const n = blob.length >= 4 ? blob.readUInt32BE(0) : -1;
  if (n !== m[1]!.length || blob.subarray(4, 4 + n).toString('latin1') !== m[1]) {
    return `does not look like an OpenSSH public key (its base64 is not a ${m[1]} key)`;
  }
  return undefined;
}

function checkSpec(spec: SeedSpec): void {
  checkInstanceId(spec.instanceId);
  checkHostname(spec.hostname);
  checkUser(spec.user);
  if (spec.sshKeys.length === 0 && spec.passwordHash === undefined) {
    throw new SeedError(`user ${spec.user} would have no way to log in: give an SSH public key or a password`);
  }
  spec.sshKeys.forEach((k, i) => {
    const problem = sshKeyProblem(k);
    if (problem) throw new SeedError(`SSH key ${i + 1} ${problem}`);
  });
  if (spec.passwordHash !== undefined) checkPasswordHash(spec.passwordHash);
}

// --- YAML -------------------------------------------------------------------------------------

/**
 * A YAML double-quoted scalar holding exactly `s`: printable ASCII as is (but `"` and `\`),
 * everything else escaped, so the text is pure ASCII and no character can end the scalar,
 * start a comment or break the line (YAML 1.1 and 1.2; PyYAML, which cloud-init uses, reads it).
 */
export function yamlString(s: string): string {
  let out = '"';
  for (const ch of s) {
    const c = ch.codePointAt(0)!;
    if (ch === '"' || ch === '\\') out += `\\${ch}`;
    else if (c >= 0x20 && c < 0x7f) out += ch;
    else if (ch === '\n') out += '\\n';
    else if (ch === '\t') out += '\\t';
    else if (ch === '\r') out += '\\r';
    else if (c < 0x10000) out += `\\u${c.toString(16).padStart(4, '0')}`;
    else out += `\\U${c.toString(16).padStart(8, '0')}`;
  }
  return `${out}"`;
}

/**
 * One bootcmd/runcmd entry as an argument vector (cloud-init quotes each for the shell): a block
 * sequence of double-quoted scalars, as an item of the enclosing list (`  - - "sh"`).
 */
const argv = (...args: string[]) => args.map((a, i) => `${i === 0 ? '  - - ' : '    - '}${yamlString(a)}`);

/**
 * A login on ttyS0 where no systemd starts one (sysvinit, busybox init): an inittab line, once,
 * then init re-reads its table (SIGHUP does that for both). getty's `-L 115200 ttyS0 vt100`
 * suits util-linux's agetty and busybox's getty alike. Under systemd, serial-getty@ttyS0 starts
 * by itself when the command line has console=ttyS0 (the caller's part).
 */
const SERIAL_GETTY = `[ -d /run/systemd/system ] && exit 0
[ -f /etc/inittab ] || exit 0
grep -q '^[^#]*ttyS0' /etc/inittab && exit 0
getty=$(command -v agetty || command -v getty) || exit 0
case "$(readlink /proc/1/exe)" in
  *busybox*) echo "ttyS0::respawn:$getty -L 115200 ttyS0 vt100" >> /etc/inittab ;;
  *) echo "T0:2345:respawn:$getty -L 115200 ttyS0 vt100" >> /etc/inittab ;;
esac
kill -HUP 1`;

/**
 * Every boot (bootcmd: the mount and the /run unit do not outlive it): the tools disk read-only
 * at /opt/workloads, found by its label as the kit's /init finds it, then the agent. Under
 * systemd the unit goes to /run/systemd/system (nothing left in /etc pointing at a disk that may
 * be gone next boot) and is started with --no-block: bootcmd runs inside cloud-init.service,
 * which the unit's default dependencies wait for. No fstab entry (cloud-init's mounts:) either:
 * a boot without the disk would then wait for it.
 */
const AGENT_START = `d=${TOOLS_DISK_MOUNT}
if ! grep -qs " $d " /proc/mounts; then
  dev=$(blkid -L ${TOOLS_DISK_LABEL} 2>/dev/null || findfs LABEL=${TOOLS_DISK_LABEL} 2>/dev/null)
  [ -n "$dev" ] || { echo "unhalt: no tools disk (label ${TOOLS_DISK_LABEL}): the agent is not started" >&2; exit 0; }
  mkdir -p "$d" && mount -t ext4 -o ro "$dev" "$d" || { echo "unhalt: could not mount the tools disk $dev on $d" >&2; exit 0; }
fi
if [ -d /run/systemd/system ]; then
  cp "$d/agent/unhalt-agent.service" /run/systemd/system/unhalt-agent.service && systemctl daemon-reload && systemctl start --no-block unhalt-agent.service
else
  "$d/agent/start-agent"
fi`;

/** Gives the user bash where the image has it (useradd's default shell may be /bin/sh). */
const BASH_SHELL = `b=$(command -v bash) || exit 0
usermod -s "$b" "$1" 2>/dev/null || chsh -s "$b" "$1" 2>/dev/null || true`;

/** The `#cloud-config` user-data for `spec` (throws SeedError on a refused field). */
export function seedUserData(spec: SeedSpec): string {
  checkSpec(spec);
  const hasPassword = spec.passwordHash !== undefined;
  const lines = [
    '#cloud-config',
    '# Written by Unhalt (a NoCloud seed for an imported cloud image).',
    `hostname: ${yamlString(spec.hostname.split('.')[0]!)}`,
    ...(spec.hostname.includes('.') ? [`fqdn: ${yamlString(spec.hostname)}`] : []),
    'preserve_hostname: false',
    'users:',
    `  - name: ${yamlString(spec.user)}`,
    '    gecos: "Unhalt user"',
    '    sudo: "ALL=(ALL) NOPASSWD:ALL"',
    `    lock_passwd: ${hasPassword ? 'false' : 'true'}`,
    ...(hasPassword ? [`    passwd: ${yamlString(spec.passwordHash!)}`] : []),
    ...(spec.sshKeys.length > 0 ? ['    ssh_authorized_keys:', ...spec.sshKeys.map((k) => `      - ${yamlString(k)}`)] : []),
    // Password logins over SSH only when there is a password and no key to use instead.
    `ssh_pwauth: ${hasPassword && spec.sshKeys.length === 0 ? 'true' : 'false'}`,
    'bootcmd:',
    ...argv('sh', '-c', SERIAL_GETTY),
    ...(spec.agent ? argv('sh', '-c', AGENT_START) : []),
    'runcmd:',
    ...argv('sh', '-c', BASH_SHELL, 'unhalt-seed', spec.user),
  ];
  return `${lines.join('\n')}\n`;
}

/** The meta-data: instance-id and local-hostname. */
export function seedMetaData(spec: SeedSpec): string {
  checkInstanceId(spec.instanceId);
  checkHostname(spec.hostname);
  return `instance-id: ${yamlString(spec.instanceId)}\nlocal-hostname: ${yamlString(spec.hostname)}\n`;
}

function run(cmd: string, args: string[]): Promise<void> {
  return new Promise((resolve, reject) => {
    execFile(cmd, args, { maxBuffer: 1 << 20 }, (err, _stdout, stderr) => {
      if (!err) { resolve(); return; }
      const code = (err as NodeJS.ErrnoException).code;
      if (code === 'ENOENT') reject(new SeedError(`${cmd} not found (Debian: apt-get install ${cmd})`));
      else reject(new SeedError(`${cmd} failed: ${String(stderr).trim().split('\n').at(-1) || err.message}`));
    });
  });
}

/**
 * Builds the seed image at `destPath`: an ISO 9660 (Rock Ridge and Joliet) with volume id
 * `cidata` holding user-data and meta-data. Atomic: built beside `destPath` under a temporary
 * name and renamed; on failure nothing is left.
 */
export async function writeSeed(spec: SeedSpec, destPath: string): Promise<void> {
  const userData = seedUserData(spec);
  const metaData = seedMetaData(spec);
  const staging = await mkdtemp(join(tmpdir(), 'unhalt-seed-'));
  const tmp = join(dirname(destPath), `.${basename(destPath)}.tmp-${process.pid}-${randomBytes(4).toString('hex')}`);
  try {
    await writeFile(join(staging, 'user-data'), userData, { mode: 0o600 });
    await writeFile(join(staging, 'meta-data'), metaData, { mode: 0o600 });
    await run('xorriso', ['-as', 'mkisofs', '-quiet', '-V', SEED_LABEL, '-J', '-r', '-o', tmp, staging]);
    await rename(tmp, destPath);
  } catch (e) {
    await rm(tmp, { force: true });
    throw e;
  } finally {
    await rm(staging, { recursive: true, force: true });
  }
}

/**
 * A SHA-512 crypt hash (`$6$SALT$HASH`) of `plain` by `openssl passwd -6 -stdin`: the password
 * goes in on stdin, never on a command line (where `ps` would show it).
 */
export function hashPassword(plain: string): Promise<string> {
  if (plain.length === 0) return Promise.reject(new SeedError('the password is empty'));
  if (/[\r\n\u0000]/.test(plain)) return Promise.reject(new SeedError('the password holds a line break or NUL: it must be one line'));
  return new Promise((resolve, reject) => {
    const child = spawn('openssl', ['passwd', '-6', '-stdin'], { stdio: ['pipe', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => { out += d; });
    child.stderr.setEncoding('utf8').on('data', (d: string) => { err += d; });
    child.on('error', (e: NodeJS.ErrnoException) => {
      reject(new SeedError(e.code === 'ENOENT' ? 'openssl not found (Debian: apt-get install openssl)' : `openssl: ${e.message}`));
    });
    child.on('close', (code) => {
      const hash = out.trim();
      if (code === 0 && /^\$6\$[./0-9A-Za-z]{1,16}\$[./0-9A-Za-z]{86}$/.test(hash)) resolve(hash);
      else reject(new SeedError(`openssl passwd -6 failed: ${err.trim().split('\n').at(-1) || `exit status ${code}`}`));
    });
    child.stdin.on('error', () => { /* reported by close */ });
    child.stdin.end(`${plain}\n`);
  });
}

/**
 * At most `max` + 1 bytes of the regular file `file`: a FIFO, a device (/dev/zero), a folder is
 * refused without reading it. Opened non-blocking, so a FIFO with no writer cannot hang the caller
 * (nor a signal that would stop it). Throws the errno's code ("EISDIR", "not a regular file").
 */
export async function readSmallFile(file: string, max: number): Promise<Buffer> {
  const h = await open(file, constants.O_RDONLY | constants.O_NONBLOCK);
  try {
    if (!(await h.stat()).isFile()) throw Object.assign(new Error('not a regular file'), { code: 'not a regular file' });
    const buf = Buffer.alloc(max + 1);
    let n = 0;
    for (let r; n < buf.length && (r = await h.read(buf, n, buf.length - n, n)).bytesRead > 0;) n += r.bytesRead;
    return buf.subarray(0, n);
  } finally {
    await h.close();
  }
}

/** The public key line in `file`, checked; one clear line when it is not one. */
export async function readSshKey(file: string): Promise<string> {
  let bytes: Buffer;
  try {
    bytes = await readSmallFile(file, KEY_FILE_MAX);
  } catch (e) {
    throw new SeedError(`cannot read the SSH key ${file}: ${(e as NodeJS.ErrnoException).code ?? String(e)}`);
  }
  if (bytes.length > KEY_FILE_MAX) throw new SeedError(`${file} is not an SSH public key (more than ${KEY_FILE_MAX} bytes; a public key is one line)`);
  const text = bytes.toString('utf8').replace(/\s+$/, '');
  if (/-----BEGIN [A-Z ]*PRIVATE KEY-----/.test(text) || /^PuTTY-User-Key-File/.test(text)) {
    throw new SeedError(`${file} is a private key: give its public half${file.endsWith('.pub') ? '' : ` (${file}.pub)`}, never the private key`);
  }
  const problem = sshKeyProblem(text);
  if (problem) throw new SeedError(`${file} ${problem}`);
  return text;
}

/** ssh-keygen's usual names first (its default type first), then any other *.pub by name. */
const PREFERRED = ['id_ed25519.pub', 'id_ecdsa.pub', 'id_rsa.pub', 'id_ed25519_sk.pub', 'id_ecdsa_sk.pub'];

/** The user's first public key in HOME/.ssh (*.pub), checked as readSshKey checks it. */
export async function defaultSshKey(home: string = homedir()): Promise<{ file: string; key: string }> {
  const dir = join(home, '.ssh');
  let names: string[];
  try {
    names = (await readdir(dir)).filter((n) => n.endsWith('.pub'));
  } catch {
    names = [];
  }
  const rank = (n: string) => { const i = PREFERRED.indexOf(n); return i < 0 ? PREFERRED.length : i; };
  names.sort((a, b) => rank(a) - rank(b) || (a < b ? -1 : a > b ? 1 : 0));
  if (names.length === 0) throw new SeedError(`no SSH public key in ${dir} (no *.pub file): make one with ssh-keygen -t ed25519, or give a key file`);
  const file = join(dir, names[0]!);
  return { file, key: await readSshKey(file) };
}

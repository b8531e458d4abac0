// The cloud-init NoCloud seed for a user's own cloud image (electron/vmm/image/nocloud-seed.ts),
// built for real with xorriso and read back as a guest sees it (the ISO's files and volume id),
// its user-data parsed back (the strict YAML-subset parser always, PyYAML — what cloud-init
// uses — where installed); the refusals, each one line; hostile strings round-tripped; the
// password hash checked against openssl; and the tools disk's agent files (unit, sh starter)
// that the seed starts, run for real where they can be.
import { spawn, spawnSync } from 'node:child_process';
import { chmodSync, copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import {
  defaultSshKey, hashPassword, readSshKey, type SeedSpec, seedMetaData, seedUserData, writeSeed, yamlString,
} from '../../electron/vmm/image/nocloud-seed.ts';
import { buildLinuxBinaries } from '../../native/guest/linux/build-workloads.mjs';
import { AGENT_UNIT_SRC, START_AGENT_SRC, TOOLS_MOUNT, toolsDiskAgentFiles, toolsDiskInputs } from '../../native/guest/linux/tools-disk.mjs';
import { missingTool } from '../support/tools.ts';
import { parseYamlSubset, yamlViaPython } from '../support/yaml-subset.ts';

const noXorriso = missingTool('xorriso', 'xorriso');
const scratch = mkdtempSync(join(tmpdir(), 'unhalt-seed-test-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/** A well-formed OpenSSH public key line of `type` (its blob starts with the type, as ssh-keygen's). */
function keyLine(type: string, comment: string, fill = 7): string {
  const name = Buffer.from(type);
  const len = Buffer.alloc(4);
  len.writeUInt32BE(name.length);
  const body = Buffer.alloc(36, fill);
  body.writeUInt32BE(32);
  return `${type} ${Buffer.concat([len, name, body]).toString('base64')}${comment ? ` ${comment}` : ''}`;
}
const KEY = keyLine('ssh-ed25519', 'alice@laptop');
const HOSTILE_COMMENT = `it's "quoted": # not a comment \\ back\tslash é ü 😀 - [x] {y} &a *b !c |d >e %f @g \`h`;
const HOSTILE_KEY = keyLine('ssh-rsa', HOSTILE_COMMENT, 9);

const spec = (over: Partial<SeedSpec> = {}): SeedSpec => ({
  instanceId: 'unhalt-debian-1', hostname: 'deb12', user: 'alice', sshKeys: [KEY], agent: false, ...over,
});

interface UserData {
  hostname: string; fqdn?: string; preserve_hostname: boolean; ssh_pwauth: boolean;
  users: { name: string; sudo: string; lock_passwd: boolean; passwd?: string; ssh_authorized_keys?: string[] }[];
  bootcmd: string[][]; runcmd: string[][];
}
/** user-data as cloud-init reads it: the strict subset parser, and PyYAML agreeing where it is installed. */
function parseUserData(text: string): UserData {
  expect(text.split('\n')[0]).toBe('#cloud-config');
  const mine = parseYamlSubset(text) as UserData;
  const py = yamlViaPython([text]);
  if (py) expect(py.values[0]).toEqual(mine);
  return mine;
}
const run = (cmd: string, args: string[], input?: string) => {
  const r = spawnSync(cmd, args, { encoding: 'utf8', input });
  expect(r.status, `${cmd} ${args.join(' ')}: ${r.stderr}`).toBe(0);
  return r.stdout;
};

describe.skipIf(noXorriso)('the seed image, read back as the guest sees it', () => {
  it('is an ISO 9660 with volume id cidata holding user-data and meta-data (and nothing else is left)', async () => {
    const dir = join(scratch, 'ok');
    mkdirSync(dir);
    const seed = join(dir, 'seed.iso');
    const hash = await hashPassword('correct horse');
    await writeSeed(spec({ passwordHash: hash, hostname: 'deb12.lab.example', agent: true }), seed);
    expect(readdirSync(dir)).toEqual(['seed.iso']);
    const pvd = spawnSync('xorriso', ['-indev', seed, '-pvd_info'], { encoding: 'utf8' });
    expect(pvd.status, pvd.stderr).toBe(0);
    expect(pvd.stdout + pvd.stderr).toMatch(/^Volume Id\s*:\s*cidata$/m);
    const out = join(dir, 'x');
    const ex = spawnSync('xorriso', ['-osirrox', 'on', '-indev', seed, '-extract', '/', out], { encoding: 'utf8' });
    expect(ex.status, ex.stderr).toBe(0);
    expect(readdirSync(out).sort()).toEqual(['meta-data', 'user-data']);
    const ud = parseUserData(readFileSync(join(out, 'user-data'), 'utf8'));
    expect(ud.hostname).toBe('deb12');
    expect(ud.fqdn).toBe('deb12.lab.example');
    expect(ud.preserve_hostname).toBe(false);
    expect(ud.users).toHaveLength(1);
    expect(ud.users[0]).toMatchObject({ name: 'alice', sudo: 'ALL=(ALL) NOPASSWD:ALL', lock_passwd: false, passwd: hash, ssh_authorized_keys: [KEY] });
    expect(ud.ssh_pwauth).toBe(false); // a key is there: no password logins over SSH
    expect(parseYamlSubset(readFileSync(join(out, 'meta-data'), 'utf8'))).toEqual({ 'instance-id': 'unhalt-debian-1', 'local-hostname': 'deb12.lab.example' });
    // The same texts as the functions give.
    expect(readFileSync(join(out, 'meta-data'), 'utf8')).toBe(seedMetaData(spec({ hostname: 'deb12.lab.example' })));
  });

  it('refuses a bad spec and a folder that is not there, leaving nothing behind', async () => {
    const dir = join(scratch, 'fail');
    mkdirSync(dir);
    await expect(writeSeed(spec({ user: 'Bob' }), join(dir, 'seed.iso'))).rejects.toThrow(/^user "Bob" is not a valid login/);
    await expect(writeSeed(spec(), join(dir, 'missing', 'seed.iso'))).rejects.toThrow(/^xorriso failed: /);
    expect(readdirSync(dir)).toEqual([]);
    expect(readdirSync(tmpdir()).filter((n) => n.startsWith('unhalt-seed-') && !n.startsWith('unhalt-seed-test-'))).toEqual([]);
  });
});

describe('user-data', () => {
  it('without a password: the login locked, keys only; with a password and no key: SSH password logins', () => {
    const keyOnly = parseUserData(seedUserData(spec()));
    expect(keyOnly.users[0]!.lock_passwd).toBe(true);
    expect(keyOnly.users[0]!.passwd).toBeUndefined();
    expect(keyOnly.ssh_pwauth).toBe(false);
    expect(keyOnly.hostname).toBe('deb12');
    expect(keyOnly.fqdn).toBeUndefined();
    const pw = parseUserData(seedUserData(spec({ sshKeys: [], passwordHash: '$6$abc$' + 'x'.repeat(86) })));
    expect(pw.users[0]!.ssh_authorized_keys).toBeUndefined();
    expect(pw.ssh_pwauth).toBe(true);
    expect(() => seedUserData(spec({ sshKeys: [] }))).toThrow('user alice would have no way to log in: give an SSH public key or a password');
  });

  it('hostile strings come back as the same strings (quotes, ": ", #, tabs, backslashes, non-ASCII)', () => {
    const id = 'i-1: "x" # y \\ é 😀';
    const text = seedUserData(spec({ sshKeys: [HOSTILE_KEY, KEY], instanceId: id }));
    // Pure ASCII, every string one double-quoted scalar: nothing in them is YAML structure.
    expect(/^[\x20-\x7e\n]*$/.test(text)).toBe(true);
    const py = yamlViaPython([text, seedMetaData(spec({ instanceId: id }))]);
    if (!py) console.log('skipped: PyYAML (python3-yaml) is not installed: astral characters checked by their escapes only');
    const ud = (py?.values[0] ?? undefined) as UserData | undefined;
    if (ud) {
      expect(ud.users[0]!.ssh_authorized_keys).toEqual([HOSTILE_KEY, KEY]);
      expect((py!.values[1] as Record<string, string>)['instance-id']).toBe(id);
    }
    expect(text).toContain('\\U0001f600');
    // Without astral characters the strict JSON-scalar parser reads it too.
    const plainHostile = keyLine('ssh-rsa', `it's "quoted": # not a comment \\ x\ty é`);
    expect(parseUserData(seedUserData(spec({ sshKeys: [plainHostile] }))).users[0]!.ssh_authorized_keys).toEqual([plainHostile]);
    const strings = ['', 'a: b', '# c', '"', '\\', '\n', 'é', '\u0000', '\u0085', '\u2028', '\ufeff', '😀'];
    const back = yamlViaPython(strings.map((s) => `v: ${yamlString(s)}\n`));
    if (back) expect(back.values.map((v) => (v as { v: string }).v)).toEqual(strings);
  });

  it('a line break in a key is refused (it would be a second authorized_keys line), as other non-keys', () => {
    expect(() => seedUserData(spec({ sshKeys: [`${KEY}\ncommand="rm -rf /" ${KEY}`] }))).toThrow('SSH key 1 holds more than one line');
    expect(() => seedUserData(spec({ sshKeys: [KEY, `${KEY}\u2028x`] }))).toThrow('SSH key 2 holds more than one line');
    expect(() => seedUserData(spec({ sshKeys: ['ssh-ed25519 AAAA'] }))).toThrow('SSH key 1 does not look like an OpenSSH public key (its base64 is not a ssh-ed25519 key)');
    expect(() => seedUserData(spec({ sshKeys: ['hello world'] }))).toThrow('SSH key 1 does not look like an OpenSSH public key (a line "ssh-ed25519 AAAA... comment")');
    expect(() => seedUserData(spec({ sshKeys: [`${KEY} \u0007bell`] }))).toThrow('SSH key 1 holds control characters');
  });

  it('refuses a bad user, host name, instance-id or password hash with one line naming the rule', () => {
    const userRule = 'must match ^[a-z_][a-z0-9_-]{0,31}$ (a lowercase letter or _, then up to 31 of a-z, 0-9, _ and -)';
    expect(() => seedUserData(spec({ user: 'Bob' }))).toThrow(`user "Bob" is not a valid login: it ${userRule}`);
    expect(() => seedUserData(spec({ user: 'a\nroot' }))).toThrow(`user "a\\nroot" is not a valid login: it ${userRule}`);
    expect(() => seedUserData(spec({ user: '9lives' }))).toThrow(`user "9lives" is not a valid login`);
    expect(() => seedUserData(spec({ user: 'a'.repeat(33) }))).toThrow('is not a valid login');
    const hostRule = 'it must be RFC 1123 labels of 1-63 letters, digits and -, not starting or ending with -, joined by dots (253 characters at most)';
    for (const h of ['-bad', 'a_b', 'x\ny', 'a..b', '', 'a'.repeat(64), 'host: x']) {
      expect(() => seedUserData(spec({ hostname: h })), h).toThrow(`hostname ${JSON.stringify(h)} is not a valid host name: ${hostRule}`);
    }
    expect(() => seedMetaData(spec({ instanceId: 'a\nb' }))).toThrow('instance-id "a\\nb" must be 1-128 characters without control characters or line breaks');
    expect(() => seedMetaData(spec({ instanceId: 'a\u2028b\u0085' }))).toThrow('instance-id "a\\u2028b\\u0085" must be');
    expect(() => seedUserData(spec({ passwordHash: 'hunter2' }))).toThrow('the password hash is not a crypt(3) hash such as $6$SALT$HASH (hashPassword makes one)');
    expect(() => seedUserData(spec({ passwordHash: '$6$a$b\nroot:x' }))).toThrow('the password hash is not a crypt(3) hash');
    // Every message is one line.
    try { seedUserData(spec({ user: 'x\ny\nz' })); } catch (e) { expect((e as Error).message).not.toContain('\n'); }
  });

  it('the agent: bootcmd mounts the tools disk read-only and starts the unit (systemd) or the script; every script parses as sh', () => {
    const off = parseUserData(seedUserData(spec()));
    expect(off.bootcmd).toHaveLength(1); // the ttyS0 getty only
    const on = parseUserData(seedUserData(spec({ agent: true })));
    expect(on.bootcmd).toHaveLength(2);
    const [getty, agent] = on.bootcmd as [string[], string[]];
    expect(getty.slice(0, 2)).toEqual(['sh', '-c']);
    expect(getty[2]).toContain('respawn:$getty -L 115200 ttyS0 vt100');
    expect(agent.slice(0, 2)).toEqual(['sh', '-c']);
    expect(agent[2]).toContain('blkid -L unhalt-workloads');
    expect(agent[2]).toContain('mount -t ext4 -o ro "$dev" "$d"');
    expect(agent[2]).toContain(`d=${TOOLS_MOUNT}`);
    expect(agent[2]).toContain('cp "$d/agent/unhalt-agent.service" /run/systemd/system/unhalt-agent.service && systemctl daemon-reload && systemctl start --no-block unhalt-agent.service');
    expect(agent[2]).toContain('"$d/agent/start-agent"');
    expect(on.runcmd).toEqual([['sh', '-c', expect.stringContaining('command -v bash'), 'unhalt-seed', 'alice']]);
    for (const cmd of [...on.bootcmd, ...on.runcmd]) run('sh', ['-n', '-c', cmd[2]!]);
  });
});

describe('the password hash', () => {
  it('is SHA-512 crypt from openssl, the same as openssl passwd -6 -salt SALT gives', async () => {
    const plain = `pä$$ 'w"ord \\ #1`;
    const hash = await hashPassword(plain);
    const m = /^\$6\$([./0-9A-Za-z]{1,16})\$[./0-9A-Za-z]{86}$/.exec(hash);
    expect(m, hash).toBeTruthy();
    expect(run('openssl', ['passwd', '-6', '-salt', m![1]!, '-stdin'], `${plain}\n`).trim()).toBe(hash);
    expect(await hashPassword(plain)).not.toBe(hash); // a fresh salt each time
    await expect(hashPassword('')).rejects.toThrow('the password is empty');
    await expect(hashPassword('a\nb')).rejects.toThrow('the password holds a line break or NUL: it must be one line');
  });
});

describe('SSH keys from files', () => {
  const home = join(scratch, 'home');
  const ssh = join(home, '.ssh');
  mkdirSync(ssh, { recursive: true });

  it('reads a public key file; refuses a private key, a non-key and a missing file with one line each', async () => {
    writeFileSync(join(ssh, 'hostile.pub'), `${HOSTILE_KEY}\r\n`);
    expect(await readSshKey(join(ssh, 'hostile.pub'))).toBe(HOSTILE_KEY);
    const priv = join(ssh, 'id_ed25519');
    writeFileSync(priv, '-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE KEY-----\n');
    await expect(readSshKey(priv)).rejects.toThrow(`${priv} is a private key: give its public half (${priv}.pub), never the private key`);
    writeFileSync(join(ssh, 'rsa.pub'), '-----BEGIN RSA PRIVATE KEY-----\nMIIE\n-----END RSA PRIVATE KEY-----\n');
    await expect(readSshKey(join(ssh, 'rsa.pub'))).rejects.toThrow(`${join(ssh, 'rsa.pub')} is a private key: give its public half, never the private key`);
    writeFileSync(join(ssh, 'notes.txt'), 'remember the milk\n');
    await expect(readSshKey(join(ssh, 'notes.txt'))).rejects.toThrow(`${join(ssh, 'notes.txt')} does not look like an OpenSSH public key (a line "ssh-ed25519 AAAA... comment")`);
    writeFileSync(join(ssh, 'two.pub'), `${KEY}\n${KEY}\n`);
    await expect(readSshKey(join(ssh, 'two.pub'))).rejects.toThrow(`${join(ssh, 'two.pub')} holds more than one line`);
    await expect(readSshKey(join(ssh, 'nope.pub'))).rejects.toThrow(`cannot read the SSH key ${join(ssh, 'nope.pub')}: ENOENT`);
    for (const f of ['hostile.pub', 'id_ed25519', 'rsa.pub', 'notes.txt', 'two.pub']) rmSync(join(ssh, f));
  });

  it('defaultSshKey: ssh-keygen\'s default name first, else the first *.pub; none is one clear line', async () => {
    const empty = join(scratch, 'empty-home');
    mkdirSync(empty);
    await expect(defaultSshKey(empty)).rejects.toThrow(`no SSH public key in ${join(empty, '.ssh')} (no *.pub file): make one with ssh-keygen -t ed25519, or give a key file`);
    writeFileSync(join(ssh, 'a-work.pub'), `${keyLine('ssh-rsa', 'work')}\n`);
    expect(await defaultSshKey(home)).toEqual({ file: join(ssh, 'a-work.pub'), key: keyLine('ssh-rsa', 'work') });
    writeFileSync(join(ssh, 'id_rsa.pub'), `${keyLine('ssh-rsa', 'rsa')}\n`);
    writeFileSync(join(ssh, 'id_ed25519.pub'), `${KEY}\n`);
    expect(await defaultSshKey(home)).toEqual({ file: join(ssh, 'id_ed25519.pub'), key: KEY });
    // The chosen file is checked, not trusted for its name.
    writeFileSync(join(ssh, 'id_ed25519.pub'), '-----BEGIN OPENSSH PRIVATE KEY-----\nAAAA\n-----END OPENSSH PRIVATE KEY-----\n');
    await expect(defaultSshKey(home)).rejects.toThrow(`${join(ssh, 'id_ed25519.pub')} is a private key: give its public half, never the private key`);
  });

  it('a real ssh-keygen key passes, where ssh-keygen is installed', async () => {
    if (spawnSync('ssh-keygen', ['-?'], { stdio: 'ignore' }).error) { console.log('skipped: no ssh-keygen'); return; }
    const k = join(scratch, 'real');
    run('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-C', 'me@host: "x" #y', '-f', k]);
    expect(await readSshKey(`${k}.pub`)).toBe(readFileSync(`${k}.pub`, 'utf8').trim());
    await expect(readSshKey(k)).rejects.toThrow(`${k} is a private key: give its public half (${k}.pub), never the private key`);
  });
});

describe('the tools disk\'s agent files', () => {
  it('list the agent, its unit and its sh starter; the disk\'s stamp covers them', () => {
    expect(toolsDiskAgentFiles('/build/unhalt-agent')).toEqual([
      { path: 'agent/unhalt-agent', from: '/build/unhalt-agent', mode: 0o755 },
      { path: 'agent/unhalt-agent.service', from: AGENT_UNIT_SRC, mode: 0o644 },
      { path: 'agent/start-agent', from: START_AGENT_SRC, mode: 0o755 },
    ]);
    const inputs = toolsDiskInputs();
    for (const f of [AGENT_UNIT_SRC, START_AGENT_SRC]) expect(inputs).toContain(f);
    expect(inputs.some((f) => f.endsWith('agent/agent.c'))).toBe(true);
    const build = readFileSync(new URL('../../native/guest/linux/build-workloads-disk.mjs', import.meta.url), 'utf8');
    expect(build).toContain('toolsDiskInputs()');
    expect(build).toContain('toolsDiskAgentFiles(agentBinary)');
  });

  it('the unit runs the agent on /dev/ttyS1 as the kit\'s inittab does, and restarts it', () => {
    const inittab = readFileSync(new URL('../../native/guest/linux/rootfs/etc/inittab', import.meta.url), 'utf8');
    const kit = /^::respawn:\/sbin\/unhalt-agent (\S+)$/m.exec(inittab);
    expect(kit?.[1]).toBe('/dev/ttyS1');
    const unit = readFileSync(AGENT_UNIT_SRC, 'utf8');
    expect(unit).toMatch(/^ExecStart=\/opt\/workloads\/agent\/unhalt-agent \/dev\/ttyS1$/m);
    expect(unit).toMatch(/^Restart=always$/m);
    expect(unit).toMatch(/^\[Service\]$/m);
    const sa = readFileSync(START_AGENT_SRC, 'utf8');
    expect(sa.startsWith('#!/bin/sh\n')).toBe(true);
    expect(sa).toMatch(/^dev=\/dev\/ttyS1$/m);
    expect(sa).toMatch(/^agent="\$d\/unhalt-agent"$/m);
    run('sh', ['-n', START_AGENT_SRC]);
  });

  it('start-agent runs the agent beside it on /dev/ttyS1, restarts it when it ends, and is not started twice', async () => {
    const dir = join(scratch, 'tools', 'agent');
    mkdirSync(dir, { recursive: true });
    copyFileSync(START_AGENT_SRC, join(dir, 'start-agent'));
    chmodSync(join(dir, 'start-agent'), 0o755);
    const calls = join(scratch, 'tools', 'calls');
    // A stand-in agent that notes its arguments and ends at once.
    writeFileSync(join(dir, 'unhalt-agent'), `#!/bin/sh\necho "$*" >> '${calls}'\n`, { mode: 0o755 });
    const env = { ...process.env, UNHALT_AGENT_PIDFILE: join(scratch, 'tools', 'agent.pid'), UNHALT_AGENT_LOG: join(scratch, 'tools', 'log') };
    // Through a pipe, as cloud-init runs it: the call must end although the agent keeps running.
    const first = await new Promise<{ code: number | null; out: string }>((resolve) => {
      const c = spawn(join(dir, 'start-agent'), [], { env });
      let out = '';
      c.stdout.on('data', (d) => { out += String(d); });
      c.on('close', (code) => resolve({ code, out }));
    });
    expect(first.code).toBe(0);
    expect(first.out).toMatch(/^start-agent: the agent runs on \/dev\/ttyS1 \(supervisor pid \d+\)\n$/);
    const pid = Number(readFileSync(env.UNHALT_AGENT_PIDFILE, 'utf8'));
    try {
      const again = spawnSync(join(dir, 'start-agent'), [], { env, encoding: 'utf8' });
      expect(again.stdout).toBe(`start-agent: the agent is already running (pid ${pid})\n`);
      const until = Date.now() + 10_000;
      while (Date.now() < until && (!existsSync(calls) || readFileSync(calls, 'utf8').split('\n').length < 3)) await new Promise((r) => setTimeout(r, 100));
      expect(readFileSync(calls, 'utf8').split('\n').slice(0, 2)).toEqual(['/dev/ttyS1', '/dev/ttyS1']);
    } finally {
      process.kill(pid, 'SIGTERM');
    }
  }, 20_000);

  it.skipIf(missingTool('gcc', 'gcc'))('the agent answers poweroff over --stdio without touching the host\'s init (it picks the guest\'s init only in a VM)', () => {
    const { agent } = buildLinuxBinaries({ outDir: join(scratch, 'host-agent') });
    const r = spawnSync(agent, ['--stdio'], { input: 'ping seq=1\npoweroff\nping seq=2\n', encoding: 'utf8', timeout: 10_000 });
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout.split('\n').slice(1)).toEqual(['@u1 pong seq=1', '@u1 poweroff', '@u1 pong seq=2', '']);
  }, 60_000);
});

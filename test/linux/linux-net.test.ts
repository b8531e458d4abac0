// virtio-net with a stock Linux on hardware-semantics KVM (the nested lane's L1): Debian's own
// virtio_net driver (a module the kit's /init loads) finds our device as eth0 and
// - over user networking (libslirp) gets 10.0.2.15 by DHCP at boot, by itself (the kit's /init
//   runs busybox udhcpc in the background with its lease script), reaches a TCP service the test listens with on the
//   host's 127.0.0.1 through the gateway 10.0.2.2, and is reached through a host port forward
//   (hostfwd=tcp:127.0.0.1:PORT-:8080) by the test, to a busybox `nc -l` in the guest;
// - resolves names through libslirp's DNS at 10.0.2.3 (the lease's resolver, in /etc/resolv.conf), which forwards to the resolver the host's
//   /etc/resolv.conf names: `unhalt run` in a mount namespace whose resolv.conf names a DNS server
//   of the test's own on a loopback address (an answer and an NXDOMAIN, both seen by that server);
// - over a TAP in a network namespace of the test's own (created and deleted here; the host's
//   interfaces are never touched), with `unhalt run` inside the namespace: the guest pings the
//   namespace's 10.0.3.1 and exchanges a line each way with a server there.
// Skipped on a PVM host (Linux cannot reach user space there); the TAP part also where there is
// no root, /dev/net/tun or `ip netns`.
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { connect, createServer, type AddressInfo, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { parseNetOption } from '../../electron/vmm/config/net-config.ts';
import { resolveMachine } from '../../electron/vmm/config/resolve.ts';
import { validateConfig } from '../../electron/vmm/config/vm-config.ts';
import { linuxKitBuilt } from '../../electron/vmm/guests-linux.ts';
import { probeHost } from '../../electron/vmm/machine/host-caps.ts';
import { VirtualMachine } from '../../electron/vmm/vm.ts';
import { UNHALT_BIN } from '../support/cli.ts';
import { DNS_ADDRESS, DNS_NAME, startDnsServer } from '../support/dns-server.ts';
import { freePort } from '../support/free-port.ts';
import { hardwareKvm, NEEDS_HARDWARE } from '../support/kvm-semantics.ts';
import { kvmAvailable, watch, type Watched } from '../support/probe.ts';
import { scaled } from '../support/time-scale.ts';
import { type GuestConsole, processConsole, shell as typeAndWait, vmConsole, waitForOutput } from '../support/guest-shell.ts';

const hw = kvmAvailable && linuxKitBuilt() && hardwareKvm();
if (!hw) console.log(`linux-net: skipped: ${linuxKitBuilt() ? NEEDS_HARDWARE : 'the Linux kit is not built (npm run build:linux)'}`);
const canNetns = process.getuid?.() === 0 && existsSync('/dev/net/tun') && spawnSync('ip', ['netns', 'list']).status === 0;
if (hw && !canNetns) console.log('linux-net: the TAP check is skipped: it needs root, /dev/net/tun and iproute2\'s `ip netns`');

// The DNS check: a mount namespace (util-linux unshare, root) for a resolv.conf of the test's own.
const canMountNs = process.getuid?.() === 0 && spawnSync('unshare', ['--mount', 'true']).status === 0 && existsSync('/etc/resolv.conf');
if (hw && !canMountNs) console.log('linux-net: the DNS check is skipped: it needs root, util-linux\'s unshare and an /etc/resolv.conf to mount over');

/** One step of a Linux guest on hardware semantics: ~20 s to the shell in L1, under a second on hardware. */
const STEP_MS = scaled(60_000);
const PROMPT = 'unhalt:~# ';
const home = mkdtempSync(`${tmpdir()}/unhalt-linux-net-home-`);

// The kit's /init asks for a lease in the background: the address comes after the prompt, by itself.
// Waits for the lease script's last step (resolv.conf), not its first (the address): in L1 the
// default route can come seconds after the address.
const LEASE = "i=0; until grep -q nameserver /etc/resolv.conf 2>/dev/null || [ $i -ge 60 ]; do sleep 1; i=$((i+1)); done; echo waited=$i; ip -4 addr show eth0";

let running: VirtualMachine | undefined;
const servers: Server[] = [];
const children: ReturnType<typeof spawn>[] = [];
afterEach(async () => {
  if (running && running.state !== 'stopped') await running.stop();
  running = undefined;
  for (const s of servers.splice(0)) s.close();
});
afterAll(() => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  rmSync(home, { recursive: true, force: true });
});

async function startLinux(net: string): Promise<Watched> {
  const { spec } = resolveMachine(validateConfig({ guest: 'linux', cpus: 2, memoryMiB: 512, name: 'linux-net', net: parseNetOption(net) }), probeHost());
  running = await VirtualMachine.start(spec);
  return watch(running);
}

/** Types `cmd` and waits for `pattern` in what follows (not in earlier output). */
/** Types `cmd` and waits for `pattern` in what follows, at most a step (guest-shell.ts). */
const shell = (g: GuestConsole, cmd: string, pattern: RegExp) => typeAndWait(g, cmd, pattern, STEP_MS);

function listen(server: Server, host = '127.0.0.1'): Promise<number> {
  servers.push(server);
  return new Promise((resolve) => server.listen(0, host, () => resolve((server.address() as AddressInfo).port)));
}

describe.skipIf(!hw)('Linux\'s own virtio_net on our device, hardware-semantics KVM', () => {
  it('user networking: DHCP gives eth0 10.0.2.15, a host TCP service is reached through 10.0.2.2, and a host port forward reaches a guest nc -l', async () => {
    // The host's service: answers one line with one line and remembers what it got.
    let got = '';
    const service = createServer((c) => {
      c.on('data', (d) => {
        got += d;
        if (got.includes('\n')) c.end('hello from the host\n');
      });
      c.on('error', () => {});
    });
    const servicePort = await listen(service);
    const hostPort = await freePort();
    const g = await startLinux(`user,hostfwd=tcp:127.0.0.1:${hostPort}-:8080`);
    const sh = vmConsole(g);
    await g.waitForConsole(PROMPT, STEP_MS);
    await shell(sh, 'ls /sys/class/net', /eth0/);
    await shell(sh, LEASE, /inet 10\.0\.2\.15\/24/);
    await shell(sh, 'ip route', /default via 10\.0\.2\.2 dev eth0/);
    await shell(sh, 'cat /etc/resolv.conf', /nameserver 10\.0\.2\.3/);

    // Outbound: the guest's connection to 10.0.2.2:PORT is libslirp's to the host's 127.0.0.1:PORT.
    const out = await shell(sh, `echo from-the-guest | nc 10.0.2.2 ${servicePort}; echo nc=$?`, /nc=\d/);
    expect(out).toContain('hello from the host');
    expect(got).toBe('from-the-guest\n');

    // Inbound: a host connection to the forwarded port is libslirp's to 10.0.2.15:8080.
    // Connected only once the guest's socket listens (in /proc/net/tcp: port 8080 = 1F90, state 0A), or libslirp's
    // connection to it would be refused and the host's reset.
    await shell(sh, 'echo served-by-the-guest > /tmp/reply && (nc -l -p 8080 < /tmp/reply > /tmp/heard &) ; '
      + "i=0; until grep -q ':1F90 00000000:0000 0A' /proc/net/tcp || [ $i -ge 60 ]; do sleep 1; i=$((i+1)); done; echo listening=$i", /listening=\d+/);
    const answer = await new Promise<string>((resolve, reject) => {
      const sock = connect(hostPort, '127.0.0.1');
      let text = '';
      const t = setTimeout(() => { sock.destroy(); reject(new Error(`no answer through the forward: ${JSON.stringify(text)}`)); }, STEP_MS);
      sock.on('connect', () => sock.end('from-the-host\n'));
      sock.on('data', (d) => { text += d; });
      sock.on('close', () => { clearTimeout(t); resolve(text); });
      sock.on('error', (e) => { clearTimeout(t); reject(new Error(`through the forward: ${e.message}; the guest's console: ${JSON.stringify(g.console().slice(-300))}`)); });
    });
    expect(answer).toBe('served-by-the-guest\n');
    await shell(sh, 'sleep 1; cat /tmp/heard', /from-the-host/);

    const c = g.vm.virtioCounters().net!;
    expect(c.interrupts).toBeGreaterThan(0);
    expect(c.requests[0]).toBeGreaterThan(0);
    expect(c.requests[1]).toBeGreaterThan(0);
    g.vm.sendConsole('poweroff\r');
    expect((await g.vm.ended).kind).toBe('poweroff');
  }, 6 * STEP_MS);

  describe.skipIf(!canMountNs)('name resolution', () => {
    it('libslirp\'s DNS at 10.0.2.3 forwards the guest\'s queries to the host\'s resolver: an answer and an NXDOMAIN come back through it', async () => {
      // The host's resolver is whatever /etc/resolv.conf names; `unhalt run` gets one of the test's
      // own (a DNS server on a loopback address of its own, port 53), bind-mounted over it in a
      // mount namespace of its own: the host's file is never touched, and nothing leaves the host.
      const dns = await startDnsServer();
      const resolvConf = join(home, 'resolv.conf');
      writeFileSync(resolvConf, `nameserver ${dns.address}\n`);
      const vm = spawn('unshare', ['--mount', '--propagation', 'private', 'sh', '-c', 'mount --bind "$0" /etc/resolv.conf && exec "$@"',
        resolvConf, process.execPath, UNHALT_BIN, 'run', '--guest', 'linux', '--cpus', '2', '--memory', '512', '--name', 'linux-dns', '--net', 'user'],
      { stdio: ['pipe', 'pipe', 'pipe'], env: { ...process.env, UNHALT_HOME: home } });
      children.push(vm);
      let out = '';
      vm.stdout!.on('data', (d) => { out += d; });
      vm.stderr!.on('data', (d) => { out += d; });
      const exited = new Promise<number | null>((resolve) => vm.on('close', (code) => resolve(code)));
      try {
        const sh = processConsole(vm, () => out);
        await waitForOutput(sh, /unhalt:~# /, 0, STEP_MS, 'a shell from unhalt run');
        await shell(sh, LEASE, /inet 10\.0\.2\.15\/24/);
        // The resolver the lease named (/etc/resolv.conf), not one given on the command line.
        const found = await shell(sh, `nslookup -type=a ${DNS_NAME}; echo lookup=$?`, /lookup=\d/);
        expect(found).toMatch(new RegExp(`Name:\\s+${DNS_NAME.replace(/\./g, '\\.')}\\s+Address:\\s+${DNS_ADDRESS.replace(/\./g, '\\.')}`));
        const missing = await shell(sh, `nslookup -type=a nowhere.${DNS_NAME}; echo lookup=$?`, /lookup=\d/);
        expect(missing).toMatch(/NXDOMAIN/);
        expect(missing).not.toContain(DNS_ADDRESS);
        // Both questions reached the host's resolver, from the host (libslirp's socket), not the guest.
        expect(dns.asked).toEqual(expect.arrayContaining([`A ${DNS_NAME}`, `A nowhere.${DNS_NAME}`]));
        sh.send('poweroff\r');
        expect(await exited).toBe(0);
      } finally {
        dns.close();
      }
    }, 6 * STEP_MS);
  });

  describe.skipIf(!canNetns)('over a TAP', () => {
    const ns = `unhalt-lnet-${process.pid}`;
    afterAll(() => { spawnSync('ip', ['netns', 'del', ns]); });
    const inNs = (...args: string[]) => {
      const r = spawnSync('ip', ['-n', ns, ...args], { encoding: 'utf8' });
      if (r.status !== 0) throw new Error(`ip -n ${ns} ${args.join(' ')}: ${r.stderr.trim()}`);
    };

    it('in a network namespace of the test\'s own: the guest (10.0.3.15) pings 10.0.3.1 and exchanges a line each way with a server there', async () => {
      const add = spawnSync('ip', ['netns', 'add', ns], { encoding: 'utf8' });
      if (add.status !== 0) throw new Error(`ip netns add: ${add.stderr.trim()}`);
      try {
        inNs('link', 'set', 'lo', 'up');
        inNs('tuntap', 'add', 'dev', 'tap0', 'mode', 'tap');
        inNs('addr', 'add', '10.0.3.1/24', 'dev', 'tap0');
        inNs('link', 'set', 'tap0', 'up');
        const server = spawn('ip', ['netns', 'exec', ns, process.execPath, '-e', [
          "const s = require('net').createServer((c) => { let t = ''; c.on('data', (d) => { t += d; if (t.includes('\\n')) { console.log('heard ' + t.trim()); c.end('hello over the tap\\n'); } }); c.on('error', () => {}); });",
          "s.listen(7777, '10.0.3.1', () => console.log('listening'));",
        ].join('\n')], { stdio: ['ignore', 'pipe', 'pipe'] });
        children.push(server);
        let heard = '';
        server.stdout!.on('data', (d) => { heard += d; });
        const vm = spawn('ip', ['netns', 'exec', ns, process.execPath, UNHALT_BIN, 'run', '--guest', 'linux', '--cpus', '2', '--memory', '512',
          '--name', 'linux-tap', '--net', 'tap=tap0'], { stdio: ['pipe', 'pipe', 'pipe'], env: { ...process.env, UNHALT_HOME: home } });
        children.push(vm);
        let out = '';
        vm.stdout!.on('data', (d) => { out += d; });
        vm.stderr!.on('data', (d) => { out += d; });
        const exited = new Promise<number | null>((resolve) => vm.on('close', (code) => resolve(code)));
        const sh = processConsole(vm, () => out);
        await waitForOutput(sh, /unhalt:~# /, 0, STEP_MS, 'a shell from unhalt run');
        await shell(sh, 'ip link set eth0 up && ip addr add 10.0.3.15/24 dev eth0 && echo addr=$?', /addr=0/);
        await shell(sh, 'ping -c 3 -W 5 10.0.3.1', /3 packets transmitted, 3 packets received/);
        const reply = await shell(sh, 'echo over-the-tap | nc 10.0.3.1 7777; echo nc=$?', /nc=\d/);
        expect(reply).toContain('hello over the tap');
        expect(heard).toContain('heard over-the-tap');
        sh.send('poweroff\r');
        expect(await exited).toBe(0);
        server.kill('SIGKILL');
      } finally {
        spawnSync('ip', ['netns', 'del', ns]);
      }
      expect(spawnSync('ip', ['netns', 'list'], { encoding: 'utf8' }).stdout).not.toContain(ns);
    }, 6 * STEP_MS);
  });
});

// virtio-net with user networking (libslirp) on real KVM, driven by the probe guest's own driver
// (native/guest/probe/virtio_net.c: hand-built frames, no IP stack): DHCP from libslirp's
// server, a guest TCP SYN that makes a real host server accept a connection, a host connection
// through a port forward that reaches the guest as a SYN, UDP and TCP request-response with a host
// echo server (TCP: the guest's own minimal client — handshake, in-order echoes, FIN; a lost echo
// or a refused connection reported, not waited out). What the guest reports is checked against
// the device's own counters. Bad input (a malformed forward, a host port in use,
// libslirp missing) is one line from the real command line with nothing started, and a stop
// leaves no thread, fd or socket behind.
import { createServer, connect, type AddressInfo, type Server } from 'node:net';
import { createSocket } from 'node:dgram';
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import type { AgentEvent } from '../../electron/vmm/agent/line-protocol.ts';
import { resolveMachine } from '../../electron/vmm/config/resolve.ts';
import { validateConfig } from '../../electron/vmm/config/vm-config.ts';
import { macForVm, parseNetOption } from '../../electron/vmm/config/net-config.ts';
import { probeHost } from '../../electron/vmm/machine/host-caps.ts';
import { VirtualMachine } from '../../electron/vmm/vm.ts';
import { macBytes } from '../../electron/vmm/devices/virtio/virtio-net.ts';
import { STATUS } from '../../electron/vmm/devices/virtio/virtio-pci-regs.ts';
import { runCli } from '../support/cli.ts';
import { freePort } from '../support/free-port.ts';
import { kvmAvailable, openFdCount, threadCount, watch, type Watched } from '../support/probe.ts';
import { scaled } from '../support/time-scale.ts';

const ip = (dotted: string) => dotted.split('.').reduce((a, x) => a * 256 + Number(x), 0);
const mac48 = (mac: string) => macBytes(mac).reduce((a, x) => a * 256 + x, 0);

async function startNet(append: string, net: string, name = 'net-test'): Promise<Watched> {
  const { spec } = resolveMachine(validateConfig({ guest: 'probe', cpus: 1, memoryMiB: 64, append, name, net: parseNetOption(net) }), probeHost());
  return watch(await VirtualMachine.start(spec));
}

function event(events: AgentEvent[], name: string): AgentEvent['fields'] {
  const e = events.find((x) => x.event === name);
  if (!e) throw new Error(`no "@u1 ${name}"; events: ${events.map((x) => `${x.event} ${JSON.stringify(x.fields)}`).join('; ')}`);
  return e.fields;
}

function listen(server: Server): Promise<number> {
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve((server.address() as AddressInfo).port)));
}

/** Whether a UDP port on 127.0.0.1 can be bound right now. */
function udpFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = createSocket('udp4');
    s.once('error', () => { s.close(); resolve(false); });
    s.bind(port, '127.0.0.1', () => s.close(() => resolve(true)));
  });
}

describe.skipIf(!kvmAvailable)('virtio-net over user networking (libslirp) on real KVM, probe guest driver', () => {
  let echoServer: Server | undefined;
  afterEach(() => { echoServer?.close(); echoServer = undefined; });
  it('DHCP offers 10.0.2.15 with router 10.0.2.2 and DNS 10.0.2.3; the MAC is the VM name\'s; frames and interrupts are counted', async () => {
    const g = await startNet('scenario=net-dhcp', 'user', 'dhcp-vm');
    const exit = await g.vm.ended;
    expect(exit.kind).toBe('poweroff');
    expect(event(g.events, 'net_up')).toEqual({ slot: 3, mac: mac48(macForVm('dhcp-vm')), link: 1 });
    expect(event(g.events, 'net_dhcp')).toMatchObject({
      ok: 1, yiaddr: ip('10.0.2.15'), router: ip('10.0.2.2'), dns: ip('10.0.2.3'), mask: ip('255.255.255.0'), server: ip('10.0.2.2'),
    });
    expect(g.console()).toContain('dhcp offer 10.0.2.15 router 10.0.2.2 dns 10.0.2.3');
    const c = g.vm.virtioCounters().net!;
    expect(c.status & STATUS.needsReset).toBe(0);
    // tx: at least the DISCOVER; rx: at least the OFFER (12-byte header + a frame of 300+ bytes of BOOTP).
    expect(c.requests[1]).toBeGreaterThanOrEqual(1);
    expect(c.requests[0]).toBeGreaterThanOrEqual(1);
    expect(c.bytes[0]).toBeGreaterThanOrEqual(12 + 14 + 20 + 8 + 300);
    expect(c.drops).toEqual([0, 0]);
    // One MSI per used batch: at least the OFFER's and the DISCOVER's.
    expect(c.interrupts).toBeGreaterThanOrEqual(2);
    expect(c.kicks).toBeGreaterThanOrEqual(2);
  });

  it('the guest\'s SYN to 10.0.2.2:P makes a real host server on 127.0.0.1:P accept a connection, and the guest sees the SYN-ACK', async () => {
    const server = createServer();
    let accepted = 0;
    const closed = new Promise<void>((resolve) => server.on('connection', (sock) => {
      accepted++;
      sock.on('error', () => {});
      sock.on('close', () => resolve());
    }));
    const port = await listen(server);
    try {
      const g = await startNet(`scenario=net-connect port=${port}`, 'user');
      expect((await g.vm.ended).kind).toBe('poweroff');
      expect(event(g.events, 'net_arp')).toMatchObject({ ip: ip('10.0.2.2') });
      expect(event(g.events, 'net_connect')).toMatchObject({ port, syn_ack: 1, rst: 0 });
      await closed; // the guest's RST closed the host's side of it
      expect(accepted).toBe(1);
    } finally {
      server.close();
    }
  });

  it('a host connection to a tcp hostfwd port reaches the guest as a SYN on its guest port; a udp forward holds its host port while the VM runs', async () => {
    const hostPort = await freePort();
    const udpPort = await freePort({ protocol: 'udp', host: '0.0.0.0' }); // hostfwd=udp::PORT binds every address
    const g = await startNet('scenario=net-listen port=8080 wait_ms=60000', `user,hostfwd=tcp:127.0.0.1:${hostPort}-:8080,hostfwd=udp::${udpPort}-:5353`);
    expect(await udpFree(udpPort)).toBe(false);
    const listening = await g.waitForEvent('net_listen');
    expect(listening.fields).toEqual({ port: 8080, ip: ip('10.0.2.15') });
    const sock = connect(hostPort, '127.0.0.1');
    sock.on('error', () => {});
    const syn = await g.waitForEvent('net_syn', scaled(30_000));
    sock.destroy();
    expect(syn.fields).toMatchObject({ port: 8080, syn: 1, src: ip('10.0.2.2') });
    expect((await g.vm.ended).kind).toBe('poweroff');
    expect(await udpFree(udpPort)).toBe(true);
  });

  it('UDP request-response: each datagram to 10.0.2.2:P comes back from a host echo server, one frame each way per round', async () => {
    const echo = createSocket('udp4');
    echo.on('message', (m, r) => echo.send(m, r.port, r.address));
    const port = await new Promise<number>((resolve) => echo.bind(0, '127.0.0.1', () => resolve(echo.address().port)));
    try {
      const rounds = 50;
      const g = await startNet(`scenario=net-udp-rr port=${port} rounds=${rounds} bytes=64`, 'user');
      expect((await g.vm.ended).kind).toBe('poweroff');
      const f = event(g.events, 'net_udp_rr');
      expect(f).toMatchObject({ ok: 1, port, rounds, bytes: 64, lost: 0 });
      expect(f.min_ns).toBeGreaterThan(0);
      expect(f.p50_ns).toBeGreaterThanOrEqual(f.min_ns!);
      const c = g.vm.virtioCounters().net!;
      // DISCOVER + ARP + the datagrams out; OFFER + ARP reply + the echoes in.
      expect(c.requests[1]).toBeGreaterThanOrEqual(rounds + 2);
      expect(c.requests[0]).toBeGreaterThanOrEqual(rounds + 2);
      expect(c.drops).toEqual([0, 0]);
    } finally {
      echo.close();
    }
  });

  it('TCP request-response: one connection to a host echo server on 127.0.0.1:P — handshake, every request echoed in order and ACKed, FIN both ways', async () => {
    let received = 0;
    let connections = 0;
    const ended = new Promise<void>((resolve) => {
      echoServer = createServer((c) => {
        connections++;
        c.setNoDelay(true);
        c.on('data', (d) => { received += d.length; c.write(d); });
        c.on('end', () => { c.end(); resolve(); }); // the guest's FIN reached the host's socket
        c.on('error', () => {});
      });
    });
    const port = await listen(echoServer!);
    const rounds = 50;
    const bytes = 100;
    const g = await startNet(`scenario=net-tcp-rr port=${port} rounds=${rounds} bytes=${bytes}`, 'user');
    expect((await g.vm.ended).kind).toBe('poweroff');
    const f = event(g.events, 'net_tcp_rr');
    expect(f).toMatchObject({ ok: 1, stage: 0, port, rounds, done: rounds, bytes, ooo: 0, bad_sum: 0, mismatch: 0, fin: 1, rst: 0 });
    expect(f.min_ns).toBeGreaterThan(0);
    expect(f.p50_ns).toBeGreaterThanOrEqual(f.min_ns!);
    expect(g.console()).toContain(`tcp rr ${rounds} of ${rounds} rounds of ${bytes} bytes`);
    await ended;
    expect(connections).toBe(1);
    expect(received).toBe(rounds * bytes);
    const c = g.vm.virtioCounters().net!;
    // Out: DISCOVER, ARP, SYN, ACK, per round a request and an ACK, FIN, last ACK; in: at least the OFFER, ARP reply, SYN-ACK, an echo a round, FIN.
    expect(c.requests[1]).toBeGreaterThanOrEqual(2 + 2 + 2 * rounds + 2);
    expect(c.requests[0]).toBeGreaterThanOrEqual(3 + rounds + 1);
    expect(c.drops).toEqual([0, 0]);
  });

  it('TCP request-response against a host server that accepts but never answers: the guest reports the lost echo (stage 14) instead of waiting forever', async () => {
    let got = 0;
    echoServer = createServer((c) => { c.on('data', (d) => { got += d.length; }); c.on('error', () => {}); });
    const port = await listen(echoServer);
    const g = await startNet(`scenario=net-tcp-rr port=${port} rounds=5 bytes=32`, 'user');
    expect((await g.vm.ended).kind).toBe('poweroff');
    expect(event(g.events, 'net_tcp_rr')).toMatchObject({ ok: 0, stage: 14, rounds: 5, done: 0, fin: 0 });
    expect(got).toBe(32); // the first request arrived; nothing came back, so there was no second
  });

  it('TCP request-response to a port nobody listens on: the handshake fails (stage 13, reset) and is reported', async () => {
    const port = await freePort();
    const g = await startNet(`scenario=net-tcp-rr port=${port} rounds=5`, 'user');
    expect((await g.vm.ended).kind).toBe('poweroff');
    expect(event(g.events, 'net_tcp_rr')).toMatchObject({ ok: 0, stage: 13, done: 0, rst: 1 });
  });

  it('stopping a VM while its I/O thread waits on libslirp releases the thread, every fd and the forwarded port', async () => {
    const hostPort = await freePort();
    const start = async () => {
      const g = await startNet('scenario=net-listen port=22 wait_ms=120000', `user,hostfwd=tcp:127.0.0.1:${hostPort}-:22`, 'net-stop');
      await g.waitForEvent('net_listen');
      return g;
    };
    const settle = () => new Promise((r) => setTimeout(r, 300));
    await (await start()).vm.stop(); // warm up the process-wide pieces (worker pool, koffi, libslirp)
    await settle();
    const fds = openFdCount();
    const threads = threadCount();
    for (let i = 0; i < 3; i++) {
      const g = await start();
      expect(threadCount()).toBeGreaterThan(threads);
      expect((await g.vm.stop()).kind).toBe('stopped');
    }
    await settle();
    expect(openFdCount()).toBe(fds);
    expect(threadCount()).toBe(threads);
    // libslirp's listening socket went with the VM: the port can be had again.
    const again = createServer();
    await new Promise<void>((resolve, reject) => { again.once('error', reject); again.listen(hostPort, '127.0.0.1', resolve); });
    await new Promise((r) => again.close(r));
  });

  describe('bad input: one line, exit 1, nothing started', () => {
    const expectRefused = (r: { code: number | null; stdout: string; stderr: string }, pattern: RegExp) => {
      expect(r.code).toBe(1);
      expect(r.stdout).toBe(''); // no guest ever printed a byte
      const lines = r.stderr.trim().split('\n').filter((l) => !l.startsWith('unhalt: note:'));
      expect(lines).toHaveLength(1);
      expect(lines[0]).toMatch(pattern);
    };

    for (const [bad, why] of [
      ['user,hostfwd=tcp:127.0.0.1:80', /hostfwd "tcp:127.0.0.1:80" is malformed; the syntax is hostfwd=\[tcp\|udp\]/],
      ['user,hostfwd=tcp:127.0.0.1:99999-:22', /bad host port "99999"/],
      ['user,hostfwd=sctp::2222-:22', /is malformed/],
      ['user,hostfwd=tcp:localhost:2222-:22', /host address must be an IPv4 address/],
      ['user,hostfwd=tcp::2222-192.168.1.5:22', /guest address must be a guest's address in 10\.0\.2\.0\/24/],
      ['user,hostfwd=tcp::2222-:22,hostfwd=tcp::2222-:23', /host port tcp 127\.0\.0\.1:2222 is forwarded twice/],
      ['user,restrict=on', /unknown option "restrict=on"/],
      ['bridge', /--net must be user\[,hostfwd=\.\.\.\] or tap=NAME/],
    ] as const) {
      it(`--net ${bad}`, async () => {
        expectRefused(await runCli(['run', '--guest', 'probe', '--net', bad, '--append', 'scenario=net-dhcp']), why);
      });
    }

    it('a host port already in use is named', async () => {
      const holder = createServer();
      const port = await listen(holder);
      try {
        const r = await runCli(['run', '--guest', 'probe', '--net', `user,hostfwd=tcp:127.0.0.1:${port}-:22`, '--append', 'scenario=net-dhcp']);
        expectRefused(r, new RegExp(`^unhalt: host port ${port} \\(tcp on 127\\.0\\.0\\.1\\) is already in use or cannot be bound: hostfwd=tcp:127\\.0\\.0\\.1:${port}-:22 \\(EADDRINUSE\\)$`));
      } finally {
        await new Promise((r) => holder.close(r));
      }
    });

    it('libslirp missing names the package to install', async () => {
      const r = await runCli(['run', '--guest', 'probe', '--net', 'user', '--append', 'scenario=net-dhcp'], { env: { UNHALT_LIBSLIRP: '/nonexistent/libslirp.so.0' } });
      expectRefused(r, /^unhalt: user networking needs libslirp \(\/nonexistent\/libslirp\.so\.0\), which cannot be loaded: install it with apt-get install libslirp0$/);
    });
  });
});

// A TAP in a network namespace of the test's own (the host's interfaces are never touched): the
// VMM runs inside it (`ip netns exec`), the tap's far side is the namespace's kernel with
// 10.0.3.1, and a server there accepts the guest's connection. A tap name no interface has is
// created by the VMM there (root), brought up and gone with the VM; without CAP_NET_ADMIN (setpriv)
// it is refused in one line saying how to make one.
const canNetns = kvmAvailable && process.getuid?.() === 0 && existsSync('/dev/net/tun')
  && spawnSync('ip', ['netns', 'list']).status === 0;

/** The one line for a tap that does not exist and may not be created here. */
const howToCreate = (tap: string) => new RegExp(`^unhalt: tap ${tap} does not exist, and this process may not create it \\(.*creating needs CAP_NET_ADMIN\\): `
  + `create it first \\(ip tuntap add dev ${tap} mode tap user \\$\\(id -un\\); ip link set ${tap} up\\)$`);
const TAP_MODULE = fileURLToPath(new URL('../../native/net/tap.ts', import.meta.url));

describe.skipIf(!canNetns)('virtio-net over a TAP in a network namespace of the test\'s own', () => {
  const ns = `unhalt-test-${process.pid}`;
  // Also when a failed or timed-out test never reached its own clean-up.
  afterAll(() => { spawnSync('ip', ['netns', 'del', ns]); });
  const inNs = (...args: string[]) => {
    const r = spawnSync('ip', ['-n', ns, ...args], { encoding: 'utf8' });
    if (r.status !== 0) throw new Error(`ip -n ${ns} ${args.join(' ')}: ${r.stderr.trim()}`);
  };
  const withNamespace = async (body: () => Promise<void>) => {
    const add = spawnSync('ip', ['netns', 'add', ns], { encoding: 'utf8' });
    if (add.status !== 0) throw new Error(`ip netns add: ${add.stderr.trim()}`);
    try {
      inNs('link', 'set', 'lo', 'up');
      inNs('tuntap', 'add', 'dev', 'tap0', 'mode', 'tap');
      inNs('addr', 'add', '10.0.3.1/24', 'dev', 'tap0');
      inNs('link', 'set', 'tap0', 'up');
      await body();
    } finally {
      spawnSync('ip', ['netns', 'del', ns]); // takes the tap with it
    }
  };

  it('the guest (static 10.0.3.15) ARPs for 10.0.3.1 and connects to a server in the namespace; a tap that may not be created and a non-tap are one line', async () => {
    await withNamespace(async () => {
      const server = spawn('ip', ['netns', 'exec', ns, process.execPath, '-e', [
        "const s = require('net').createServer((c) => { console.log('accepted'); c.on('error', () => {}); c.on('close', () => process.exit(0)); });",
        "s.listen(7777, '10.0.3.1', () => console.log('listening'));",
        'setTimeout(() => process.exit(3), 120000);',
      ].join('\n')], { stdio: ['ignore', 'pipe', 'pipe'] });
      let out = '';
      server.stdout.on('data', (d) => { out += d; });
      const serverDone = new Promise<number | null>((r) => server.on('close', r));
      try {
        await new Promise<void>((resolve, reject) => {
          const t = setTimeout(() => reject(new Error(`the namespace's server did not start: ${out}`)), scaled(20_000));
          server.stdout.on('data', () => { if (out.includes('listening')) { clearTimeout(t); resolve(); } });
        });
        const prefix = ['ip', 'netns', 'exec', ns];
        const log = join(mkdtempSync(join(tmpdir(), 'unhalt-tap-')), 'agent.log');
        const r = await runCli(['run', '--guest', 'probe', '--net', 'tap=tap0', '--agent-log', log,
          '--append', 'scenario=net-connect port=7777 ip=10.0.3.15 gw=10.0.3.1'], { prefix });
        expect(r.code, r.stderr).toBe(0);
        const agent = readFileSync(log, 'utf8');
        rmSync(dirname(log), { recursive: true, force: true });
        expect(agent).toMatch(/@u1 net_static ip=167772943 gw=167772929/);
        expect(agent).toMatch(/@u1 net_arp ip=167772929 mac=\d+/);
        expect(agent).toMatch(/@u1 net_connect port=7777 syn_ack=1 rst=0/);
        expect(await serverDone).toBe(0);
        expect(out).toContain('accepted'); // (its peer address may be gone already: the guest resets at once)

        // A tap this process may not create (root without CAP_NET_ADMIN: TUNSETIFF refused): the one line says how
        // to make one it may attach. Nothing is created.
        const noNetAdmin = [...prefix, 'setpriv', '--inh-caps=-net_admin', '--bounding-set=-net_admin'];
        // Another user's tap (uid nobody owns it), asked for by root without CAP_NET_ADMIN: whose it is, what to do.
        inNs('tuntap', 'add', 'dev', 'utap0', 'mode', 'tap', 'user', '65534');
        for (const [tap, why, who] of [
          ['tap9', howToCreate('tap9'), noNetAdmin],
          ['lo', /^unhalt: lo is a network interface but not a tap/, prefix],
          ['utap0', /^unhalt: tap utap0 cannot be opened: EPERM: Operation not permitted \(it belongs to another user or group: ip tuntap add \.\.\. user YOU, or run with CAP_NET_ADMIN\)$/, noNetAdmin],
        ] as const) {
          const bad = await runCli(['run', '--guest', 'probe', '--net', `tap=${tap}`, '--append', 'scenario=net-dhcp'], { prefix: [...who] });
          expect(bad.code).toBe(1);
          expect(bad.stdout).toBe('');
          expect(bad.stderr.trim().split('\n').filter((l) => !l.startsWith('unhalt: note:'))).toEqual([expect.stringMatching(why)]);
        }
        expect(spawnSync('ip', ['-n', ns, 'link', 'show', 'tap9']).status).not.toBe(0);

        // An ordinary user (uid nobody, no groups, no capabilities: /dev/kvm is not theirs either, so the tap is
        // asked for directly, as the start's check does): the same line.
        const asNobody = spawnSync('ip', ['netns', 'exec', ns, 'setpriv', '--reuid=65534', '--regid=65534', '--clear-groups', '--inh-caps=-all',
          process.execPath, '-e', `import(${JSON.stringify(TAP_MODULE)}).then((t) => { try { t.openTap('tap9'); console.log('opened'); } catch (e) { console.log(e.message); } })`],
        { encoding: 'utf8' });
        expect(asNobody.stdout.trim(), asNobody.stderr).toMatch(new RegExp(howToCreate('tap9').source.replace('^unhalt: ', '^')));
        expect(spawnSync('ip', ['-n', ns, 'link', 'show', 'tap9']).status).not.toBe(0);
      } finally {
        server.kill('SIGKILL');
      }
    });
    expect(spawnSync('ip', ['netns', 'list'], { encoding: 'utf8' }).stdout).not.toContain(ns);
  }, scaled(120_000));

  it('a tap name no interface has is created by the VMM (it has CAP_NET_ADMIN), up, and gone with the VM; a host connection to the guest crosses it both ways', async () => {
    await withNamespace(async () => {
      const dir = mkdtempSync(join(tmpdir(), 'unhalt-tap-'));
      const log = join(dir, 'agent.log');
      const prefix = ['ip', 'netns', 'exec', ns];
      try {
        const vm = runCli(['run', '--guest', 'probe', '--net', 'tap=tapnew', '--agent-log', log,
          '--append', 'scenario=net-listen port=7000 ip=10.0.4.15 gw=10.0.4.1 wait_ms=60000'], { prefix });
        // The guest listens: its I/O thread holds the tap it created (the start's check made one and let it go before).
        const deadline = Date.now() + scaled(30_000);
        // The whole line, its end included: the log is written as the bytes come, so a line can be
        // in it only in part, and the check below reads its fields.
        while (!(existsSync(log) && /@u1 net_listen [^\n]*\n/.test(readFileSync(log, 'utf8'))) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
        expect(readFileSync(log, 'utf8')).toMatch(/@u1 net_listen port=7000 ip=167773199/);
        const link = spawnSync('ip', ['-n', ns, '-o', 'link', 'show', 'tapnew'], { encoding: 'utf8' });
        expect(link.stdout).toMatch(/tapnew: <[^>]*\bUP\b[^>]*>/);
        inNs('addr', 'add', '10.0.4.1/24', 'dev', 'tapnew'); // (10.0.3.0/24 is tap0's)
        // From the namespace: the kernel ARPs for 10.0.4.15 (the guest answers), sends the SYN (the guest answers RST).
        const client = spawnSync('ip', ['netns', 'exec', ns, process.execPath, '-e', [
          "const c = require('net').connect(7000, '10.0.4.15');",
          "c.on('error', (e) => { console.log(e.code); process.exit(0); });",
          "c.on('connect', () => { console.log('connected'); process.exit(1); });",
          'setTimeout(() => { console.log(\'timeout\'); process.exit(2); }, 30000);',
        ].join('\n')], { encoding: 'utf8' });
        expect(client.stdout.trim()).toBe('ECONNREFUSED'); // the guest's reset came back over the tap
        const r = await vm;
        expect(r.code, r.stderr).toBe(0);
        expect(readFileSync(log, 'utf8')).toMatch(/@u1 net_syn port=7000 syn=1 src=167773185 src_port=\d+/);
        // Not persistent: it went when the VM's fd closed.
        expect(spawnSync('ip', ['-n', ns, 'link', 'show', 'tapnew']).status).not.toBe(0);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    });
  }, scaled(120_000));
});

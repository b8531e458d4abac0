// The probe guest's virtio-net driver (native/guest/probe/virtio_net.c) under QEMU's own
// virtio-net-pci on q35 with QEMU's `-netdev user` (the same libslirp): the driver's UDP and TCP
// request-response exchanges with a host echo server are checked against the reference device, as
// test/kvm/virtio-net.test.ts checks them against ours — the TCP client's handshake, in-order
// echoes and FIN included, and every byte reaching the host's socket.
import { createSocket } from 'node:dgram';
import { createServer, type AddressInfo } from 'node:net';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { agentEvents, runTimed } from '../../bench/lib.ts';
import type { AgentEvent } from '../../electron/vmm/agent/line-protocol.ts';
import { probeHost } from '../../electron/vmm/machine/host-caps.ts';
import { hostKind } from '../../electron/vmm/host.ts';
import { qemuSkipReason, root } from '../support/qemu-probe.ts';
import { scaled } from '../support/time-scale.ts';

const skip = qemuSkipReason();
if (skip) console.warn(`skipping the virtio-net vs QEMU tests: ${skip}`);
const pvm = hostKind() === 'pvm'; // the host's kind needs no KVM (a host may have none: then these skip)
const dir = mkdtempSync(join(tmpdir(), 'unhalt-net-qemu-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

async function underQemu(append: string): Promise<AgentEvent[]> {
  const ttyS1 = join(dir, 'qemu.ttyS1');
  const r = await runTimed('qemu-system-x86_64', [
    '-machine', 'q35', '-accel', 'kvm', '-cpu', 'host,-arch-capabilities', '-smp', '1', '-m', '128',
    '-nodefaults', '-no-user-config', '-display', 'none', '-no-reboot', '-device', 'isa-debug-exit,iobase=0xf4,iosize=4',
    '-kernel', `${root}assets/guests/probe.elf`, '-append', `${append}${pvm ? ' unhalt.pvm=1' : ''}`,
    '-netdev', 'user,id=n0,ipv6=off', '-device', 'virtio-net-pci,disable-legacy=on,netdev=n0',
    '-serial', 'null', '-serial', `file:${ttyS1}`,
  ], { timeoutMs: scaled(60_000) });
  expect([0, 1], `QEMU status ${r.code}: ${r.stderr.slice(-300)}`).toContain(r.code);
  return agentEvents(readFileSync(ttyS1, 'utf8'));
}

const fields = (events: AgentEvent[], name: string) => {
  const e = events.find((x) => x.event === name);
  if (!e) throw new Error(`no "@u1 ${name}": ${events.map((x) => `${x.event} ${JSON.stringify(x.fields)}`).join('; ')}`);
  return e.fields;
};

describe.skipIf(!!skip)('the probe\'s virtio-net driver under QEMU\'s virtio-net-pci and -netdev user', () => {
  it('TCP request-response: one connection, every request echoed in order and ACKed, FIN both ways, every byte at the host', async () => {
    let received = 0;
    let connections = 0;
    let ended = false;
    const server = createServer((c) => {
      connections++;
      c.setNoDelay(true);
      c.on('data', (d) => { received += d.length; c.write(d); });
      c.on('end', () => { ended = true; c.end(); });
      c.on('error', () => {});
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const port = (server.address() as AddressInfo).port;
    try {
      const rounds = 50;
      const bytes = 100;
      const events = await underQemu(`scenario=net-tcp-rr port=${port} rounds=${rounds} bytes=${bytes}`);
      expect(fields(events, 'net_tcp_rr')).toMatchObject({
        ok: 1, stage: 0, port, rounds, done: rounds, bytes, ooo: 0, bad_sum: 0, mismatch: 0, fin: 1, rst: 0,
      });
      expect(connections).toBe(1);
      expect(received).toBe(rounds * bytes);
      expect(ended).toBe(true);
    } finally {
      server.close();
    }
  });

  it('UDP request-response: each datagram comes back from the host echo server', async () => {
    const echo = createSocket('udp4');
    echo.on('message', (m, r) => echo.send(m, r.port, r.address));
    const port = await new Promise<number>((resolve) => echo.bind(0, '127.0.0.1', () => resolve(echo.address().port)));
    try {
      const events = await underQemu(`scenario=net-udp-rr port=${port} rounds=50 bytes=64`);
      expect(fields(events, 'net_udp_rr')).toMatchObject({ ok: 1, port, rounds: 50, bytes: 64, lost: 0 });
    } finally {
      echo.close();
    }
  });
});

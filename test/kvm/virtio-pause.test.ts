// A pause is a real pause for the virtio devices too (VirtualMachine.pause, as QEMU's `stop`), on
// real KVM with the probe guest's own drivers: during a steady stream of virtio-rng requests and
// of virtio-blk reads, once pause() resolved the device's counters (requests, notifications taken,
// interrupts) and the used index the device publishes in guest RAM stand still however long the
// pause lasts, also when a notification arrives during it (signalled on the device's eventfd, as
// KVM's ioeventfd does); after resume() they move again, that notification is served (an edge:
// it must not be lost) and the guest's driver completes every request (one MSI each). A host connection through a user-networking port forward made while the guest
// is paused is not written into it (the receive queue's counters and used index stand still, no
// drop) and reaches it as a SYN after the resume. A stop while paused ends the VM with no thread,
// fd or forwarded port left.
import { connect, createServer } from 'node:net';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { AgentEvent } from '../../electron/vmm/agent/line-protocol.ts';
import { resolveMachine } from '../../electron/vmm/config/resolve.ts';
import { validateConfig } from '../../electron/vmm/config/vm-config.ts';
import { parseNetOption } from '../../electron/vmm/config/net-config.ts';
import { probeHost } from '../../electron/vmm/machine/host-caps.ts';
import type { GuestMemory } from '../../electron/vmm/memory/guest-memory.ts';
import type { PciDeviceName } from '../../electron/vmm/devices/board.ts';
import { VirtualMachine } from '../../electron/vmm/vm.ts';
import { EventFdWriter } from '../../native/kvm/eventfd.ts';
import { freePort } from '../support/free-port.ts';
import { kvmAvailable, openFdCount, threadCount, watch, type Watched } from '../support/probe.ts';
import { scaled } from '../support/time-scale.ts';

const dir = mkdtempSync(join(tmpdir(), 'unhalt-virtio-pause-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** How long each pause is watched for movement: long beside a request here (~2 ms), short beside the test. */
const PAUSE_WATCH_MS = 400;

interface Started extends Watched {
  memory: GuestMemory;
  /** Makes a notification of a device arrive now, as KVM's ioeventfd does at the guest's notify write. */
  notify(device: PciDeviceName): void;
}

async function start(config: Record<string, unknown>, name: string): Promise<Started> {
  const { spec } = resolveMachine(validateConfig({ guest: 'probe', cpus: 1, memoryMiB: 64, name, ...config }), probeHost());
  let memory: GuestMemory | undefined;
  let eventFds: Readonly<Record<string, number>> = {};
  spec.testHooks = { beforeFirstRun: (ctx) => { memory = ctx.memory; eventFds = ctx.virtioEventFds; } };
  const g = watch(await VirtualMachine.start(spec));
  const writer = new EventFdWriter();
  return { ...g, memory: memory!, notify: (device) => writer.signal(eventFds[device]!) };
}

function event(events: AgentEvent[], name: string): AgentEvent['fields'] {
  const e = events.find((x) => x.event === name);
  if (!e) throw new Error(`no "@u1 ${name}"; events: ${events.map((x) => `${x.event} ${JSON.stringify(x.fields)}`).join('; ')}`);
  return e.fields;
}

/** Resolves once `check` holds (polled every few ms), or fails naming `what` after `ms`. */
async function until(check: () => boolean, what: string, ms = scaled(20_000)): Promise<void> {
  const end = performance.now() + ms;
  while (!check()) {
    if (performance.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The used index the device last published for a queue, read from guest RAM (the probe reports where its used ring is). */
async function usedIndexReader(g: Started, slot: number, queue: number): Promise<() => number> {
  await until(() => g.events.some((e) => e.event === 'virtio_queue' && e.fields.slot === slot && e.fields.queue === queue), `the used ring of slot ${slot} queue ${queue}`);
  const at = g.events.find((e) => e.event === 'virtio_queue' && e.fields.slot === slot && e.fields.queue === queue)!.fields.used!;
  return () => new DataView(g.memory.read(at + 2, 2).buffer).getUint16(0, true);
}

/** What of a device may not move while the VM is paused. */
function moving(g: Watched, device: PciDeviceName) {
  const c = g.vm.virtioCounters()[device]!;
  return { requests: c.requests, bytes: c.bytes, kicks: c.kicks, interrupts: c.interrupts, mmioNotifies: c.mmioNotifies, device: c.device };
}

/**
 * Pauses and resumes a VM whose guest streams requests on `device` queue 0, `cycles` times or
 * while the stream lasts (`streaming`): each pause stands still from its resolve on, even with a
 * notification arriving during it (one per pause, which the resume must serve: the counters'
 * kicks include it), and each resume moves again. Returns how many cycles ran.
 */
async function pauseCycles(g: Started, device: PciDeviceName, slot: number, streaming: () => boolean, cycles: number): Promise<number> {
  const used = await usedIndexReader(g, slot, 0);
  const requests = () => g.vm.virtioCounters()[device]!.requests[0]!;
  await until(() => requests() > 0, `the guest's first ${device} request`);
  let done = 0;
  for (; done < cycles && streaming(); done++) {
    await g.vm.pause();
    expect(g.vm.state).toBe('paused');
    const before = moving(g, device);
    const usedBefore = used();
    g.notify(device);
    await sleep(PAUSE_WATCH_MS);
    expect(moving(g, device)).toEqual(before);
    expect(used()).toBe(usedBefore);
    g.vm.resume();
    expect(g.vm.state).toBe('running');
    // The stream goes on: the device serves again and publishes in guest RAM again.
    await until(() => requests() > before.requests[0]! + 2 && used() !== usedBefore, `${device} requests after resume ${done + 1}`);
  }
  return done;
}

describe.skipIf(!kvmAvailable)('pause stops the virtio devices too (probe guest drivers on real KVM)', () => {
  it('virtio-rng: while paused no request is served, no used index published, no MSI sent; after resume the stream goes on and every request completes with its interrupt', async () => {
    const rounds = 3000;
    const g = await start({ rng: true, append: `scenario=virtio-rng bytes=16 rounds=${rounds}` }, 'pause-rng');
    const cycles = await pauseCycles(g, 'rng', 1, () => g.vm.virtioCounters().rng!.requests[0]! < rounds * 0.8, 5);
    expect(cycles).toBeGreaterThan(0);
    expect((await g.vm.ended).kind).toBe('poweroff');
    expect(g.events.find((e) => e.event === 'fault')).toBeUndefined();
    expect(event(g.events, 'virtio_rng')).toMatchObject({ ok: 1, rounds, total_bytes: 16 * rounds, irqs: rounds });
    const c = g.vm.virtioCounters().rng!;
    expect(c.requests).toEqual([rounds]);
    expect(c.interrupts).toBe(rounds);
    expect(c.kicks).toBe(rounds + cycles); // the guest's and the one made during each pause: none lost
  });

  // Read-only, and snapshot=on (every read through the overlay's granule map, disk-overlay.ts).
  for (const mode of [{ readonly: true as const }, { snapshot: true as const }]) it(`virtio-blk (${Object.keys(mode)[0]}): a stream of 4 KiB reads stands still while paused and completes after the resumes, no request failed`, async () => {
    const disk = join(dir, `stream-${Object.keys(mode)[0]}.img`);
    writeFileSync(disk, Buffer.alloc(4 * 1024 * 1024, 0x5a));
    const ops = 2000;
    const g = await start({ disks: [{ path: disk, ...mode }], append: `scenario=virtio-blk bench=1 ops=${ops} seq_kib=64` }, 'pause-blk');
    const cycles = await pauseCycles(g, 'blk0', 8, () => g.vm.virtioCounters().blk0!.requests[0]! < ops * 0.8, 5);
    expect(cycles).toBeGreaterThan(0);
    expect((await g.vm.ended).kind).toBe('poweroff');
    expect(g.events.find((e) => e.event === 'fault')).toBeUndefined();
    expect(event(g.events, 'virtio_blk_bench')).toMatchObject({ ops, seq_kib: 64 });
    const c = g.vm.virtioCounters().blk0!;
    expect(c.device).toMatchObject({ ioErrors: 0 });
    expect(c.requests[0]).toBe(c.interrupts);
    expect(c.kicks).toBe(c.requests[0]! + cycles); // one per request and the one made during each pause: none lost
  });

  it('user networking: a host connection through a port forward made while the guest is paused is held, not dropped, and reaches the guest as a SYN after the resume', async () => {
    const hostPort = await freePort();
    const g = await start({ append: 'scenario=net-listen port=8080 wait_ms=120000', net: parseNetOption(`user,hostfwd=tcp:127.0.0.1:${hostPort}-:8080`) }, 'pause-net');
    await g.waitForEvent('net_listen');
    const rxUsed = await usedIndexReader(g, 3, 0);
    await g.vm.pause();
    const before = moving(g, 'net');
    const usedBefore = rxUsed();
    const sock = connect(hostPort, '127.0.0.1');
    sock.on('error', () => {});
    try {
      // The host's connect completes in the kernel; libslirp accepts it on the I/O thread and
      // makes the guest's SYN, which must wait for the resume.
      await new Promise<void>((resolve, reject) => { sock.once('connect', resolve); sock.once('error', reject); });
      await sleep(PAUSE_WATCH_MS);
      expect(moving(g, 'net')).toEqual(before);
      expect(rxUsed()).toBe(usedBefore);
      expect(g.vm.virtioCounters().net!.drops).toEqual([0, 0]);
      expect(g.events.find((e) => e.event === 'net_syn')).toBeUndefined();
      g.vm.resume();
      const syn = await g.waitForEvent('net_syn', scaled(30_000));
      expect(syn.fields).toMatchObject({ port: 8080, syn: 1, src: 0x0a000202 });
    } finally {
      sock.destroy();
    }
    expect((await g.vm.ended).kind).toBe('poweroff');
    expect(g.vm.virtioCounters().net!.drops).toEqual([0, 0]);
  });

  it('a stop while paused ends the VM: no thread, fd or forwarded port left', async () => {
    const hostPort = await freePort();
    const run = async () => {
      const g = await start({ rng: true, append: 'scenario=net-listen port=22 wait_ms=120000', net: parseNetOption(`user,hostfwd=tcp:127.0.0.1:${hostPort}-:22`) }, 'pause-stop');
      await g.waitForEvent('net_listen');
      await g.vm.pause();
      return g;
    };
    await (await run()).vm.stop(); // warm up the process-wide pieces (worker pool, koffi, libslirp)
    await sleep(300);
    const fds = openFdCount();
    const threads = threadCount();
    for (let i = 0; i < 2; i++) {
      const g = await run();
      expect(g.vm.state).toBe('paused');
      expect((await g.vm.stop()).kind).toBe('stopped');
      expect(g.vm.state).toBe('stopped');
    }
    await sleep(300);
    expect(openFdCount()).toBe(fds);
    expect(threadCount()).toBe(threads);
    const again = createServer();
    await new Promise<void>((resolve, reject) => { again.once('error', reject); again.listen(hostPort, '127.0.0.1', resolve); });
    await new Promise((r) => again.close(r));
  });
});

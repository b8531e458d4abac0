// The PCI bus and virtio-rng on real KVM, driven by the probe guest's own enumerator and driver
// (native/guest/probe/virtio.c, scenario virtio-rng): bus 0 through 0xCF8/0xCFC, BAR sizing,
// VIRTIO_F_VERSION_1, one split queue, MSI-X. What the guest reports is checked against the
// device's own counters (VirtualMachine.virtioCounters): notifications by ioeventfd where this
// KVM has them (none taken as MMIO exits), by MMIO exit when ioeventfds are turned off, one MSI
// per request; a reset that forgets everything; a hostile driver that gets DEVICE_NEEDS_RESET
// while the VMM runs on.
import { describe, expect, it } from 'vitest';
import { CAP } from '../../native/kvm/abi.ts';
import { Kvm } from '../../native/kvm/kvm.ts';
import type { AgentEvent } from '../../electron/vmm/agent/line-protocol.ts';
import { resolveMachine } from '../../electron/vmm/config/resolve.ts';
import { validateConfig } from '../../electron/vmm/config/vm-config.ts';
import { probeHost } from '../../electron/vmm/machine/host-caps.ts';
import { VirtualMachine } from '../../electron/vmm/vm.ts';
import { STATUS } from '../../electron/vmm/devices/virtio/virtio-pci-regs.ts';
import { QUEUE_ERROR } from '../../electron/vmm/devices/virtio/virtqueue.ts';
import { kvmAvailable, openFdCount, threadCount, watch } from '../support/probe.ts';

const hostHasIoeventfd = kvmAvailable && (() => {
  const kvm = Kvm.open();
  try {
    return kvm.checkExtension(CAP.IOEVENTFD) > 0;
  } finally {
    kvm.close();
  }
})();

async function runRng(append: string, opts: { rng?: boolean; noIoeventfd?: boolean } = {}) {
  const { spec } = resolveMachine(validateConfig({
    guest: 'probe', cpus: 1, memoryMiB: 64, append: `scenario=virtio-rng ${append}`, name: 'rng', ...(opts.rng === false ? {} : { rng: true }),
  }), probeHost());
  if (opts.noIoeventfd) spec.testHooks = { noIoeventfd: true };
  const g = watch(await VirtualMachine.start(spec));
  const exit = await g.vm.ended;
  expect(g.events.find((e) => e.event === 'fault')).toBeUndefined();
  expect(exit.kind).toBe('poweroff');
  return { ...g, counters: g.vm.virtioCounters().rng };
}

function event(events: AgentEvent[], name: string): AgentEvent['fields'] {
  const e = events.find((x) => x.event === name);
  if (!e) throw new Error(`no "@u1 ${name}"; events: ${events.map((x) => `${x.event} ${JSON.stringify(x.fields)}`).join('; ')}`);
  return e.fields;
}

function randomHex(console: string): string {
  const hex = [...console.matchAll(/^virtio-rng bytes ([0-9a-f]+)$/gm)].map((m) => m[1]).join('');
  expect(hex).toMatch(/^[0-9a-f]{128}$/);
  return hex;
}

describe.skipIf(!kvmAvailable)('PCI host bridge and virtio-rng on real KVM (probe guest driver)', () => {
  it('bus 0 shows the host bridge and 1af4:1044; random bytes arrive by MSI-X; notifications take no exit where KVM has ioeventfds', async () => {
    const rounds = 6;
    const g = await runRng(`bytes=64 rounds=${rounds}`);
    const slots = g.events.filter((e) => e.event === 'pci').map((e) => e.fields);
    expect(slots).toEqual([
      { slot: 0, vendor: 0x1b36, device: 0x0008, class: 0x060000 },
      { slot: 1, vendor: 0x1af4, device: 0x1044, class: 0x00ff00 },
    ]);
    const bars = g.events.filter((e) => e.event === 'pci_bar').map((e) => e.fields);
    expect(bars.map((b) => [b.bar, b.size])).toEqual([[0, 0x4000], [1, 0x1000]]);
    for (const b of bars) expect(b.address! % b.size!).toBe(0);

    const f = event(g.events, 'virtio_rng');
    expect(f).toMatchObject({ ok: 1, bytes: 64, rounds, total_bytes: 64 * rounds, irqs: rounds });
    // 64 bytes from a CSPRNG: ~56 distinct values expected; 40 or fewer has odds below 1e-12.
    expect(f.distinct).toBeGreaterThan(40);
    expect(g.console()).toMatch(/virtio-rng ok bytes=64 distinct=\d+ rounds=6 irqs=6/);
    randomHex(g.console());

    const c = g.counters!;
    expect(c.requests).toEqual([rounds]);
    expect(c.bytes).toEqual([64 * rounds]);
    expect(c.kicks).toBe(rounds);
    expect(c.interrupts).toBe(rounds);
    expect(c.status & STATUS.needsReset).toBe(0);
    // With ioeventfds KVM signals the I/O thread itself: not one notify reached userspace as an exit.
    expect(c.mmioNotifies).toBe(hostHasIoeventfd ? 0 : rounds);
  });

  it('the bytes differ from one run to the next', async () => {
    const a = randomHex((await runRng('bytes=64 rounds=1')).console());
    const b = randomHex((await runRng('bytes=64 rounds=1')).console());
    expect(a).not.toBe(b);
  });

  it('without ioeventfds every notification is an MMIO exit, served the same way', async () => {
    const rounds = 5;
    const g = await runRng(`bytes=32 rounds=${rounds}`, { noIoeventfd: true });
    expect(event(g.events, 'virtio_rng')).toMatchObject({ ok: 1, bytes: 32, rounds, irqs: rounds });
    expect(g.counters).toMatchObject({ mmioNotifies: rounds, kicks: rounds, interrupts: rounds, requests: [rounds] });
  });

  it('a device reset forgets the queue and its vector, and the device works again after a new set-up', async () => {
    const g = await runRng('bytes=64 rounds=2 reset=1');
    expect(event(g.events, 'virtio_rng_reset')).toMatchObject({ status: 0, queue_enable: 0, queue_msix: 0xffff, len: 64 });
    expect(g.counters!.resets).toBeGreaterThanOrEqual(3); // power-on, the driver's initial reset, the test's reset (+ re-init)
    expect(g.counters!.requests).toEqual([3]); // counters are the VMM's: a reset keeps them
  });

  for (const [kind, code, error] of [['loop', 1, QUEUE_ERROR.chainTooLong], ['size', 2, QUEUE_ERROR.badSize], ['oob', 3, QUEUE_ERROR.bufferOutsideRam]] as const) {
    it(`a hostile driver (${kind}) gets DEVICE_NEEDS_RESET, never a crash; after a reset the device serves again`, async () => {
      const g = await runRng(`bad=${kind}`);
      // A driver that had said DRIVER_OK hears of it by a configuration interrupt; one still setting up does not.
      expect(event(g.events, 'virtio_rng_bad')).toEqual({ kind: code, needs_reset: 1, config_irqs: kind === 'size' ? 0 : 1 });
      expect(event(g.events, 'virtio_rng_recovered')).toMatchObject({ ok: 1, len: 64, status: 15 });
      expect(g.counters).toMatchObject({ error: 0, lastError: error, needsResets: 1, requests: [1] }); // error: cleared by the reset
    });
  }

  it('an MSI-X entry that names no CPU loses that interrupt and nothing else: the VM runs on and the next request interrupts', async () => {
    const g = await runRng('bad=msi');
    expect(event(g.events, 'virtio_rng_bad')).toEqual({ kind: 4, used: 1, irq_lost: 1, status: 15 });
    expect(event(g.events, 'virtio_rng_recovered')).toMatchObject({ ok: 1, len: 64, status: 15 });
    expect(g.counters).toMatchObject({ requests: [2], interrupts: 2, needsResets: 0 });
  });

  it('stopping a VM while its I/O thread sleeps releases that thread, the eventfds and every other fd', async () => {
    const start = async () => {
      const { spec } = resolveMachine(validateConfig({ guest: 'probe', cpus: 1, memoryMiB: 64, append: 'scenario=echo', name: 'rng-stop', rng: true }), probeHost());
      const g = watch(await VirtualMachine.start(spec));
      await g.waitForConsole('probe> ');
      return g;
    };
    const settle = () => new Promise((r) => setTimeout(r, 300));
    // Warm up the process-wide pieces (worker pool, koffi) once.
    await (await start()).vm.stop();
    await settle();
    const fds = openFdCount();
    const threads = threadCount();
    for (let i = 0; i < 3; i++) {
      const g = await start();
      expect(threadCount()).toBeGreaterThan(threads); // its vCPU and I/O threads
      expect((await g.vm.stop()).kind).toBe('stopped');
    }
    await settle();
    expect(openFdCount()).toBe(fds);
    expect(threadCount()).toBe(threads);
  });

  it('without rng=on the bus holds only the host bridge', async () => {
    const g = await runRng('', { rng: false });
    expect(g.events.filter((e) => e.event === 'pci').map((e) => e.fields)).toEqual([{ slot: 0, vendor: 0x1b36, device: 0x0008, class: 0x060000 }]);
    expect(event(g.events, 'virtio_rng')).toMatchObject({ ok: 0, stage: 8 }); // no_device
    expect(g.counters).toBeUndefined();
  });
});

// The PCI bus as a guest's enumerator sees it, without KVM: configuration mechanism #1 on the
// board's real port bus (0xCF8/0xCFC), the host bridge, BAR sizing and moving (MMIO follows the
// BAR), the capability list, MSI-X masking and pending bits, and the virtio-pci transport's
// registers (feature negotiation, queue set-up, reset, ioeventfd re-assignment).
import { describe, expect, it } from 'vitest';
import { attachBoard, createDeviceState, slotBars, type BoardConfig } from '../../electron/vmm/devices/board.ts';
import { GuestRam } from '../../electron/vmm/devices/virtio/guest-ram.ts';
import { STATUS, VIRTIO_MSI_NO_VECTOR } from '../../electron/vmm/devices/virtio/virtio-pci-regs.ts';
import { getrandomIo } from '../../native/kvm/libc.ts';

const EVENT_FD = 77;

function board(config: BoardConfig = { virtio: [{ name: 'rng', eventFd: EVENT_FD }], ioeventfdLength: 0 }) {
  const sab = createDeviceState(config);
  const log = { msi: [] as [number, number][], eventFd: [] as number[], ioeventfd: [] as [number, number, number, boolean][] };
  const nop = () => {};
  const b = attachBoard(sab, {
    emitConsole: nop, emitAgent: nop, setIrq: nop, onPowerOff: nop, onDebugExit: nop, onReset: nop, entropy: getrandomIo,
    signalMsi: (a, d) => log.msi.push([a, d]),
    signalEventFd: (fd) => log.eventFd.push(fd),
    setIoeventfd: (address, length, fd, assign) => log.ioeventfd.push([address, length, fd, assign]),
  }, config);
  const cfgRead = (dev: number, reg: number, size = 4) => {
    b.pio.write(0xcf8, 4, 0x80000000 | (dev << 11) | (reg & 0xfc));
    return b.pio.read(0xcfc + (reg & 3), size);
  };
  const cfgWrite = (dev: number, reg: number, value: number, size = 4) => {
    b.pio.write(0xcf8, 4, 0x80000000 | (dev << 11) | (reg & 0xfc));
    b.pio.write(0xcfc + (reg & 3), size, value);
  };
  const data = new Uint8Array(8);
  const mmioRead = (addr: number, size: number) => {
    b.mmio.read(addr, data, size);
    let v = 0;
    for (let i = 0; i < Math.min(size, 4); i++) v |= data[i]! << (8 * i);
    return v >>> 0;
  };
  const mmioWrite = (addr: number, size: number, value: number) => {
    for (let i = 0; i < size; i++) data[i] = i < 4 ? (value >>> (8 * i)) & 0xff : 0;
    b.mmio.write(addr, data, size);
  };
  return { ...b, sab, log, cfgRead, cfgWrite, mmioRead, mmioWrite };
}

function caps(m: ReturnType<typeof board>, dev: number) {
  const out: { at: number; id: number; bytes: number[] }[] = [];
  for (let at = m.cfgRead(dev, 0x34, 1); at !== 0 && out.length < 48; at = m.cfgRead(dev, at + 1, 1)) {
    const len = m.cfgRead(dev, at, 1) === 0x09 ? m.cfgRead(dev, at + 2, 1) : 12;
    out.push({ at, id: m.cfgRead(dev, at, 1), bytes: Array.from({ length: len }, (_, i) => m.cfgRead(dev, at + i, 1)) });
  }
  return out;
}

const le32 = (b: number[], o: number) => (b[o]! | (b[o + 1]! << 8) | (b[o + 2]! << 16) | (b[o + 3]! << 24)) >>> 0;

describe('PCI configuration mechanism #1 and the host bridge', () => {
  it('CONFIG_ADDRESS takes 32-bit accesses only; reserved bits read 0', () => {
    const m = board();
    m.pio.write(0xcf8, 4, 0xffffffff);
    expect(m.pio.read(0xcf8, 4)).toBe(0x80fffffc);
    m.pio.write(0xcfb, 1, 0x01); // Linux's type-1 probe: must not land in CONFIG_ADDRESS
    expect(m.pio.read(0xcf8, 4)).toBe(0x80fffffc);
    expect(m.pio.read(0xcf8, 2)).toBe(0xffff);
    m.pio.write(0xcf8, 4, 0x80000000);
    expect(m.pio.read(0xcf8, 4)).toBe(0x80000000);
  });

  it('00:00.0 is the host bridge; empty slots, other buses and functions read all ones', () => {
    const m = board();
    expect(m.cfgRead(0, 0)).toBe((0x0008 << 16) | 0x1b36);
    expect(m.cfgRead(0, 8) >>> 8).toBe(0x060000);
    expect(m.cfgRead(0, 0x0e, 1)).toBe(0); // single-function type 0 header
    expect(m.cfgRead(2, 0)).toBe(0xffffffff);
    expect(m.cfgRead(31, 0, 2)).toBe(0xffff);
    m.pio.write(0xcf8, 4, 0x80010000); // bus 1
    expect(m.pio.read(0xcfc, 4)).toBe(0xffffffff);
    m.pio.write(0xcf8, 4, 0x80000100); // 00:00.1
    expect(m.pio.read(0xcfc, 4)).toBe(0xffffffff);
    m.pio.write(0xcf8, 4, 0x00000000); // enable bit clear
    expect(m.pio.read(0xcfc, 4)).toBe(0xffffffff);
    m.cfgWrite(0, 0, 0x12345678); // IDs are read-only
    expect(m.cfgRead(0, 0)).toBe((0x0008 << 16) | 0x1b36);
    m.cfgWrite(0, 0x0c, 0xffffffff); // cache line size and latency timer read back; header type and BIST do not change
    expect(m.cfgRead(0, 0x0c)).toBe(0x0000ffff);
    m.cfgWrite(0, 0x08, 0xffffffff); // revision and class: read-only
    expect(m.cfgRead(0, 0x08)).toBe(0x06000000);
  });

  it('byte and word accesses at 0xCFC+n see the selected register\'s bytes', () => {
    const m = board();
    expect(m.cfgRead(1, 0, 2)).toBe(0x1af4);
    expect(m.cfgRead(1, 2, 2)).toBe(0x1044);
    expect(m.cfgRead(1, 3, 1)).toBe(0x10);
    expect(m.cfgRead(1, 8, 1)).toBe(1); // revision 1: modern virtio
    expect(m.cfgRead(1, 0x2c)).toBe((0x1100 << 16) | 0x1af4);
    expect(m.cfgRead(1, 0x3d, 1)).toBe(0); // no INTx pin
  });

  it('BARs size by all ones, move, and MMIO follows them; decoding off answers nothing', () => {
    const m = board();
    const { regs, msix } = slotBars(1);
    expect(m.cfgRead(1, 0x10)).toBe(regs);
    expect(m.cfgRead(1, 0x14)).toBe(msix);
    m.cfgWrite(1, 0x10, 0xffffffff);
    expect(m.cfgRead(1, 0x10)).toBe((~(0x4000 - 1)) >>> 0);
    m.cfgWrite(1, 0x14, 0xffffffff);
    expect(m.cfgRead(1, 0x14)).toBe((~(0x1000 - 1)) >>> 0);
    m.cfgWrite(1, 0x18, 0xffffffff); // BAR2 not implemented
    expect(m.cfgRead(1, 0x18)).toBe(0);
    m.cfgWrite(1, 0x10, regs);
    m.cfgWrite(1, 0x14, msix);
    // Memory decoding is off at reset: the registers do not answer.
    expect(m.mmioRead(regs + 0x12, 2)).toBe(0xffff);
    m.cfgWrite(1, 4, 0x6, 2);
    expect(m.mmioRead(regs + 0x12, 2)).toBe(1); // num_queues
    m.cfgWrite(1, 0x10, 0xe8000000);
    expect(m.mmioRead(regs + 0x12, 2)).toBe(0xffff);
    expect(m.mmioRead(0xe8000000 + 0x12, 2)).toBe(1);
  });

  it('capabilities: MSI-X (2 vectors in BAR 1) and the virtio common, ISR and notify structures in BAR 0', () => {
    const m = board();
    expect(m.cfgRead(1, 6, 2) & 0x10).toBe(0x10);
    const list = caps(m, 1);
    expect(list.map((c) => c.id)).toEqual([0x11, 0x09, 0x09, 0x09]);
    const msix = list[0]!.bytes;
    expect(msix[2]! | (msix[3]! << 8)).toBe(1); // table size - 1
    expect(le32(msix, 4)).toBe(0x000 | 1);
    expect(le32(msix, 8)).toBe(0x800 | 1);
    const virtio = list.slice(1).map((c) => ({ type: c.bytes[3], bar: c.bytes[4], offset: le32(c.bytes, 8), length: le32(c.bytes, 12), len: c.bytes[2] }));
    expect(virtio).toEqual([
      { type: 1, bar: 0, offset: 0x0000, length: 0x38, len: 16 },
      { type: 3, bar: 0, offset: 0x1000, length: 1, len: 16 },
      { type: 2, bar: 0, offset: 0x3000, length: 4, len: 20 },
    ]);
    expect(le32(list[3]!.bytes, 16)).toBe(4); // notify_off_multiplier
    for (const c of list) expect(c.at % 4).toBe(0);
  });
});

describe('MSI-X', () => {
  function msixReady() {
    const m = board();
    const { msix } = slotBars(1);
    m.cfgWrite(1, 4, 0x6, 2);
    return { m, msix };
  }

  it('every vector is masked at reset; a masked vector is held pending and sent when unmasked', () => {
    const { m, msix } = msixReady();
    expect(m.mmioRead(msix + 12, 4)).toBe(1);
    m.mmioWrite(msix + 0, 4, 0xfee00000);
    m.mmioWrite(msix + 8, 4, 0x60);
    m.cfgWrite(1, 0x42, 0x8000, 2); // enable
    const rng = m.pci.virtio[0]!.device;
    m.pci.lock.withLock(() => rng.msix.raise(0));
    expect(m.log.msi).toEqual([]);
    expect(m.mmioRead(msix + 0x800, 4)).toBe(1); // pending bit
    m.mmioWrite(msix + 12, 4, 0); // unmask
    expect(m.log.msi).toEqual([[0xfee00000, 0x60]]);
    expect(m.mmioRead(msix + 0x800, 4)).toBe(0);
  });

  it('the function mask holds every vector; clearing it sends what was pending; disabled MSI-X sends nothing', () => {
    const { m, msix } = msixReady();
    m.mmioWrite(msix + 16, 4, 0xfee01000);
    m.mmioWrite(msix + 24, 4, 0x61);
    m.mmioWrite(msix + 28, 4, 0);
    const rng = m.pci.virtio[0]!.device;
    m.pci.lock.withLock(() => rng.msix.raise(1)); // MSI-X disabled: dropped, not pending
    expect(m.mmioRead(msix + 0x800, 4)).toBe(0);
    m.cfgWrite(1, 0x42, 0xc000, 2); // enable + function mask
    m.pci.lock.withLock(() => rng.msix.raise(1));
    expect(m.log.msi).toEqual([]);
    expect(m.mmioRead(msix + 0x800, 4)).toBe(2);
    m.cfgWrite(1, 0x42, 0x8000, 2);
    expect(m.log.msi).toEqual([[0xfee01000, 0x61]]);
  });

  it('table accesses that are not 4/8-byte aligned dwords/qwords are ignored', () => {
    const { m, msix } = msixReady();
    m.mmioWrite(msix + 1, 2, 0xffff);
    m.mmioWrite(msix + 2, 4, 0xffffffff);
    expect(m.mmioRead(msix, 4)).toBe(0);
    expect(m.mmioRead(msix + 0xfff, 1)).toBe(0);
  });
});

describe('virtio-pci transport registers', () => {
  function ready() {
    const m = board();
    const { regs } = slotBars(1);
    m.cfgWrite(1, 4, 0x6, 2);
    const st = (v: number) => m.mmioWrite(regs + 0x14, 1, v);
    return { m, regs, st, status: () => m.mmioRead(regs + 0x14, 1) };
  }

  it('offers VERSION_1 (bit 32) and nothing else; FEATURES_OK only for a subset with VERSION_1', () => {
    const { m, regs, st, status } = ready();
    m.mmioWrite(regs, 4, 0);
    expect(m.mmioRead(regs + 4, 4)).toBe(0);
    m.mmioWrite(regs, 4, 1);
    expect(m.mmioRead(regs + 4, 4)).toBe(1);
    st(STATUS.acknowledge | STATUS.driver);
    st(STATUS.acknowledge | STATUS.driver | STATUS.featuresOk); // no VERSION_1 chosen
    expect(status() & STATUS.featuresOk).toBe(0);
    m.mmioWrite(regs + 8, 4, 1);
    m.mmioWrite(regs + 0xc, 4, 1 | 2); // VERSION_1 and an unoffered bit 33
    st(STATUS.acknowledge | STATUS.driver | STATUS.featuresOk);
    expect(status() & STATUS.featuresOk).toBe(0);
    m.mmioWrite(regs + 0xc, 4, 1);
    st(STATUS.acknowledge | STATUS.driver | STATUS.featuresOk);
    expect(status() & STATUS.featuresOk).toBe(STATUS.featuresOk);
    m.mmioWrite(regs + 0xc, 4, 3); // too late: ignored after FEATURES_OK
    expect(m.mmioRead(regs + 0xc, 4)).toBe(1);
  });

  it('queue registers: max size 256, vectors beyond the table read NO_VECTOR, absent queues read 0; reset forgets all', () => {
    const { m, regs, st, status } = ready();
    expect(m.mmioRead(regs + 0x18, 2)).toBe(256);
    m.mmioWrite(regs + 0x1a, 2, 5);
    expect(m.mmioRead(regs + 0x1a, 2)).toBe(VIRTIO_MSI_NO_VECTOR);
    m.mmioWrite(regs + 0x1a, 2, 0);
    expect(m.mmioRead(regs + 0x1a, 2)).toBe(0);
    m.mmioWrite(regs + 0x20, 4, 0x10000);
    expect(m.mmioRead(regs + 0x20, 4)).toBe(0x10000);
    m.mmioWrite(regs + 0x18, 2, 16);
    m.mmioWrite(regs + 0x1c, 2, 1);
    expect(m.mmioRead(regs + 0x1c, 2)).toBe(1);
    m.mmioWrite(regs + 0x20, 4, 0x20000); // an enabled queue's addresses are fixed
    expect(m.mmioRead(regs + 0x20, 4)).toBe(0x10000);
    m.mmioWrite(regs + 0x16, 2, 3); // no queue 3
    expect(m.mmioRead(regs + 0x18, 2)).toBe(0);
    expect(m.mmioRead(regs + 0x1a, 2)).toBe(VIRTIO_MSI_NO_VECTOR);
    st(STATUS.acknowledge);
    const gen = m.mmioRead(regs + 0x15, 1);
    st(0);
    expect(status()).toBe(0);
    expect(m.mmioRead(regs + 0x15, 1)).toBe((gen + 1) & 0xff);
    m.mmioWrite(regs + 0x16, 2, 0);
    expect([m.mmioRead(regs + 0x1c, 2), m.mmioRead(regs + 0x20, 4), m.mmioRead(regs + 0x1a, 2), m.mmioRead(regs + 0x18, 2)])
      .toEqual([0, 0, VIRTIO_MSI_NO_VECTOR, 256]);
  });

  it('a queue size that is not a power of two makes the device need a reset', () => {
    const { m, regs, st, status } = ready();
    st(STATUS.acknowledge | STATUS.driver);
    m.mmioWrite(regs + 0x18, 2, 6);
    m.mmioWrite(regs + 0x1c, 2, 1);
    expect(status() & STATUS.needsReset).toBe(STATUS.needsReset);
    expect(m.mmioRead(regs + 0x1c, 2)).toBe(0);
    st(STATUS.acknowledge | STATUS.driver | STATUS.driverOk); // the driver cannot clear it
    expect(status() & STATUS.needsReset).toBe(STATUS.needsReset);
    st(0);
    expect(status()).toBe(0);
  });

  it('a notify taken as an MMIO exit wakes the I/O thread through the device\'s eventfd; ISR clears on read', () => {
    const { m, regs } = ready();
    m.mmioWrite(regs + 0x3000, 2, 0);
    expect(m.log.eventFd).toEqual([EVENT_FD]);
    expect(m.pci.virtio[0]!.device.counters().mmioNotifies).toBe(1);
    m.mmioWrite(regs + 0x3004, 2, 0); // past the one queue's notify address: nothing
    expect(m.log.eventFd).toEqual([EVENT_FD]);
    expect(m.mmioRead(regs + 0x1000, 1)).toBe(0);
  });

  it('ioeventfds follow BAR 0: assigned when decoding turns on, moved with the BAR, removed when decoding turns off', () => {
    const m = board();
    const { regs } = slotBars(1);
    expect(m.log.ioeventfd).toEqual([]);
    m.cfgWrite(1, 4, 0x6, 2);
    expect(m.log.ioeventfd).toEqual([[regs + 0x3000, 0, EVENT_FD, true]]);
    m.cfgWrite(1, 0x10, 0xe4000000);
    expect(m.log.ioeventfd.slice(1)).toEqual([[regs + 0x3000, 0, EVENT_FD, false], [0xe4003000, 0, EVENT_FD, true]]);
    m.cfgWrite(1, 4, 0, 2);
    expect(m.log.ioeventfd.slice(3)).toEqual([[0xe4003000, 0, EVENT_FD, false]]);
    // Sizing with decoding off assigns nothing.
    m.cfgWrite(1, 0x10, 0xffffffff);
    m.cfgWrite(1, 0x10, regs);
    expect(m.log.ioeventfd.length).toBe(4);
  });

  it('without KVM ioeventfds none are assigned', () => {
    const m = board({ virtio: [{ name: 'rng', eventFd: EVENT_FD }] });
    m.cfgWrite(1, 4, 0x6, 2);
    expect(m.log.ioeventfd).toEqual([]);
  });

  it('serves a request end to end: random bytes in the buffer, the used ring, one MSI to the queue\'s vector', () => {
    const { m, regs, st, status } = ready();
    const { msix } = slotBars(1);
    const ramBytes = new Uint8Array(new SharedArrayBuffer(1 << 20));
    const ram = new GuestRam(ramBytes, [{ guestPhysAddr: 0, size: ramBytes.length, offset: 0 }]);
    const dv = new DataView(ramBytes.buffer);
    const DESC = 0x1000, AVAIL = 0x2000, USED = 0x3000, BUF = 0x8000;
    m.mmioWrite(msix, 4, 0xfee00000);
    m.mmioWrite(msix + 8, 4, 0x60);
    m.mmioWrite(msix + 12, 4, 0);
    m.cfgWrite(1, 0x42, 0x8000, 2);
    st(STATUS.acknowledge | STATUS.driver);
    m.mmioWrite(regs + 8, 4, 1);
    m.mmioWrite(regs + 0xc, 4, 1);
    st(STATUS.acknowledge | STATUS.driver | STATUS.featuresOk);
    m.mmioWrite(regs + 0x18, 2, 8);
    m.mmioWrite(regs + 0x1a, 2, 0);
    m.mmioWrite(regs + 0x20, 4, DESC);
    m.mmioWrite(regs + 0x28, 4, AVAIL);
    m.mmioWrite(regs + 0x30, 4, USED);
    m.mmioWrite(regs + 0x1c, 2, 1);
    st(STATUS.acknowledge | STATUS.driver | STATUS.featuresOk | STATUS.driverOk);
    expect(status()).toBe(15);
    dv.setBigUint64(DESC, BigInt(BUF), true);
    dv.setUint32(DESC + 8, 256, true);
    dv.setUint16(DESC + 12, 2, true); // WRITE
    dv.setUint16(AVAIL + 4, 0, true);
    dv.setUint16(AVAIL + 2, 1, true);
    const rng = m.pci.virtio[0]!.device;
    m.pci.lock.withLock(() => rng.serviceQueues(ram));
    expect(dv.getUint16(USED + 2, true)).toBe(1);
    expect([dv.getUint32(USED + 4, true), dv.getUint32(USED + 8, true)]).toEqual([0, 256]);
    expect(new Set(ramBytes.subarray(BUF, BUF + 256)).size).toBeGreaterThan(100);
    expect(ramBytes.subarray(BUF + 256, BUF + 512).every((b) => b === 0)).toBe(true);
    expect(m.log.msi).toEqual([[0xfee00000, 0x60]]);
    expect(m.mmioRead(regs + 0x1000, 1)).toBe(1);
    // Nothing new available: served again, nothing done, no interrupt.
    m.pci.lock.withLock(() => rng.serviceQueues(ram));
    expect(m.log.msi.length).toBe(1);
    // VIRTQ_AVAIL_F_NO_INTERRUPT: served, not interrupted.
    dv.setUint16(AVAIL, 1, true);
    dv.setUint16(AVAIL + 6, 0, true);
    dv.setUint16(AVAIL + 2, 2, true);
    m.pci.lock.withLock(() => rng.serviceQueues(ram));
    expect(dv.getUint16(USED + 2, true)).toBe(2);
    expect(m.log.msi.length).toBe(1);
    expect(rng.counters()).toMatchObject({ requests: [2], bytes: [512], interrupts: 1 });
  });
});

// virtio-net without KVM: the virtio_net_hdr on transmit and receive chains a hostile driver
// builds (headers split over descriptors, chains too short, too long, writable where they
// should not be), and the back end on the real transport and board — a driver programs the
// device through its registers, a link of the test's (frames in a list, nothing mocked of the
// device) stands where libslirp sits: frames each way, one interrupt per batch, a backlog for a
// guest without receive buffers and drops counted past it.
import { describe, expect, it } from 'vitest';
import { attachBoard, createDeviceState, slotBars, type BoardConfig } from '../../electron/vmm/devices/board.ts';
import { GuestRam } from '../../electron/vmm/devices/virtio/guest-ram.ts';
import { Chain, QUEUE_ERROR } from '../../electron/vmm/devices/virtio/virtqueue.ts';
import {
  MAX_FRAME_BYTES, NET_HDR_BYTES, RX_BACKLOG_FRAMES, VIRTIO_NET_F_MAC, VIRTIO_NET_F_STATUS, VirtioNetBackEnd, netConfigBytes, readTxFrame, writeRxFrame, type NetLink,
} from '../../electron/vmm/devices/virtio/virtio-net.ts';
import { STATUS } from '../../electron/vmm/devices/virtio/virtio-pci-regs.ts';
import { PollSet } from '../../native/kvm/poll-set.ts';

const RAM_BYTES = 1 << 20;
function ram(): GuestRam {
  return new GuestRam(new Uint8Array(new SharedArrayBuffer(RAM_BYTES)), [{ guestPhysAddr: 0, size: RAM_BYTES, offset: 0 }]);
}

/** A chain over RAM offsets: [offset, length, writable]. */
function chain(parts: [number, number, boolean][]): Chain {
  const c = new Chain(64);
  c.count = parts.length;
  parts.forEach(([o, l, w], i) => { c.offset[i] = o; c.length[i] = l; c.writable[i] = w ? 1 : 0; });
  return c;
}

const frame = (n: number, seed = 1) => Uint8Array.from({ length: n }, (_, i) => (i * 7 + seed) & 0xff);

describe('virtio_net_hdr on hostile chains', () => {
  it('transmit: the frame is what follows the 12-byte header, however the descriptors split them', () => {
    const r = ram();
    const f = frame(60);
    const hdr = new Uint8Array(NET_HDR_BYTES).fill(0xee); // garbage in the header is ignored
    // header in 1 + 11 bytes, the frame in 3 + 57, with a writable buffer and an empty one in between
    r.bytes.set(hdr.subarray(0, 1), 0x100);
    r.bytes.set(hdr.subarray(1), 0x200);
    r.bytes.set(f.subarray(0, 3), 0x300);
    r.bytes.set(f.subarray(3), 0x400);
    const out = new Uint8Array(MAX_FRAME_BYTES);
    const c = chain([[0x100, 1, false], [0x200, 11, false], [0x280, 0, false], [0x300, 3, false], [0x400, 57, false], [0x500, 100, true]]);
    expect(readTxFrame(c, r, out)).toBe(60);
    expect(out.subarray(0, 60)).toEqual(f);
    // header and frame in one buffer, as Linux sends them without any_layout tricks
    r.bytes.set(f, 0x600 + NET_HDR_BYTES);
    expect(readTxFrame(chain([[0x600, NET_HDR_BYTES + 60, false]]), r, out)).toBe(60);
    expect(out.subarray(0, 60)).toEqual(f);
  });

  it('transmit: a chain without a whole header, without an Ethernet header, only writable, or too long is refused', () => {
    const r = ram();
    const out = new Uint8Array(MAX_FRAME_BYTES);
    expect(readTxFrame(chain([]), r, out)).toBe(-1);
    expect(readTxFrame(chain([[0, 11, false]]), r, out)).toBe(-1);
    expect(readTxFrame(chain([[0, NET_HDR_BYTES, false]]), r, out)).toBe(-1);
    expect(readTxFrame(chain([[0, NET_HDR_BYTES + 13, false]]), r, out)).toBe(-1);
    expect(readTxFrame(chain([[0, NET_HDR_BYTES + 14, false]]), r, out)).toBe(14);
    expect(readTxFrame(chain([[0, 2000, true]]), r, out)).toBe(-1);
    expect(readTxFrame(chain([[0, NET_HDR_BYTES + MAX_FRAME_BYTES, false]]), r, out)).toBe(MAX_FRAME_BYTES);
    expect(readTxFrame(chain([[0, NET_HDR_BYTES + MAX_FRAME_BYTES, false], [0, 1, false]]), r, out)).toBe(-1);
    // A small output buffer bounds the copy too.
    expect(readTxFrame(chain([[0, NET_HDR_BYTES + 100, false]]), r, new Uint8Array(99))).toBe(-1);
  });

  it('receive: header (num_buffers 1) then frame, scattered over the writable buffers, readable ones skipped', () => {
    const r = ram();
    r.bytes.fill(0xaa, 0, 0x2000);
    const f = frame(100, 3);
    const c = chain([[0x000, 8, false], [0x100, 5, true], [0x200, 4, true], [0x300, 0, true], [0x400, 200, true]]);
    expect(writeRxFrame(c, r, f)).toBe(NET_HDR_BYTES + 100);
    const hdr = [...r.bytes.subarray(0x100, 0x105), ...r.bytes.subarray(0x200, 0x204), ...r.bytes.subarray(0x400, 0x403)];
    expect(hdr).toEqual([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0]);
    expect(r.bytes.subarray(0x403, 0x403 + 100)).toEqual(f);
    expect(r.bytes[0x403 + 100]).toBe(0xaa); // nothing past the frame
    expect(r.bytes[0]).toBe(0xaa); // the readable buffer is not written
  });

  it('receive: a chain too small for header and frame takes nothing, and nothing is written', () => {
    const r = ram();
    r.bytes.fill(0x55, 0, 0x1000);
    expect(writeRxFrame(chain([[0x100, NET_HDR_BYTES + 99, true]]), r, frame(100))).toBe(-1);
    expect(writeRxFrame(chain([[0x100, 2000, false]]), r, frame(100))).toBe(-1);
    expect(r.bytes.subarray(0, 0x1000).every((b) => b === 0x55)).toBe(true);
  });
});

// ---- the back end on the real board and transport, driven through the registers ------------

const EVENT_FD = 91;
const SLOT = 3;
const MAC = '02:11:22:33:44:55';
const QSIZE = 16;
// Ring and buffer addresses in guest RAM.
const RX = { desc: 0x1000, avail: 0x2000, used: 0x3000 };
const TX = { desc: 0x4000, avail: 0x5000, used: 0x6000 };
const RX_BUFS = 0x10000;
const TX_BUF = 0x40000;

function netBoard() {
  const config: BoardConfig = { virtio: [{ name: 'net', eventFd: EVENT_FD, deviceConfig: netConfigBytes(MAC) }] };
  const sab = createDeviceState(config);
  const msi: [number, number][] = [];
  const nop = () => {};
  const b = attachBoard(sab, {
    emitConsole: nop, emitAgent: nop, setIrq: nop, onPowerOff: nop, onDebugExit: nop, onReset: nop,
    signalMsi: (a, d) => msi.push([a, d]), signalEventFd: nop, setIoeventfd: nop,
  }, config);
  const data = new Uint8Array(8);
  const { regs, msix } = slotBars(SLOT);
  const rd = (addr: number, size: number) => {
    b.mmio.read(addr, data, size);
    let v = 0;
    for (let i = 0; i < size; i++) v |= data[i]! << (8 * i);
    return v >>> 0;
  };
  const wr = (addr: number, size: number, value: number) => {
    for (let i = 0; i < size; i++) data[i] = (value >>> (8 * i)) & 0xff;
    b.mmio.write(addr, data, size);
  };
  const cfg = (reg: number, value: number, size: number) => {
    b.pio.write(0xcf8, 4, 0x80000000 | (SLOT << 11) | (reg & 0xfc));
    b.pio.write(0xcfc + (reg & 3), size, value);
  };
  const cfgRead = (reg: number, size: number) => {
    b.pio.write(0xcf8, 4, 0x80000000 | (SLOT << 11) | (reg & 0xfc));
    return b.pio.read(0xcfc + (reg & 3), size);
  };
  const guest = ram();
  const device = b.pci.virtio[0]!.device;
  return { b, msi, regs, msix, rd, wr, cfg, cfgRead, guest, device };
}

/** The driver's side: what Linux's virtio_net does at probe, reduced to what the device sees. */
function driver(m: ReturnType<typeof netBoard>) {
  const { regs, rd, wr, cfg, cfgRead, guest } = m;
  cfg(4, 0x6, 2); // memory + bus master
  // MSI-X: vector i -> data 0x40 + i, unmasked, enabled.
  let cap = cfgRead(0x34, 1);
  while (cap && cfgRead(cap, 1) !== 0x11) cap = cfgRead(cap + 1, 1);
  for (let v = 0; v < 3; v++) {
    wr(m.msix + 16 * v, 4, 0xfee00000);
    wr(m.msix + 16 * v + 8, 4, 0x40 + v);
    wr(m.msix + 16 * v + 12, 4, 0);
  }
  cfg(cap + 2, 0x8000, 2);
  const st = (v: number) => wr(regs + 0x14, 1, v);
  st(STATUS.acknowledge | STATUS.driver);
  wr(regs + 0x00, 4, 0);
  const offered = rd(regs + 0x04, 4);
  wr(regs + 0x08, 4, 0);
  wr(regs + 0x0c, 4, offered);
  wr(regs + 0x08, 4, 1);
  wr(regs + 0x0c, 4, 1);
  st(STATUS.acknowledge | STATUS.driver | STATUS.featuresOk);
  for (const [q, r] of [[0, RX], [1, TX]] as const) {
    wr(regs + 0x16, 2, q);
    wr(regs + 0x18, 2, QSIZE);
    wr(regs + 0x1a, 2, q);
    wr(regs + 0x20, 4, r.desc);
    wr(regs + 0x28, 4, r.avail);
    wr(regs + 0x30, 4, r.used);
    wr(regs + 0x1c, 2, 1);
  }
  st(STATUS.acknowledge | STATUS.driver | STATUS.featuresOk | STATUS.driverOk);
  const v = guest.view;
  let rxAvail = 0;
  let txAvail = 0;
  return {
    offered,
    status: () => rd(regs + 0x14, 1),
    /** Posts `n` receive buffers of `size` bytes each (descriptors taken round the ring). */
    postRx(n: number, size = 2048) {
      for (let i = 0; i < n; i++) {
        const d = rxAvail % QSIZE;
        v.setBigUint64(RX.desc + 16 * d, BigInt(RX_BUFS + 4096 * d), true);
        v.setUint32(RX.desc + 16 * d + 8, size, true);
        v.setUint16(RX.desc + 16 * d + 12, 2, true);
        v.setUint16(RX.avail + 4 + 2 * (rxAvail % QSIZE), d, true);
        rxAvail++;
      }
      v.setUint16(RX.avail + 2, rxAvail & 0xffff, true);
    },
    /** Queues one transmit chain: header + frame in one readable buffer (or raw descriptors). */
    postTx(bytes: Uint8Array, len = bytes.length) {
      guest.bytes.set(bytes, TX_BUF);
      v.setBigUint64(TX.desc, BigInt(TX_BUF), true);
      v.setUint32(TX.desc + 8, len, true);
      v.setUint16(TX.desc + 12, 0, true);
      v.setUint16(TX.avail + 4 + 2 * (txAvail % QSIZE), 0, true);
      txAvail++;
      v.setUint16(TX.avail + 2, txAvail & 0xffff, true);
    },
    rxUsed: () => v.getUint16(RX.used + 2, true),
    rxUsedElem: (i: number) => ({ id: v.getUint32(RX.used + 4 + 8 * (i % QSIZE), true), len: v.getUint32(RX.used + 8 + 8 * (i % QSIZE), true) }),
    txUsed: () => v.getUint16(TX.used + 2, true),
  };
}

/** The link of the test: frames sent are kept; `deliver` hands frames to the device as libslirp would. */
function testLink() {
  const sent: Uint8Array[] = [];
  let receive: (f: Uint8Array) => void = () => {};
  const link: NetLink = { send: (f) => { sent.push(f); return true; }, fillPoll: () => -1, afterPoll: () => {}, close: () => {} };
  return { sent, link, open: (r: (f: Uint8Array) => void) => { receive = r; return link; }, deliver: (f: Uint8Array) => receive(f) };
}

/** What the I/O thread does on a notification of the device (io-worker.ts), without the thread. */
function kick(m: ReturnType<typeof netBoard>, be: VirtioNetBackEnd) {
  m.b.pci.lock.lock();
  try {
    m.device.serviceQueues(m.guest, 1, be);
  } finally {
    m.b.pci.lock.unlock();
  }
  be.afterKick();
}

describe('the virtio-net back end on the transport', () => {
  it('offers MAC, STATUS and VERSION_1; the guest reads the MAC and link up from the device configuration', () => {
    const m = netBoard();
    const d = driver(m);
    expect(d.offered).toBe(((1 << VIRTIO_NET_F_MAC) | (1 << VIRTIO_NET_F_STATUS)) >>> 0);
    expect(d.status() & STATUS.featuresOk).toBe(STATUS.featuresOk);
    const cfgAt = m.regs + 0x2000;
    expect(Array.from({ length: 6 }, (_, i) => m.rd(cfgAt + i, 1).toString(16).padStart(2, '0')).join(':')).toBe(MAC);
    expect(m.rd(cfgAt + 6, 2)).toBe(1);
    expect(m.rd(m.regs + 0x12, 2)).toBe(2); // rx and tx, no control queue
  });

  it('a transmitted frame reaches the link without its header; a received one lands behind a header with one interrupt', () => {
    const m = netBoard();
    const d = driver(m);
    const t = testLink();
    const be = new VirtioNetBackEnd({ device: m.device, ram: m.guest, lock: m.b.pci.lock }, t.open);
    const f = frame(60);
    d.postTx(Uint8Array.from([...new Uint8Array(NET_HDR_BYTES), ...f]));
    d.postRx(4);
    kick(m, be);
    expect(t.sent).toEqual([f]);
    expect(d.txUsed()).toBe(1);
    // The frame's bytes as the device took them (header included, as received bytes are): telemetry's tx_bytes.
    expect(m.device.counters()).toMatchObject({ requests: [0, 1], drops: [0, 0], readBytes: [0, NET_HDR_BYTES + 60] });
    const interruptsBefore = m.device.counters().interrupts;
    const answer = frame(90, 5);
    t.deliver(answer);
    t.deliver(frame(70, 6));
    be.afterPoll(new PollSet([]), true);
    expect(d.rxUsed()).toBe(2);
    expect(d.rxUsedElem(0)).toEqual({ id: 0, len: NET_HDR_BYTES + 90 });
    expect(m.guest.bytes.subarray(RX_BUFS + NET_HDR_BYTES, RX_BUFS + NET_HDR_BYTES + 90)).toEqual(answer);
    expect(m.guest.bytes[RX_BUFS + 10]).toBe(1); // num_buffers
    expect(m.device.counters().interrupts - interruptsBefore).toBe(1); // one MSI for the batch
    expect(m.msi.at(-1)).toEqual([0xfee00000, 0x40]); // the receive queue's vector
    expect(m.device.counters()).toMatchObject({ requests: [2, 1], bytes: [2 * NET_HDR_BYTES + 160, 0] });
  });

  it('a guest without receive buffers: frames wait in the backlog, those past it are dropped and counted; new buffers take the backlog', () => {
    const m = netBoard();
    const d = driver(m);
    const t = testLink();
    const be = new VirtioNetBackEnd({ device: m.device, ram: m.guest, lock: m.b.pci.lock }, t.open);
    for (let i = 0; i < RX_BACKLOG_FRAMES + 10; i++) t.deliver(frame(64, i));
    be.afterPoll(new PollSet([]), true);
    expect(d.rxUsed()).toBe(0);
    expect(m.device.counters().drops).toEqual([10, 0]);
    d.postRx(QSIZE);
    kick(m, be); // the receive queue's notification
    expect(d.rxUsed()).toBe(QSIZE);
    // the first frame kept is the first one delivered (seed 0)
    expect(m.guest.bytes.subarray(RX_BUFS + NET_HDR_BYTES, RX_BUFS + NET_HDR_BYTES + 64)).toEqual(frame(64, 0));
  });

  it('paused (afterPoll not serving): frames for the guest wait in the backlog with buffers posted, no ring written, no interrupt; past the backlog dropped and counted; the resume delivers them in order', () => {
    const m = netBoard();
    const d = driver(m);
    const t = testLink();
    let polled = 0;
    t.link.afterPoll = () => { polled++; };
    const be = new VirtioNetBackEnd({ device: m.device, ram: m.guest, lock: m.b.pci.lock }, t.open);
    d.postRx(QSIZE);
    const before = m.device.counters();
    for (let i = 0; i < RX_BACKLOG_FRAMES + 3; i++) t.deliver(frame(64, i));
    be.afterPoll(new PollSet([]), false);
    be.afterPoll(new PollSet([]), false);
    expect(polled).toBe(2); // the link runs on (libslirp's sockets and timers)
    expect(d.rxUsed()).toBe(0);
    expect(m.device.counters()).toMatchObject({ requests: before.requests, interrupts: before.interrupts, drops: [3, 0] });
    be.afterPoll(new PollSet([]), true);
    expect(d.rxUsed()).toBe(QSIZE);
    expect(m.guest.bytes.subarray(RX_BUFS + NET_HDR_BYTES, RX_BUFS + NET_HDR_BYTES + 64)).toEqual(frame(64, 0));
    expect(m.device.counters().interrupts - before.interrupts).toBe(1);
  });

  it('a frame too large for the chain is dropped, not truncated; a hostile transmit chain is dropped and still given back', () => {
    const m = netBoard();
    const d = driver(m);
    const t = testLink();
    const be = new VirtioNetBackEnd({ device: m.device, ram: m.guest, lock: m.b.pci.lock }, t.open);
    d.postRx(1, 100);
    t.deliver(frame(200));
    t.deliver(frame(50));
    be.afterPoll(new PollSet([]), true);
    expect(d.rxUsed()).toBe(1);
    expect(d.rxUsedElem(0).len).toBe(NET_HDR_BYTES + 50);
    expect(m.device.counters().drops[0]).toBe(1);
    d.postTx(new Uint8Array(8)); // shorter than its own header
    kick(m, be);
    expect(t.sent).toEqual([]);
    expect(d.txUsed()).toBe(1);
    expect(m.device.counters().drops[1]).toBe(1);
    expect(m.device.counters().readBytes[1]).toBe(0); // a dropped frame moved no bytes
    expect(d.status() & STATUS.needsReset).toBe(0);
  });

  it('a receive ring with a descriptor loop marks the device DEVICE_NEEDS_RESET when a frame comes; the back end goes on', () => {
    const m = netBoard();
    const d = driver(m);
    const t = testLink();
    const be = new VirtioNetBackEnd({ device: m.device, ram: m.guest, lock: m.b.pci.lock }, t.open);
    d.postRx(1);
    const v = m.guest.view;
    v.setUint16(RX.desc + 12, 2 | 1, true); // WRITE | NEXT
    v.setUint16(RX.desc + 14, 0, true); // -> itself
    t.deliver(frame(64));
    expect(() => be.afterPoll(new PollSet([]), true)).not.toThrow();
    expect(d.status() & STATUS.needsReset).toBe(STATUS.needsReset);
    expect(m.device.counters().lastError).toBe(QUEUE_ERROR.chainTooLong);
    expect(d.rxUsed()).toBe(0);
    t.deliver(frame(64)); // more frames for a broken device: nothing written, nothing thrown
    expect(() => be.afterPoll(new PollSet([]), true)).not.toThrow();
    expect(d.rxUsed()).toBe(0);
  });

  it('after a device reset nothing is delivered until the driver is back', () => {
    const m = netBoard();
    const d = driver(m);
    const t = testLink();
    const be = new VirtioNetBackEnd({ device: m.device, ram: m.guest, lock: m.b.pci.lock }, t.open);
    d.postRx(2);
    m.wr(m.regs + 0x14, 1, 0); // reset
    t.deliver(frame(64));
    be.afterPoll(new PollSet([]), true);
    expect(d.rxUsed()).toBe(0);
  });
});

// virtio-blk's file I/O runs with the bus lock released (a flush must not hold up the vCPUs'
// UARTs), and a reset waits for a request in flight, as QEMU drains its requests: nothing of it
// lands after the reset. Real threads: this thread serves the queue as the I/O thread does
// (serviceQueues with the bus lock), a worker resets the device by MMIO as a vCPU would, and the
// pread of a real image file is held until the worker is inside its reset.
import { closeSync, mkdtempSync, openSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Worker } from 'node:worker_threads';
import { afterAll, describe, expect, it } from 'vitest';
import { addressOf, libc } from '../../native/kvm/libc.ts';
import { attachBoard, createDeviceState, slotBars, DISK_SLOT_BASE, DEVICE_LAYOUT, type BoardConfig } from '../../electron/vmm/devices/board.ts';
import { GuestRam } from '../../electron/vmm/devices/virtio/guest-ram.ts';
import { STATUS } from '../../electron/vmm/devices/virtio/virtio-pci-regs.ts';
import type { BlkFileIo } from '../../electron/vmm/devices/virtio/virtio-blk.ts';

const dir = mkdtempSync(join(tmpdir(), 'unhalt-blk-unlocked-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const RAM = 0x10000;

/** A running disk (DRIVER_OK, one queue at 0x1000/0x2000/0x3000) over `image`, served by this thread. */
function setUp(image: string, io: BlkFileIo) {
  const fd = openSync(image, 'r+');
  const board: BoardConfig = { virtio: [{ name: 'blk0', eventFd: 9, disk: { fd, sizeBytes: 65536, readonly: false, discard: false, serial: 'u' } }] };
  const sab = createDeviceState(board);
  const nop = () => {};
  const b = attachBoard(sab, {
    emitConsole: nop, emitAgent: nop, setIrq: nop, onPowerOff: nop, onDebugExit: nop, onReset: nop, signalMsi: nop, signalEventFd: nop, setIoeventfd: nop, blkFileIo: io,
  }, board);
  const { regs } = slotBars(DISK_SLOT_BASE);
  const data = new Uint8Array(8);
  const w = (addr: number, size: number, v: number) => { for (let i = 0; i < size; i++) data[i] = (v >>> (8 * i)) & 0xff; b.mmio.write(addr, data, size); };
  const r = (addr: number) => { b.mmio.read(addr, data, 1); return data[0]!; };
  b.pio.write(0xcf8, 4, 0x80000000 | (DISK_SLOT_BASE << 11) | 0x04);
  b.pio.write(0xcfc, 2, 0x6);
  w(regs + 0x14, 1, STATUS.acknowledge | STATUS.driver);
  w(regs + 8, 4, 1);
  w(regs + 0xc, 4, 1);
  w(regs + 0x14, 1, STATUS.acknowledge | STATUS.driver | STATUS.featuresOk);
  w(regs + 0x18, 2, 8);
  w(regs + 0x20, 4, 0x1000); w(regs + 0x28, 4, 0x2000); w(regs + 0x30, 4, 0x3000);
  w(regs + 0x1c, 2, 1);
  w(regs + 0x14, 1, STATUS.acknowledge | STATUS.driver | STATUS.featuresOk | STATUS.driverOk);
  // One read of sector 0: header at 0x4000, 512 bytes at 0x5000, status at 0x6000.
  const ramSab = new SharedArrayBuffer(RAM);
  const ram = new GuestRam(new Uint8Array(ramSab), [{ guestPhysAddr: 0, size: RAM, offset: 0 }]);
  const v = ram.view;
  const desc = (i: number, addr: number, len: number, flags: number, next: number) => {
    v.setUint32(0x1000 + 16 * i, addr, true); v.setUint32(0x1000 + 16 * i + 8, len, true);
    v.setUint16(0x1000 + 16 * i + 12, flags, true); v.setUint16(0x1000 + 16 * i + 14, next, true);
  };
  desc(0, 0x4000, 16, 1, 1);
  desc(1, 0x5000, 512, 3, 2);
  desc(2, 0x6000, 1, 2, 0);
  ram.bytes[0x6000] = 0xee;
  v.setUint16(0x2004, 0, true);
  v.setUint16(0x2002, 1, true); // avail.idx = 1
  const device = b.pci.virtio[0]!.device;
  return { sab, board, b, ram, device, status: () => r(regs + 0x14), usedIdx: () => v.getUint16(0x3002, true), close: () => closeSync(fd) };
}

const realIo = (pread: BlkFileIo['preadAddress']): BlkFileIo => ({
  preadAddress: pread,
  pwriteAddress: (fd, a, n, o) => Number(libc.pwriteAddress(fd, a, n, o)),
  fdatasync: (fd) => libc.fdatasync(fd),
  punchHole: () => -1,
  ramAddress: (r) => addressOf(r.bytes),
});

describe('virtio-blk serves with the bus lock released; a reset drains it', () => {
  it('the pread runs while the bus lock is free, and the request completes as usual', () => {
    const image = join(dir, 'a.img');
    writeFileSync(image, Buffer.alloc(65536, 0x42));
    let lockDuringIo = -1;
    let sab: SharedArrayBuffer;
    const m = setUp(image, realIo((fd, a, n, o) => {
      lockDuringIo = Atomics.load(new Int32Array(sab, DEVICE_LAYOUT.lock * 4, 1), 0);
      return Number(libc.preadAddress(fd, a, n, o));
    }));
    sab = m.sab;
    m.b.pci.lock.lock();
    try {
      m.device.serviceQueues(m.ram, 1, m.device.type, m.b.pci.lock);
    } finally {
      m.b.pci.lock.unlock();
    }
    expect(lockDuringIo).toBe(0); // unlocked while the file was read
    expect(m.usedIdx()).toBe(1);
    expect(m.ram.bytes[0x6000]).toBe(0); // VIRTIO_BLK_S_OK
    expect(m.ram.bytes.subarray(0x5000, 0x5200).every((x) => x === 0x42)).toBe(true);
    expect(m.device.counters().device).toMatchObject({ reads: 1, bytesRead: 512 });
    m.close();
  });

  it('a reset by another thread while a read is in flight waits for it, and its completion is dropped', async () => {
    const image = join(dir, 'b.img');
    writeFileSync(image, Buffer.alloc(65536, 0x17));
    const cells = new SharedArrayBuffer(8);
    const c = new Int32Array(cells);
    let ioEnded = 0;
    const m = setUp(image, realIo((fd, a, n, o) => {
      // In flight: let the worker start its reset, and give it time to block inside it.
      Atomics.store(c, 0, 1);
      Atomics.notify(c, 0);
      while (Atomics.load(c, 1) === 0) Atomics.wait(c, 1, 0, 50);
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 200);
      const got = Number(libc.preadAddress(fd, a, n, o));
      ioEnded = performance.timeOrigin + performance.now();
      return got;
    }));
    const worker = new Worker(new URL('./helpers/blk-resetter.ts', import.meta.url), { workerData: { sab: m.sab, board: m.board, cells } });
    const reply = new Promise<{ started: number; ended: number }>((resolve, reject) => { worker.once('message', resolve); worker.once('error', reject); });
    m.b.pci.lock.lock();
    let more: boolean;
    try {
      more = m.device.serviceQueues(m.ram, 1, m.device.type, m.b.pci.lock);
    } finally {
      m.b.pci.lock.unlock();
    }
    const { started, ended } = await reply;
    await worker.terminate();
    expect(more).toBe(false);
    expect(started).toBeLessThan(ioEnded);
    expect(ended).toBeGreaterThanOrEqual(ioEnded); // the reset returned only after the request ended
    expect(m.status()).toBe(0);
    expect(m.usedIdx()).toBe(0); // nothing published into the forgotten ring
    expect(m.device.counters().requests).toEqual([0]);
    m.close();
  });
});

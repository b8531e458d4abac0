// QEMU's pc-testdev on our board (devices/pc-testdev.ts) through the real port bus and MMIO
// dispatch every vCPU thread uses: the scratch register at any width and offset, its byte-wise
// twin, the no-op flush port, IRQ lines driven on every write, the 64 KiB MMIO window, and a
// board without the device, where all of it is the empty bus (all ones).
import { describe, expect, it } from 'vitest';
import { attachBoard, createDeviceState, type BoardConfig, type DeviceIo } from '../../electron/vmm/devices/board.ts';
import type { PciIo } from '../../electron/vmm/devices/board.ts';

function board(pcTestdev: boolean) {
  const config: BoardConfig = { virtio: [], ...(pcTestdev ? { pcTestdev } : {}) };
  const sab = createDeviceState(config);
  const irqs: [number, boolean][] = [];
  const nop = () => {};
  const io: DeviceIo & PciIo = {
    emitConsole: nop, emitAgent: nop, setIrq: (line, level) => irqs.push([line, level]), onPowerOff: nop, onDebugExit: nop, onReset: nop,
    signalMsi: nop, signalEventFd: nop, setIoeventfd: nop,
  };
  // Two threads' views of one VM's devices: what one vCPU writes, another reads.
  return { a: attachBoard(sab, io, config), b: attachBoard(sab, io, config), irqs };
}

const mmioRead = (m: ReturnType<typeof board>['a']['mmio'], address: number, size: number) => {
  const data = new Uint8Array(8);
  m.read(address, data, size);
  return [...data.subarray(0, size)];
};

describe('pc-testdev', () => {
  it('the scratch register at 0xe0: any width and offset, shared by every thread; 0xe8 is the same bytes', () => {
    const { a, b } = board(true);
    expect(a.pio.read(0xe0, 4)).toBe(0);
    a.pio.write(0xe0, 4, 0x11223344);
    expect(b.pio.read(0xe0, 4)).toBe(0x11223344);
    expect(b.pio.read(0xe0, 1)).toBe(0x44);
    expect(b.pio.read(0xe1, 1)).toBe(0x33);
    expect(b.pio.read(0xe2, 2)).toBe(0x1122);
    b.pio.write(0xe1, 1, 0xaa);
    expect(a.pio.read(0xe0, 4)).toBe(0x1122aa44);
    b.pio.write(0xe2, 2, 0xbeef);
    expect(a.pio.read(0xe0, 4)).toBe(0xbeefaa44);
    // The emulator test's `rep outsb` to 0xe0 then `inb`: the last byte written reads back.
    for (const c of [0x61, 0x62, 0x63]) a.pio.write(0xe0, 1, c);
    expect(a.pio.read(0xe0, 1)).toBe(0x63);
    // 0xe8-0xeb: the same register, a wide access handed over byte by byte.
    a.pio.write(0xe8, 4, 0xcafef00d);
    expect(b.pio.read(0xe0, 4)).toBe(0xcafef00d);
    expect(b.pio.read(0xea, 2)).toBe(0xcafe);
    // The flush port takes a write and changes nothing.
    a.pio.write(0xe4, 4, 0x1000);
    expect(a.pio.read(0xe0, 4)).toBe(0xcafef00d);
  });

  it('0x2000+N drives ISA IRQ line N on every write, a repeated level too, as QEMU passes each to KVM', () => {
    const { a, irqs } = board(true);
    a.pio.write(0x200e, 1, 1);
    a.pio.write(0x200e, 1, 1);
    a.pio.write(0x200e, 1, 0);
    a.pio.write(0x2000 + 23, 1, 0x80);
    expect(irqs).toEqual([[14, true], [14, true], [14, false], [23, true]]);
    // Past the 24 lines: not the device's.
    a.pio.write(0x2018, 1, 1);
    expect(irqs).toHaveLength(4);
    expect(a.pio.unhandledCounts().ports).toEqual([{ port: 0x2018, count: 1 }]);
  });

  it('64 KiB of RAM-like MMIO at 0xff000000, shared by every thread; outside it the empty bus', () => {
    const { a, b } = board(true);
    expect(mmioRead(a.mmio, 0xff000000, 4)).toEqual([0, 0, 0, 0]);
    a.mmio.write(0xff000000, Uint8Array.of(1, 2, 3, 4, 5, 6, 7, 8), 8);
    expect(mmioRead(b.mmio, 0xff000000, 8)).toEqual([1, 2, 3, 4, 5, 6, 7, 8]);
    expect(mmioRead(b.mmio, 0xff000003, 2)).toEqual([4, 5]);
    b.mmio.write(0xff00ffff, Uint8Array.of(0x99), 1);
    expect(mmioRead(a.mmio, 0xff00ffff, 1)).toEqual([0x99]);
    // A wide access at the last byte: past the window reads all ones and writes nothing.
    expect(mmioRead(a.mmio, 0xff00ffff, 4)).toEqual([0x99, 0xff, 0xff, 0xff]);
    expect(mmioRead(a.mmio, 0xff010000, 4)).toEqual([0xff, 0xff, 0xff, 0xff]);
    expect(mmioRead(a.mmio, 0xfeffffff, 1)).toEqual([0xff]);
  });

  it('a board without it: its ports and window are the empty bus', () => {
    const { a, irqs } = board(false);
    a.pio.write(0xe0, 4, 0x12345678);
    expect(a.pio.read(0xe0, 4)).toBe(0xffffffff);
    a.pio.write(0x200e, 1, 1);
    expect(irqs).toEqual([]);
    a.mmio.write(0xff000000, Uint8Array.of(1), 1);
    expect(mmioRead(a.mmio, 0xff000000, 1)).toEqual([0xff]);
  });
});

// The device SAB's layout is computed from the board's registrations (board.ts PORT_DEVICES,
// VIRTIO_DEVICES): parts end to end, none overlapping, Float64 parts 8-byte aligned; and a board
// with every device it can carry puts each in its registered slot over its own words.
import { describe, expect, it } from 'vitest';
import { attachBoard, createDeviceState, DEVICE_LAYOUT, DISK_SLOT_BASE, PORT_DEVICES, VIRTIO_DEVICES, type BoardConfig } from '../../electron/vmm/devices/board.ts';
import { layOut } from '../../electron/vmm/devices/state-layout.ts';
import { VIRTIO_DEVICE_ID_BASE, VIRTIO_VENDOR_ID } from '../../electron/vmm/devices/virtio/virtio-pci-regs.ts';
import { MAX_DISKS } from '../../electron/vmm/config/limits.ts';

describe('layOut', () => {
  it('lays parts end to end in their order, each at its alignment', () => {
    expect(layOut([['a', 3], ['b', { words: 4, align: 2 }], ['c', 0], ['d', 1]])).toEqual({ a: 0, b: 4, c: 8, d: 8, words: 9 });
  });
  it('refuses a name given twice, the reserved name words, and bad sizes', () => {
    expect(() => layOut([['a', 1], ['a', 1]])).toThrow(/named twice/);
    expect(() => layOut([['words', 1]])).toThrow(/named twice/);
    expect(() => layOut([['a', -1]])).toThrow(/bad size/);
    expect(() => layOut([['a', { words: 1, align: 0 }]])).toThrow(/bad size/);
  });
});

describe('the device SAB layout', () => {
  it('holds every registered device, in order, without overlap', () => {
    const names = Object.keys(DEVICE_LAYOUT).filter((n) => n !== 'words');
    expect(names).toEqual(['lock', 'unhandled', ...Object.keys(PORT_DEVICES), 'pciHost', 'hostBridge', ...Object.keys(VIRTIO_DEVICES)]);
    const offsets = names.map((n) => DEVICE_LAYOUT[n as keyof typeof DEVICE_LAYOUT]);
    for (let i = 1; i < offsets.length; i++) expect(offsets[i]).toBeGreaterThanOrEqual(offsets[i - 1]!);
    for (const [name, d] of Object.entries(PORT_DEVICES)) {
      const at = DEVICE_LAYOUT[name as keyof typeof PORT_DEVICES];
      const next = offsets.find((o, i) => i > names.indexOf(name) && o > at) ?? DEVICE_LAYOUT.words;
      expect(at + d.words, name).toBeLessThanOrEqual(next);
    }
    for (const name of Object.keys(VIRTIO_DEVICES)) expect(DEVICE_LAYOUT[name as keyof typeof VIRTIO_DEVICES] % 2, name).toBe(0);
    expect(createDeviceState().byteLength).toBe(DEVICE_LAYOUT.words * 4);
  });

  it('a board with every device it can carry: each answers in its slot, and its words are its own', () => {
    const disk = (i: number) => ({ fd: -1, sizeBytes: 1 << 20, readonly: i % 2 === 1, discard: false, serial: `d${i}` });
    const config: BoardConfig = {
      virtio: [
        { name: 'rng', eventFd: 1 },
        { name: 'net', eventFd: 2, deviceConfig: [2, 0, 0, 0, 0, 1, 1, 0] },
        ...Array.from({ length: MAX_DISKS }, (_, i) => ({ name: `blk${i}` as const, eventFd: 10 + i, disk: disk(i) })),
      ],
    };
    const sab = createDeviceState(config);
    const nop = () => {};
    const b = attachBoard(sab, { emitConsole: nop, emitAgent: nop, setIrq: nop, onPowerOff: nop, onDebugExit: nop, onReset: nop, signalMsi: nop, signalEventFd: nop, setIoeventfd: nop }, config);
    const id = (slot: number) => {
      b.pio.write(0xcf8, 4, 0x80000000 | (slot << 11));
      return b.pio.read(0xcfc, 4) >>> 0;
    };
    expect(id(VIRTIO_DEVICES.rng.slot)).toBe(((VIRTIO_DEVICE_ID_BASE + 4) << 16 | VIRTIO_VENDOR_ID) >>> 0);
    expect(id(VIRTIO_DEVICES.net.slot)).toBe(((VIRTIO_DEVICE_ID_BASE + 1) << 16 | VIRTIO_VENDOR_ID) >>> 0);
    for (let i = 0; i < MAX_DISKS; i++) expect(id(DISK_SLOT_BASE + i)).toBe(((VIRTIO_DEVICE_ID_BASE + 2) << 16 | VIRTIO_VENDOR_ID) >>> 0);
    // Each device's words are its own: a register written on each reads back its own value on each.
    const slots = [VIRTIO_DEVICES.rng.slot, VIRTIO_DEVICES.net.slot, ...Array.from({ length: MAX_DISKS }, (_, i) => DISK_SLOT_BASE + i)];
    for (const slot of slots) {
      b.pio.write(0xcf8, 4, 0x80000000 | (slot << 11) | 0x04);
      b.pio.write(0xcfc, 2, 0x0002); // memory decoding on
    }
    const selects = b.pci.virtio.map((v, i) => {
      const at = v.device.config.barAddress(0) + 0x16; // common configuration: queue_select
      b.mmio.write(at, new Uint8Array([0x40 + i, 0]), 2);
      return at;
    });
    const data = new Uint8Array(2);
    expect(selects.map((at) => { b.mmio.read(at, data, 2); return data[0]; })).toEqual(selects.map((_, i) => 0x40 + i));
    for (const v of b.pci.virtio.slice(2)) expect(Object.values(v.device.counters().device ?? {}).every((n) => n === 0)).toBe(true);
  });

  it('refuses a device name with no registered place', () => {
    const nop = () => {};
    const io = { emitConsole: nop, emitAgent: nop, setIrq: nop, onPowerOff: nop, onDebugExit: nop, onReset: nop, signalMsi: nop, signalEventFd: nop, setIoeventfd: nop };
    for (const name of [`blk${MAX_DISKS}`, 'blk', 'rng0', 'floppy'] as const) {
      const config = { virtio: [{ name, eventFd: 1, disk: { fd: -1, sizeBytes: 512, readonly: true, discard: false, serial: '' } }] } as unknown as BoardConfig;
      expect(() => attachBoard(createDeviceState(), io, config), name).toThrow(/no PCI slot/);
    }
  });
});

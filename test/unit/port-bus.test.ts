import { describe, it, expect } from 'vitest';
import { attachDevices, boardPortUser, createDeviceState, SerialInput, DEVICE_LAYOUT } from '../../electron/vmm/devices/board.ts';
import type { BoardConfig, DeviceIo } from '../../electron/vmm/devices/board.ts';
import { UNHANDLED_SLOTS } from '../../electron/vmm/devices/port-bus.ts';

function machine(sab = createDeviceState(), board: BoardConfig = { virtio: [] }) {
  const log = { console: [] as number[], agent: [] as number[], irqs: [] as [number, boolean][], powerOff: 0, reset: 0, debugExits: [] as number[] };
  const io: DeviceIo = {
    emitConsole: (b) => log.console.push(b),
    emitAgent: (b) => log.agent.push(b),
    setIrq: (line, level) => log.irqs.push([line, level]),
    onPowerOff: () => log.powerOff++,
    onDebugExit: (v) => log.debugExits.push(v),
    onReset: () => log.reset++,
  };
  return { bus: attachDevices(sab, io, board), log, sab };
}

describe('PortBus and the board', () => {
  it('reads all ones from unmapped ports, ignores writes, counts them by port', () => {
    const { bus } = machine();
    expect(bus.read(0x70, 1)).toBe(0xff);
    expect(bus.read(0xcfc, 2)).toBe(0xffff);
    expect(bus.read(0xcf8, 4)).toBe(0xffffffff);
    bus.write(0x70, 1, 0x8f);
    bus.write(0xed, 1, 0);
    const { ports, overflow } = bus.unhandledCounts();
    expect(ports).toEqual([
      { port: 0x70, count: 2 },
      { port: 0xcfc, count: 1 },
      { port: 0xcf8, count: 1 },
      { port: 0xed, count: 1 },
    ]);
    expect(overflow).toBe(0);
  });

  it('keeps the unhandled table bounded', () => {
    const { bus } = machine();
    for (let p = 0x1000; p < 0x1000 + UNHANDLED_SLOTS + 5; p++) bus.read(p, 1);
    const { ports, overflow } = bus.unhandledCounts();
    expect(ports.length).toBe(UNHANDLED_SLOTS);
    expect(overflow).toBe(5);
  });

  it('powers off on a 16-bit write of SLP_TYP=5|SLP_EN to PM1a_CNT', () => {
    const { bus, log } = machine();
    expect(bus.read(0x604, 2) & 1).toBe(1); // SCI_EN: already in ACPI mode
    bus.write(0x604, 2, (0 << 10) | (1 << 13)); // S0 sleep type: not a power off
    expect(log.powerOff).toBe(0);
    bus.write(0x604, 2, (5 << 10) | (1 << 13));
    expect(log.powerOff).toBe(1);
    bus.write(0x605, 1, ((5 << 10) | (1 << 13)) >> 8); // the high byte alone carries both
    expect(log.powerOff).toBe(2);
    expect(log.reset).toBe(0);
  });

  it('PM1 event block: status reads 0 (write 1 to clear), enable reads back', () => {
    const { bus } = machine();
    expect(bus.read(0x600, 2)).toBe(0);
    bus.write(0x602, 2, 0x0100);
    expect(bus.read(0x600, 4)).toBe(0x01000000);
    bus.write(0x600, 2, 0xffff);
    expect(bus.read(0x602, 2)).toBe(0x0100);
  });

  it('resets on 0xFE to the i8042 command port, ignores other commands', () => {
    const { bus, log } = machine();
    expect(bus.read(0x64, 1)).toBe(0x1c);
    expect(bus.read(0x60, 1)).toBe(0);
    bus.write(0x64, 1, 0xaa);
    expect(log.reset).toBe(0);
    bus.write(0x64, 1, 0xfe);
    expect(log.reset).toBe(1);
    expect(log.powerOff).toBe(0);
  });

  it('powers off on any write to isa-debug-exit (0xf4)', () => {
    const { bus, log } = machine();
    bus.write(0xf4, 4, 0);
    bus.write(0xf4, 1, 1);
    expect(log.powerOff).toBe(2);
    expect(log.debugExits).toEqual([]);
  });

  it('a VM\'s own isa-debug-exit sits at its iobase/iosize instead and reports the value written', () => {
    const { bus, log } = machine(createDeviceState(), { virtio: [], debugExit: { iobase: 0x501, iosize: 2 } });
    bus.write(0xf4, 4, 0); // the board's own has moved away: 0xf4 is a quiet port now
    expect(bus.unhandledCounts().ports).toEqual([{ port: 0xf4, count: 1 }]);
    bus.write(0x501, 2, 0x1234);
    bus.write(0x502, 1, 0x26); // any offset: QEMU reports what was written, wherever in its ports
    bus.write(0x503, 1, 7); // past iosize 2: not the device's
    expect(bus.read(0x501, 2)).toBe(0);
    expect(log.debugExits).toEqual([0x1234, 0x26]);
    expect(log.powerOff).toBe(0);

    const at0xf4 = machine(createDeviceState(), { virtio: [], debugExit: { iobase: 0xf4, iosize: 4 } });
    at0xf4.bus.write(0xf4, 4, 0xffffffff);
    at0xf4.bus.write(0xf4, 1, 1);
    expect(at0xf4.log.debugExits).toEqual([0xffffffff, 1]);
    expect(at0xf4.log.powerOff).toBe(0);
  });

  it('boardPortUser names the board\'s device a configured isa-debug-exit would overlap', () => {
    expect(boardPortUser(0xf4, 4)).toBeUndefined(); // the board's own debug-exit gives way
    expect(boardPortUser(0x501, 2)).toBeUndefined();
    expect(boardPortUser(0x3fe, 4)).toBe('com1 (ports 0x3f8-0x3ff)');
    expect(boardPortUser(0x80, 1)).toBe('post (ports 0x80-0x80)');
    expect(boardPortUser(0xcfc, 1)).toBe('PCI configuration (ports 0xcfc-0xcff)');
    expect(boardPortUser(0x5fe, 4)).toMatch(/^acpiPm \(ports 0x600-/);
  });

  it('routes COM1 to the console and COM2 to the agent; splits 16-bit accesses bytewise', () => {
    const { bus, log } = machine();
    bus.write(0x3f8, 1, 0x41);
    bus.write(0x2f8, 1, 0x42);
    expect(log.console).toEqual([0x41]);
    expect(log.agent).toEqual([0x42]);
    bus.write(0x3f8, 2, 0x0143); // THR <- 'C', IER <- 0x01
    expect(log.console).toEqual([0x41, 0x43]);
    expect(bus.read(0x3f9, 1)).toBe(0x01);
    bus.write(0x3fb, 2, 0x0b03); // LCR, MCR
    expect(bus.read(0x3fb, 2)).toBe(0x0b03);
    // A read past the end of COM1 (0x3fe MSR, 0x3ff SCR, 0x400-0x401 unmapped).
    bus.write(0x3ff, 1, 0x5a);
    expect(bus.read(0x3fe, 4) >>> 16).toBe(0xffff);
    expect((bus.read(0x3fe, 4) >>> 8) & 0xff).toBe(0x5a);
    expect(bus.unhandledCounts().ports).toEqual([]);
  });

  it('treats port 0x80 as a quiet mapped port', () => {
    const { bus, sab } = machine();
    for (let i = 0; i < 10; i++) bus.write(0x80, 1, i);
    expect(bus.unhandledCounts().ports).toEqual([]);
    expect(new Int32Array(sab)[DEVICE_LAYOUT.post]).toBe(9);
  });

  it('injects host input under the lock, raising the UART IRQ once', () => {
    const guest = machine();
    const hostIrqs: [number, boolean][] = [];
    const input = new SerialInput(guest.sab, (line, level) => hostIrqs.push([line, level]));
    guest.bus.write(0x3f9, 1, 0x01); // COM1 IER: RX data interrupt
    expect(input.space(0)).toBe(16);
    expect(input.inject(0, new TextEncoder().encode('ls\n'))).toBe(3);
    expect(hostIrqs).toEqual([[4, true]]);
    expect(input.inject(1, new Uint8Array(20))).toBe(16); // COM2: no interrupt enabled
    expect(hostIrqs).toEqual([[4, true]]);
    const got: number[] = [];
    while (guest.bus.read(0x3fd, 1) & 1) got.push(guest.bus.read(0x3f8, 1));
    expect(new TextDecoder().decode(new Uint8Array(got))).toBe('ls\n');
    expect(guest.log.irqs).toEqual([[4, false]]); // the guest's thread lowered it
  });

  it('lays out device state without overlap', () => {
    expect(createDeviceState().byteLength).toBe(DEVICE_LAYOUT.words * 4);
  });
});

describe('port 0x80 (POST / I/O delay) takes no bus lock', () => {
  it('a write completes while another thread holds the lock, and is kept', async () => {
    const { Worker } = await import('node:worker_threads');
    const sab = createDeviceState();
    const words = new Int32Array(sab);
    Atomics.store(words, DEVICE_LAYOUT.lock, 1); // held, as by another vCPU in a UART access
    // In a worker: if the write waited for the lock it would block its thread, not this one.
    const w = new Worker(`
      const { workerData, parentPort } = require('node:worker_threads');
      import(workerData.board).then(({ attachDevices }) => {
        const nop = () => {};
        const bus = attachDevices(workerData.sab, { emitConsole: nop, emitAgent: nop, setIrq: nop, onPowerOff: nop, onDebugExit: nop, onReset: nop });
        bus.write(0x80, 1, 0x42);
        parentPort.postMessage(bus.read(0x80, 1));
      });
    `, { eval: true, workerData: { sab, board: new URL('../../electron/vmm/devices/board.ts', import.meta.url).href } });
    try {
      const read = await new Promise((resolve, reject) => {
        const t = setTimeout(() => reject(new Error('the POST write waited for the bus lock')), 3_000);
        w.once('message', (m) => { clearTimeout(t); resolve(m); });
        w.once('error', (e) => { clearTimeout(t); reject(e); });
      });
      expect(read).toBe(0xff);
      expect(Atomics.load(words, DEVICE_LAYOUT.lock)).toBe(1);
      Atomics.store(words, DEVICE_LAYOUT.lock, 0);
      const { bus } = machine(sab);
      expect(bus.read(0x80, 1)).toBe(0xff);
      expect(Atomics.load(words, DEVICE_LAYOUT.post)).toBe(0x42);
    } finally {
      await w.terminate();
    }
  });
});

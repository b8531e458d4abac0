// QEMU's fw_cfg (devices/fw-cfg.ts), its legacy I/O interface: the state machine alone, then on a
// board's port bus as a guest reaches it (a 16-bit `out` to 0x510, byte `in`s from 0x511), and
// absent from a board whose machine type version does not have it.
import { describe, expect, it } from 'vitest';
import { attachDevices, createDeviceState, versionedBoard, type BoardConfig, type DeviceIo } from '../../electron/vmm/devices/board.ts';
import { FW_CFG, FW_CFG_STATE_WORDS, FwCfg, fwCfgItems } from '../../electron/vmm/devices/fw-cfg.ts';

const MACHINE = { cpus: 3, ramBytes: 5 * 1024 ** 3 + 4096 };

function device(): FwCfg {
  const state = new Int32Array(FW_CFG_STATE_WORDS);
  FwCfg.initState(state);
  return new FwCfg(state, fwCfgItems(MACHINE));
}

/** Selects `key` and reads `n` bytes, as a guest does. */
function readItem(fw: FwCfg, key: number, n: number): number[] {
  fw.write(0, 2, key);
  return Array.from({ length: n }, () => fw.read(1, 1));
}

describe('fw_cfg state machine', () => {
  it('powers on with the signature selected; FW_CFG_SIGNATURE reads "QEMU", then zeros past its end', () => {
    const fw = device();
    expect(String.fromCharCode(...Array.from({ length: 4 }, () => fw.read(1, 1)))).toBe('QEMU');
    expect(readItem(fw, FW_CFG.signature, 6)).toEqual([0x51, 0x45, 0x4d, 0x55, 0, 0]);
  });

  it('FW_CFG_ID is 1 (traditional interface, no DMA) as a 32-bit little-endian value', () => {
    expect(readItem(device(), FW_CFG.id, 4)).toEqual([1, 0, 0, 0]);
  });

  it('RAM size (u64), CPU counts (u16) are little endian, read byte by byte', () => {
    const fw = device();
    const ram = readItem(fw, FW_CFG.ramSize, 8);
    expect(ram.reduce((v, b, i) => v + b * 2 ** (8 * i), 0)).toBe(MACHINE.ramBytes);
    expect(ram).toEqual([0x00, 0x10, 0x00, 0x40, 0x01, 0, 0, 0]); // 0x1_4000_1000
    expect(readItem(fw, FW_CFG.nbCpus, 3)).toEqual([3, 0, 0]); // the third byte is past the end
    expect(readItem(fw, FW_CFG.maxCpus, 2)).toEqual([3, 0]);
  });

  it('the file directory holds no files: a big-endian count of 0, nothing after it', () => {
    expect(readItem(device(), FW_CFG.fileDir, 8)).toEqual([0, 0, 0, 0, 0, 0, 0, 0]);
  });

  it('an unknown key, an arch-local key (0x8000+) and an out-of-range key read all zeros', () => {
    const fw = device();
    for (const key of [0x02, 0x10, 0x8000, 0x8003, 0x3fff, 0xffff]) expect(readItem(fw, key, 4), `key 0x${key.toString(16)}`).toEqual([0, 0, 0, 0]);
  });

  it('the write-channel bit (0x4000) is not part of the index, as in QEMU', () => {
    expect(readItem(device(), 0x4000 | FW_CFG.nbCpus, 2)).toEqual([3, 0]);
  });

  it('re-writing the selector rewinds the offset, even to the same key', () => {
    const fw = device();
    expect(readItem(fw, FW_CFG.signature, 2)).toEqual([0x51, 0x45]);
    expect(readItem(fw, FW_CFG.signature, 2)).toEqual([0x51, 0x45]);
    fw.write(0, 2, FW_CFG.nbCpus);
    expect(fw.read(1, 1)).toBe(3);
    fw.write(1, 2, FW_CFG.signature); // a 16-bit write at 0x511 selects too (QEMU's combined region)
    expect(fw.read(0, 1)).toBe(0x51); // and a byte read of 0x510 is a data read
  });

  it('byte writes (data writes) and 32-bit writes change nothing; wider reads give 0 and do not advance', () => {
    const fw = device();
    fw.write(0, 2, FW_CFG.signature);
    expect(fw.read(1, 1)).toBe(0x51);
    fw.write(1, 1, 0x05);
    fw.write(0, 4, FW_CFG.nbCpus);
    expect(fw.read(1, 2)).toBe(0);
    expect(fw.read(0, 4)).toBe(0);
    expect(fw.read(1, 1)).toBe(0x45);
  });
});

describe('fw_cfg on the board', () => {
  const nop = () => {};
  const io: DeviceIo = { emitConsole: nop, emitAgent: nop, setIrq: nop, onPowerOff: nop, onDebugExit: nop, onReset: nop };
  const bus = (board: BoardConfig) => attachDevices(createDeviceState(board), io, board);
  const cpusSeen = (b: ReturnType<typeof bus>): number => {
    b.write(0x510, 2, FW_CFG.nbCpus);
    return b.read(0x511, 1) | (b.read(0x511, 1) << 8);
  };

  it('a board with it (unhalt-1.2): the guest reads the vCPU count; every thread\'s bus shares one selector', () => {
    const board: BoardConfig = { virtio: [], ...versionedBoard({ fwCfg: true }, { cpus: 2, ramBytes: 256 << 20 }) };
    const sab = createDeviceState(board);
    const [a, b] = [attachDevices(sab, io, board), attachDevices(sab, io, board)];
    expect(cpusSeen(a)).toBe(2);
    a.write(0x510, 2, FW_CFG.signature);
    expect([a.read(0x511, 1), b.read(0x511, 1), a.read(0x511, 1), b.read(0x511, 1)]).toEqual([0x51, 0x45, 0x4d, 0x55]);
    expect(a.unhandledCounts().ports).toEqual([]);
  });

  it('a board without it (unhalt-1.0/1.1): the ports are empty, reads all ones (the suite sees 0xffff CPUs)', () => {
    const b = bus({ virtio: [] });
    expect(cpusSeen(b)).toBe(0xffff);
    expect(b.unhandledCounts().ports.map((p) => p.port)).toEqual([0x510, 0x511]);
  });
});

// The exit dispatch without KVM: every exit kind, from the bytes of a struct kvm_run as KVM writes
// them (decoded by the production decoder, native/kvm/exit-record.ts), through dispatchExit with
// fake devices (and, for a few, the real board), to the action the vCPU worker takes. Exits no
// host can be made to produce (KVM_EXIT_FAIL_ENTRY where KVM emulates invalid guest state,
// internal errors on hardware hosts) are covered here; the faults a host does produce stay
// real-KVM tests (test/kvm/faults.test.ts).
import { describe, expect, it } from 'vitest';
import { EXIT, KVM_EXIT_IO_IN, KVM_EXIT_IO_OUT, RUN } from '../../native/kvm/abi.ts';
import { createExitRecord, decodeKvmRunImage, type VcpuExit } from '../../native/kvm/exit-record.ts';
import { COUNTER, END } from '../../electron/vmm/shared/control.ts';
import {
  CONTINUE_HLT, CONTINUE_IO, CONTINUE_MMIO, KICKED, NO_COUNTER, UNMAPPED_MMIO, dispatchExit,
  type ExitDevices, type MmioIo, type PortIo,
} from '../../electron/vmm/vcpu/exit-dispatch.ts';
import { attachDevices, createDeviceState, COM1_BASE } from '../../electron/vmm/devices/board.ts';
import { DEBUG_EXIT_PORT } from '../../electron/vmm/devices/debug-exit.ts';

/** KVM puts PIO data in the page after the kvm_run header (KVM_PIO_PAGE_OFFSET). */
const PIO_DATA_OFFSET = 4096;

/** A kvm_run image as KVM writes it: exit_reason at 8, the exit's union at 32, PIO data at 4096. */
function kvmRun(reason: number, fill: (v: DataView, bytes: Uint8Array) => void = () => {}): Uint8Array {
  const b = new Uint8Array(2 * 4096);
  const v = new DataView(b.buffer);
  v.setUint32(RUN.exitReason, reason, true);
  fill(v, b);
  return b;
}

function pioRecord(direction: number, port: number, size: number, count: number, payload: number[] = []): Uint8Array {
  return kvmRun(EXIT.IO, (v, b) => {
    v.setUint8(RUN.ioDirection, direction);
    v.setUint8(RUN.ioSize, size);
    v.setUint16(RUN.ioPort, port, true);
    v.setUint32(RUN.ioCount, count, true);
    v.setBigUint64(RUN.ioDataOffset, BigInt(PIO_DATA_OFFSET), true);
    b.set(payload, PIO_DATA_OFFSET);
  });
}

function mmioRecord(address: bigint, len: number, isWrite: boolean, payload: number[] = []): Uint8Array {
  return kvmRun(EXIT.MMIO, (v, b) => {
    v.setBigUint64(RUN.mmioPhysAddr, address, true);
    v.setUint32(RUN.mmioLen, len, true);
    v.setUint8(RUN.mmioIsWrite, isWrite ? 1 : 0);
    b.set(payload, RUN.mmioData);
  });
}

/** Devices that record every access; port reads answer from `answers` in turn. */
function fakeDevices(answers: number[] = []) {
  const calls: string[] = [];
  const pio: PortIo = {
    read: (port, size) => { calls.push(`in${size} ${port.toString(16)}`); return answers.shift() ?? 0; },
    write: (port, size, value) => { calls.push(`out${size} ${port.toString(16)}=${value.toString(16)}`); },
  };
  const mmio: MmioIo = {
    read: (address, data, size) => {
      calls.push(`read${size} ${address.toString(16)}`);
      for (let i = 0; i < size; i++) data[i] = 0x10 + i;
    },
    write: (address, data, size) => { calls.push(`write${size} ${address.toString(16)}=${Array.from(data.subarray(0, size), (x) => x.toString(16)).join(',')}`); },
  };
  const devices: ExitDevices = { pio, mmio };
  return { devices, calls };
}

function dispatch(image: Uint8Array, devices: ExitDevices = fakeDevices().devices, vcpu = 0) {
  const exit = decodeKvmRunImage(image);
  return { exit, action: dispatchExit(exit, devices, vcpu) };
}

describe('PIO exits', () => {
  it.each([
    [1, [0x41], 'out1 3f8=41'],
    [2, [0x34, 0x12], 'out2 604=1234'],
    [4, [0x78, 0x56, 0x34, 0x12], 'out4 cf8=12345678'],
  ])('io-out of %i bytes writes the little-endian value to the port', (size, payload, call) => {
    const port = size === 1 ? 0x3f8 : size === 2 ? 0x604 : 0xcf8;
    const { devices, calls } = fakeDevices();
    const { exit, action } = dispatch(pioRecord(KVM_EXIT_IO_OUT, port, size, 1, payload), devices);
    expect(exit.kind).toBe('io-out');
    expect(action).toBe(CONTINUE_IO);
    expect(calls).toEqual([call]);
  });

  it('a 4-byte out with the top bit set stays an unsigned value', () => {
    const { devices, calls } = fakeDevices();
    dispatch(pioRecord(KVM_EXIT_IO_OUT, 0xcf8, 4, 1, [0x00, 0x00, 0x00, 0x80]), devices);
    expect(calls).toEqual(['out4 cf8=80000000']);
  });

  it('rep outs writes every value, in order', () => {
    const { devices, calls } = fakeDevices();
    dispatch(pioRecord(KVM_EXIT_IO_OUT, 0x80, 2, 3, [1, 0, 2, 0, 3, 0]), devices);
    expect(calls).toEqual(['out2 80=1', 'out2 80=2', 'out2 80=3']);
  });

  it.each([
    [1, 0xab, [0xab]],
    [2, 0xbeef, [0xef, 0xbe]],
    [4, 0xdeadbeef, [0xef, 0xbe, 0xad, 0xde]],
  ])('io-in of %i bytes fills the data KVM hands back to the guest, little-endian', (size, value, bytes) => {
    const { devices, calls } = fakeDevices([value]);
    const { exit, action } = dispatch(pioRecord(KVM_EXIT_IO_IN, 0x3fd, size, 1), devices);
    expect(exit.kind).toBe('io-in');
    expect(exit.dataOffset).toBe(PIO_DATA_OFFSET);
    expect(action).toBe(CONTINUE_IO);
    expect(calls).toEqual([`in${size} 3fd`]);
    expect(Array.from(exit.data.subarray(0, exit.dataLength))).toEqual(bytes);
  });

  it('rep ins reads once per value', () => {
    const { devices, calls } = fakeDevices([0x11, 0x22]);
    const { exit } = dispatch(pioRecord(KVM_EXIT_IO_IN, 0x60, 1, 2), devices);
    expect(calls).toEqual(['in1 60', 'in1 60']);
    expect(Array.from(exit.data.subarray(0, 2))).toEqual([0x11, 0x22]);
  });

  it('goes through the real board: a ttyS0 byte reaches the console, the UART answers, isa-debug-exit powers off', () => {
    const consoleBytes: number[] = [];
    let poweredOff = 0;
    const bus = attachDevices(createDeviceState(), {
      emitConsole: (b) => consoleBytes.push(b), emitAgent: () => {}, setIrq: () => {},
      onPowerOff: () => { poweredOff++; }, onDebugExit: () => {}, onReset: () => {},
    });
    const devices: ExitDevices = { pio: bus, mmio: UNMAPPED_MMIO };
    expect(dispatch(pioRecord(KVM_EXIT_IO_OUT, COM1_BASE, 1, 2, [0x68, 0x69]), devices).action).toBe(CONTINUE_IO);
    expect(String.fromCharCode(...consoleBytes)).toBe('hi');
    // LSR: transmitter empty (THRE | TEMT), nothing received.
    const lsr = dispatch(pioRecord(KVM_EXIT_IO_IN, COM1_BASE + 5, 1, 1), devices).exit.data[0]!;
    expect(lsr & 0x60).toBe(0x60);
    expect(lsr & 0x01).toBe(0);
    // The device ends the VM through its callback; the action stays "continue" and the worker
    // sees the end in the control block before it enters the guest again.
    expect(dispatch(pioRecord(KVM_EXIT_IO_OUT, DEBUG_EXIT_PORT, 1, 1, [1]), devices).action).toBe(CONTINUE_IO);
    expect(poweredOff).toBe(1);
  });
});

describe('MMIO exits', () => {
  it('a read asks the MMIO devices to fill the value', () => {
    const { devices, calls } = fakeDevices();
    const { exit, action } = dispatch(mmioRecord(0xd0001000n, 4, false), devices);
    expect(exit.kind).toBe('mmio-read');
    expect(exit.dataOffset).toBe(RUN.mmioData);
    expect(action).toBe(CONTINUE_MMIO);
    expect(calls).toEqual(['read4 d0001000']);
    expect(Array.from(exit.data.subarray(0, 4))).toEqual([0x10, 0x11, 0x12, 0x13]);
  });

  it('a write hands the devices the bytes KVM put in the record', () => {
    const { devices, calls } = fakeDevices();
    const { exit, action } = dispatch(mmioRecord(0xfed00000n, 8, true, [1, 2, 3, 4, 5, 6, 7, 8]), devices);
    expect(exit.kind).toBe('mmio-write');
    expect(action).toBe(CONTINUE_MMIO);
    expect(calls).toEqual(['write8 fed00000=1,2,3,4,5,6,7,8']);
  });

  it('unmapped MMIO reads float high (all ones) and writes are dropped', () => {
    const devices: ExitDevices = { pio: fakeDevices().devices.pio, mmio: UNMAPPED_MMIO };
    const { exit } = dispatch(mmioRecord(0xd0000000n, 2, false), devices);
    expect(Array.from(exit.data.subarray(0, 2))).toEqual([0xff, 0xff]);
    expect(dispatch(mmioRecord(0xd0000000n, 1, true, [7]), devices).action).toBe(CONTINUE_MMIO);
  });
});

describe('exits that keep the VM running', () => {
  it('HLT is idle', () => {
    expect(dispatch(kvmRun(EXIT.HLT)).action).toBe(CONTINUE_HLT);
  });

  it('an interrupted KVM_RUN (a kick) is acknowledged, counted as intr', () => {
    const { action } = dispatch(kvmRun(EXIT.INTR));
    expect(action).toBe(KICKED);
    expect(action.counter).toBe(COUNTER.intr);
  });

  it('the hot-path actions are shared constants: dispatching them allocates nothing', () => {
    const { devices } = fakeDevices();
    const exit = createExitRecord();
    const image = pioRecord(KVM_EXIT_IO_OUT, 0x80, 1, 1, [0]);
    const first = dispatchExit(decodeKvmRunImage(image, exit), devices, 0);
    for (let i = 0; i < 100; i++) expect(dispatchExit(decodeKvmRunImage(image, exit), devices, 0)).toBe(first);
    expect(Object.isFrozen(CONTINUE_IO) && Object.isFrozen(CONTINUE_MMIO) && Object.isFrozen(CONTINUE_HLT) && Object.isFrozen(KICKED)).toBe(true);
  });
});

describe('exits that end the VM', () => {
  function ending(image: Uint8Array, vcpu = 0) {
    const { calls, devices } = fakeDevices();
    const { action } = dispatch(image, devices, vcpu);
    expect(calls).toEqual([]); // no device is touched on the way out
    if (action.type !== 'end') throw new Error(`expected an end action, got ${action.type}`);
    return action;
  }

  it('SHUTDOWN is a triple fault', () => {
    expect(ending(kvmRun(EXIT.SHUTDOWN), 1)).toEqual({
      type: 'end', counter: NO_COUNTER, code: END.tripleFault, message: 'vCPU 1: triple fault (KVM_EXIT_SHUTDOWN)',
    });
  });

  it('FAIL_ENTRY names the hardware reason', () => {
    const image = kvmRun(EXIT.FAIL_ENTRY, (v) => {
      v.setBigUint64(RUN.failReason, 0x80000021n, true); // VMX: VM-entry failure, invalid guest state
      v.setUint32(RUN.failCpu, 1, true);
    });
    const exit = decodeKvmRunImage(image);
    expect(exit.code).toBe(0x80000021);
    expect(exit.extra).toEqual([1n]);
    expect(ending(image)).toEqual({
      type: 'end', counter: NO_COUNTER, code: END.failEntry,
      message: 'vCPU 0: KVM could not enter the guest (hardware reason 0x80000021)',
    });
  });

  it('INTERNAL_ERROR names the suberror and lists its data words', () => {
    const image = kvmRun(EXIT.INTERNAL_ERROR, (v) => {
      v.setUint32(RUN.internalSuberror, 1, true); // KVM_INTERNAL_ERROR_EMULATION
      v.setUint32(RUN.internalNdata, 2, true);
      v.setBigUint64(RUN.internalData, 0xdeadn, true);
      v.setBigUint64(RUN.internalData + 8, 0xbeefn, true);
    });
    expect(ending(image)).toEqual({
      type: 'end', counter: NO_COUNTER, code: END.internalError,
      message: 'vCPU 0: KVM internal error: emulation failure [0xdead 0xbeef]',
    });
  });

  it.each([
    [2, 0, 'simultaneous exception'],
    [3, 0, 'delivery event'],
    [4, 1, 'unexpected exit reason [0x7]'],
    [9, 0, 'suberror 9'],
  ])('INTERNAL_ERROR suberror %i', (suberror, ndata, text) => {
    const image = kvmRun(EXIT.INTERNAL_ERROR, (v) => {
      v.setUint32(RUN.internalSuberror, suberror, true);
      v.setUint32(RUN.internalNdata, ndata, true);
      v.setBigUint64(RUN.internalData, 7n, true);
    });
    const action = ending(image, 3);
    expect(action.code).toBe(END.internalError);
    expect(action.message).toBe(`vCPU 3: KVM internal error: ${text}`);
  });

  it('INTERNAL_ERROR with an absurd ndata reads at most 16 words', () => {
    const exit = decodeKvmRunImage(kvmRun(EXIT.INTERNAL_ERROR, (v) => v.setUint32(RUN.internalNdata, 0xffffffff, true)));
    expect(exit.extra).toHaveLength(16);
  });

  it.each([
    [1, END.poweroff, 'vCPU 0: the guest powered off'],
    [2, END.reset, 'vCPU 0: the guest reset the machine'],
    [3, END.internalError, 'vCPU 0: system event: crash'],
    [6, END.internalError, 'vCPU 0: system event: SEV termination'],
    [77, END.internalError, 'vCPU 0: system event: event 77'],
  ])('SYSTEM_EVENT type %i', (type, code, message) => {
    const image = kvmRun(EXIT.SYSTEM_EVENT, (v) => v.setUint32(RUN.systemEventType, type, true));
    expect(ending(image)).toEqual({ type: 'end', counter: NO_COUNTER, code, message });
  });

  it.each([EXIT.DEBUG, EXIT.HYPERCALL, EXIT.UNKNOWN, 1234])('an unknown exit reason (%i) ends the VM and counts as other', (reason) => {
    expect(ending(kvmRun(reason), 2)).toEqual({
      type: 'end', counter: COUNTER.other, code: END.internalError, message: `vCPU 2: unexpected KVM exit reason ${reason}`,
    });
  });
});

describe('the exit record is reused', () => {
  it('one record decodes successive exits of different kinds', () => {
    const exit: VcpuExit = createExitRecord();
    decodeKvmRunImage(pioRecord(KVM_EXIT_IO_OUT, 0x80, 1, 1, [5]), exit);
    expect(exit.kind).toBe('io-out');
    decodeKvmRunImage(kvmRun(EXIT.HLT), exit);
    expect(exit.kind).toBe('hlt');
    decodeKvmRunImage(mmioRecord(0x1000n, 4, false), exit);
    expect([exit.kind, exit.address, exit.dataLength]).toEqual(['mmio-read', 0x1000, 4]);
  });
});

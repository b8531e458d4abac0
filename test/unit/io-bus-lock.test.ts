// The I/O thread sends the interrupts its devices raise after it lets go of the bus lock
// (io-bus-lock.ts): a vCPU woken by one, whose next register access needs the lock, never waits
// for the ioctl that woke it. Shown with the real board's virtio-rng served as the I/O thread
// serves it (serviceQueues under the lock, MSI-X programmed as a driver does) and with a real
// thread that waits for the bus lock as a vCPU's MMIO exit does.
import { Worker } from 'node:worker_threads';
import { describe, expect, it } from 'vitest';
import { attachBoard, createDeviceState, DEVICE_LAYOUT, slotBars, type BoardConfig } from '../../electron/vmm/devices/board.ts';
import { SharedLock } from '../../electron/vmm/devices/shared-lock.ts';
import { DeferringBusLock } from '../../electron/vmm/devices/virtio/io-bus-lock.ts';
import { GuestRam } from '../../electron/vmm/devices/virtio/guest-ram.ts';
import { STATUS } from '../../electron/vmm/devices/virtio/virtio-pci-regs.ts';
import { getrandomIo } from '../../native/kvm/libc.ts';

const MSI_ADDRESS = 0xfee00000;
const QUEUE_VECTOR_DATA = 0x41;

/** virtio-rng on the board at slot 1, DRIVER_OK, MSI-X on, its queue (size 8) on vector 0, one 64-byte buffer posted. */
function rngWithPostedBuffer(signalMsi: (address: number, data: number) => void) {
  const config: BoardConfig = { virtio: [{ name: 'rng', eventFd: 9 }] };
  const sab = createDeviceState(config);
  const nop = () => {};
  const b = attachBoard(sab, { emitConsole: nop, emitAgent: nop, setIrq: nop, onPowerOff: nop, onDebugExit: nop, onReset: nop, signalMsi, signalEventFd: nop, setIoeventfd: nop, entropy: getrandomIo }, config);
  const { regs, msix } = slotBars(1);
  const data = new Uint8Array(8);
  const w = (addr: number, size: number, v: number) => { for (let i = 0; i < size; i++) data[i] = (v >>> (8 * i)) & 0xff; b.mmio.write(addr, data, size); };
  b.pio.write(0xcf8, 4, 0x80000800 | 0x04);
  b.pio.write(0xcfc, 2, 0x6); // memory decoding, bus master
  b.pio.write(0xcf8, 4, 0x80000800 | 0x40);
  b.pio.write(0xcfe, 2, 0x8000); // MSI-X enable
  w(msix, 4, MSI_ADDRESS);
  w(msix + 8, 4, QUEUE_VECTOR_DATA);
  w(msix + 12, 4, 0);
  w(regs + 0x14, 1, STATUS.acknowledge | STATUS.driver);
  w(regs + 8, 4, 1);
  w(regs + 0xc, 4, 1); // VIRTIO_F_VERSION_1
  w(regs + 0x14, 1, STATUS.acknowledge | STATUS.driver | STATUS.featuresOk);
  w(regs + 0x16, 2, 0);
  w(regs + 0x18, 2, 8);
  w(regs + 0x1a, 2, 0); // the queue's vector
  w(regs + 0x20, 4, 0x1000); w(regs + 0x28, 4, 0x2000); w(regs + 0x30, 4, 0x3000);
  w(regs + 0x1c, 2, 1);
  w(regs + 0x14, 1, STATUS.acknowledge | STATUS.driver | STATUS.featuresOk | STATUS.driverOk);
  const ramSab = new SharedArrayBuffer(0x10000);
  const ram = new GuestRam(new Uint8Array(ramSab), [{ guestPhysAddr: 0, size: 0x10000, offset: 0 }]);
  ram.view.setUint32(0x1000, 0x4000, true); // descriptor 0: 64 device-writable bytes at 0x4000
  ram.view.setUint32(0x1008, 64, true);
  ram.view.setUint16(0x100c, 2, true);
  ram.view.setUint16(0x2004, 0, true);
  ram.view.setUint16(0x2002, 1, true); // avail.idx = 1
  return { sab, b, ram, device: b.pci.virtio[0]!.device, usedIdx: () => ram.view.getUint16(0x3002, true) };
}

describe('the I/O thread\'s hold of the bus lock', () => {
  it('sends an MSI raised under it only after the lock is free, in the order raised; one raised outside it at once', () => {
    const shared = new SharedLock(new Int32Array(new SharedArrayBuffer(4)));
    const sent: { address: number; data: number; lockFree: boolean }[] = [];
    const bus = new DeferringBusLock(shared, (address, data) => {
      const lockFree = shared.tryLock();
      if (lockFree) shared.unlock();
      sent.push({ address, data, lockFree });
    });
    bus.lock();
    bus.signal(MSI_ADDRESS, 1);
    bus.signal(MSI_ADDRESS, 2);
    expect(sent).toEqual([]);
    expect(bus.deferred).toBe(2);
    bus.unlock();
    expect(sent).toEqual([{ address: MSI_ADDRESS, data: 1, lockFree: true }, { address: MSI_ADDRESS, data: 2, lockFree: true }]);
    expect(bus.deferred).toBe(0);
    bus.signal(MSI_ADDRESS, 3);
    expect(sent.at(-1)).toEqual({ address: MSI_ADDRESS, data: 3, lockFree: true });
  });

  it('a served queue\'s interrupt leaves after the unlock, with the used ring already written', () => {
    let bus!: DeferringBusLock;
    const sent: { data: number; usedIdx: number; lockFree: boolean }[] = [];
    const rig = rngWithPostedBuffer((address, data) => bus.signal(address, data));
    bus = new DeferringBusLock(rig.b.pci.lock, (address, data) => {
      expect(address).toBe(MSI_ADDRESS);
      const lockFree = rig.b.pci.lock.tryLock();
      if (lockFree) rig.b.pci.lock.unlock();
      sent.push({ data, usedIdx: rig.usedIdx(), lockFree });
    });
    bus.lock();
    expect(rig.device.serviceQueues(rig.ram, 1, rig.device.type, bus)).toBe(false);
    expect(rig.usedIdx()).toBe(1);
    expect(sent).toEqual([]);
    expect(bus.deferred).toBe(1);
    bus.unlock();
    expect(sent).toEqual([{ data: QUEUE_VECTOR_DATA, usedIdx: 1, lockFree: true }]);
  });

  it('a thread waiting for the bus lock (a vCPU\'s MMIO exit) gets it while the interrupt is still being sent', async () => {
    let bus!: DeferringBusLock;
    const rig = rngWithPostedBuffer((address, data) => bus.signal(address, data));
    // The "vCPU": says it runs, takes the bus lock as a register access does (the real
    // SharedLock, in a thread of its own), says it has it, lets go.
    const flagSab = new SharedArrayBuffer(8);
    const f = new Int32Array(flagSab);
    const vcpu = new Worker(new URL('./helpers/bus-lock-taker.ts', import.meta.url), { workerData: { sab: rig.sab, lockWord: DEVICE_LAYOUT.lock, flagSab } });
    const exited = new Promise<void>((resolve) => vcpu.once('exit', () => resolve()));
    const sends: string[] = [];
    bus = new DeferringBusLock(rig.b.pci.lock, (_address, data) => {
      // The send (KVM_SIGNAL_MSI would be in the kernel here): the waiting thread gets the lock meanwhile.
      sends.push(`${data}: ${Atomics.wait(f, 1, 0, 20_000) === 'timed-out' ? 'the vCPU still waited for the lock after 20 s' : 'the vCPU had the lock'}`);
    });
    bus.lock();
    expect(Atomics.wait(f, 0, 0, 20_000), 'the vCPU thread started').not.toBe('timed-out');
    rig.device.serviceQueues(rig.ram, 1, rig.device.type, bus);
    expect(rig.usedIdx()).toBe(1);
    bus.unlock();
    expect(sends).toEqual([`${QUEUE_VECTOR_DATA}: the vCPU had the lock`]);
    await exited;
  });
});

// Worker for virtio-blk-unlocked.test.ts: a vCPU's view of the same board. Waits until the main
// thread (the I/O thread's role) says a request is in flight with the bus lock released, then
// resets the device by MMIO (status 0) as a vCPU would, and reports when that reset returned.
import { parentPort, workerData } from 'node:worker_threads';
import { attachBoard, slotBars, DISK_SLOT_BASE, type BoardConfig } from '../../../electron/vmm/devices/board.ts';

const { sab, board, cells } = workerData as { sab: SharedArrayBuffer; board: BoardConfig; cells: SharedArrayBuffer };
const c = new Int32Array(cells);
const nop = () => {};
const b = attachBoard(sab, {
  emitConsole: nop, emitAgent: nop, setIrq: nop, onPowerOff: nop, onDebugExit: nop, onReset: nop, signalMsi: nop, signalEventFd: nop, setIoeventfd: nop,
}, board);
// cells[0]: 1 = a request is in flight (set by the main thread); cells[1]: 1 = this worker is about to reset.
while (Atomics.load(c, 0) === 0) Atomics.wait(c, 0, 0, 50);
Atomics.store(c, 1, 1);
Atomics.notify(c, 1);
const started = performance.timeOrigin + performance.now();
b.mmio.write(slotBars(DISK_SLOT_BASE).regs + 0x14, new Uint8Array([0]), 1);
const ended = performance.timeOrigin + performance.now();
parentPort!.postMessage({ started, ended });

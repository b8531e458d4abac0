// The I/O thread of one VM: owns the virtio back ends and serves their queues. It sleeps in
// poll(2) on one eventfd per device — signalled by KVM itself through an ioeventfd when the guest
// writes a notify register (no exit to userspace), or by a vCPU worker that took the write as an
// MMIO exit — and on a stop eventfd. Device state is the board's shared state (board.ts), taken
// under the bus lock like any vCPU's access; interrupts go out as MSIs from here (KVM_SIGNAL_MSI).
import { parentPort, workerData } from 'node:worker_threads';
import { EventFdPoller, EventFdWriter } from '../../../../native/kvm/eventfd.ts';
import { MsiSignal, setIoEventFd } from '../../../../native/kvm/kvm.ts';
import { FALLOC_FL_KEEP_SIZE, FALLOC_FL_PUNCH_HOLE, addressOf, libc } from '../../../../native/kvm/libc.ts';
import { attachPci, type BoardConfig } from '../board.ts';
import { GuestRam, type GuestRamHandle } from './guest-ram.ts';

export interface IoWorkerData {
  deviceSab: SharedArrayBuffer;
  board: BoardConfig;
  ram: GuestRamHandle;
  vmFd: number;
  /** Written by the main thread to end the loop. */
  stopFd: number;
}

export type IoWorkerMessage = { type: 'ready' } | { type: 'failed'; message: string } | { type: 'exited' };

const data = workerData as IoWorkerData;
const post = (m: IoWorkerMessage) => parentPort!.postMessage(m);
const msi = new MsiSignal(data.vmFd);
const writer = new EventFdWriter();
const pci = attachPci(data.deviceSab, data.board, {
  signalMsi: (a, d) => { msi.signal(a, d); },
  signalEventFd: (fd) => writer.signal(fd),
  setIoeventfd: (address, length, fd, assign) => setIoEventFd(data.vmFd, { address, length, fd }, !assign),
  // The disks' I/O: straight between the image and guest RAM's SharedArrayBuffer.
  blkFileIo: {
    preadAddress: (fd, address, length, offset) => Number(libc.preadAddress(fd, address, length, offset)),
    pwriteAddress: (fd, address, length, offset) => Number(libc.pwriteAddress(fd, address, length, offset)),
    fdatasync: (fd) => libc.fdatasync(fd),
    punchHole: (fd, offset, length) => libc.fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, offset, length),
    ramAddress: (r) => addressOf(r.bytes),
  },
});
const ram = GuestRam.fromHandle(data.ram);
const poller = new EventFdPoller([data.stopFd, ...pci.virtio.map((v) => v.eventFd)]);

try {
  post({ type: 'ready' });
  for (;;) {
    if (poller.wait(-1) === 0) continue;
    if (poller.ready(0)) break;
    for (let i = 0; i < pci.virtio.length; i++) {
      if (!poller.ready(i + 1)) continue;
      let kicks = poller.take(i + 1);
      const device = pci.virtio[i]!.device;
      // One pass at a time under the lock (a bounded number of chains), the lock let go between
      // passes so the vCPUs' UART and register accesses interleave with a long queue.
      for (let more = true; more; kicks = 0) {
        pci.lock.lock();
        try {
          more = device.serviceQueues(ram, kicks, pci.lock);
        } finally {
          pci.lock.unlock();
        }
      }
    }
  }
} catch (e) {
  post({ type: 'failed', message: (e as Error).message });
} finally {
  post({ type: 'exited' });
}

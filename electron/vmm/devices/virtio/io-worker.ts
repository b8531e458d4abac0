// The I/O thread of one VM: owns the virtio back ends and serves their queues. It sleeps in
// poll(2) on one eventfd per device — signalled by KVM itself through an ioeventfd when the guest
// writes a notify register (no exit to userspace), or by a vCPU worker that took the write as an
// MMIO exit — and on a stop eventfd, plus whatever fds its back ends add each round (a network
// link's sockets), for at most the shortest timeout a back end asks for. Device state is the
// board's shared state (board.ts), taken under the bus lock like any vCPU's access; interrupts go
// out as MSIs from here (KVM_SIGNAL_MSI).
import { parentPort, workerData } from 'node:worker_threads';
import { EventFdWriter, takeEventFd } from '../../../../native/kvm/eventfd.ts';
import { MsiSignal, setIoEventFd } from '../../../../native/kvm/kvm.ts';
import { PollSet } from '../../../../native/kvm/poll-set.ts';
import { FALLOC_FL_KEEP_SIZE, FALLOC_FL_PUNCH_HOLE, addressOf, libc } from '../../../../native/kvm/libc.ts';
import { attachPci, type BoardConfig } from '../board.ts';
import { createBackEnd } from './back-ends.ts';
import { GuestRam, type GuestRamHandle } from './guest-ram.ts';
import { minTimeout, type IoBackEnd } from './io-back-end.ts';

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
const poll = new PollSet([data.stopFd, ...pci.virtio.map((v) => v.eventFd)]);
const backEnds: (IoBackEnd | undefined)[] = [];

try {
  // Back ends open before `ready`: one that cannot (a port in use, a library missing) fails the start.
  pci.virtio.forEach((v, i) => { backEnds.push(createBackEnd(data.board.virtio[i]!, { device: v.device, ram, lock: pci.lock })); });
  post({ type: 'ready' });
  for (;;) {
    poll.reset();
    let timeout = -1;
    for (const b of backEnds) if (b) timeout = minTimeout(timeout, b.fillPoll(poll));
    poll.wait(timeout);
    if (poll.ready(0)) break;
    for (let i = 0; i < pci.virtio.length; i++) {
      if (!poll.ready(i + 1)) continue;
      let kicks = takeEventFd(pci.virtio[i]!.eventFd);
      const device = pci.virtio[i]!.device;
      const server = backEnds[i] ?? device.type;
      // One pass at a time under the lock (a bounded number of chains), the lock let go between
      // passes so the vCPUs' UART and register accesses interleave with a long queue.
      for (let more = true; more; kicks = 0) {
        pci.lock.lock();
        try {
          more = device.serviceQueues(ram, kicks, server, pci.lock);
        } finally {
          pci.lock.unlock();
        }
      }
      backEnds[i]?.afterKick();
    }
    for (const b of backEnds) b?.afterPoll(poll);
  }
} catch (e) {
  post({ type: 'failed', message: (e as Error).message });
} finally {
  for (const b of backEnds) {
    try { b?.close(); } catch { /* the thread ends either way */ }
  }
  post({ type: 'exited' });
}

// The I/O thread of one VM: owns the virtio back ends and serves their queues. It sleeps in
// poll(2) on one eventfd per device — signalled by KVM itself through an ioeventfd when the guest
// writes a notify register (no exit to userspace), or by a vCPU worker that took the write as an
// MMIO exit — and on a wake eventfd the main thread writes after each command (pause, resume,
// stop: VmControl's words say which), plus whatever fds its back ends add each round (a network
// link's sockets), for at most the shortest timeout a back end asks for. Device state is the
// board's shared state (board.ts), taken under the bus lock like any vCPU's access; interrupts go
// out as MSIs from here (KVM_SIGNAL_MSI), each sent after the lock is let go (io-bus-lock.ts).
//
// Pause, as QEMU's `stop`: the thread acknowledges the pause command (VmControl.acknowledgeIoPause)
// only between two passes, and from then on serves no queue, writes no ring and sends no MSI. The
// devices' eventfds are left out of its poll meanwhile, so the notifications that arrive keep their
// counts there (an eventfd holds them: nothing is lost) and are served at the resume, with any
// queue whose service the pause cut short. The back ends' own fds and timers stay in the poll
// (libslirp's sockets and TCP timers keep the user network sane); what they receive for the guest
// waits in their own bounded backlog (virtio-net.ts).
import { parentPort, workerData } from 'node:worker_threads';
import { EventFdWriter, takeEventFd } from '../../../../native/kvm/eventfd.ts';
import { MsiSignal, setIoEventFd } from '../../../../native/kvm/kvm.ts';
import { PollSet } from '../../../../native/kvm/poll-set.ts';
import { FALLOC_FL_KEEP_SIZE, FALLOC_FL_PUNCH_HOLE, getrandomIo, guestRamAddress, libc } from '../../../../native/kvm/libc.ts';
import { COMMAND, VmControl } from '../../shared/control.ts';
import { attachPci, type BoardConfig } from '../board.ts';
import { createBackEnd } from './back-ends.ts';
import { DeferringBusLock } from './io-bus-lock.ts';
import { GuestRam, type GuestRamHandle } from './guest-ram.ts';
import { minTimeout, type IoBackEnd } from './io-back-end.ts';

export interface IoWorkerData {
  deviceSab: SharedArrayBuffer;
  board: BoardConfig;
  ram: GuestRamHandle;
  vmFd: number;
  /** The VM's control block (shared/control.ts): the command, the I/O thread's pause acknowledgement, its stop. */
  controlSab: SharedArrayBuffer;
  cpus: number;
  /** Written by the main thread after it changed a command (pause, resume) or asked the thread to end. */
  wakeFd: number;
}

export type IoWorkerMessage = { type: 'ready' } | { type: 'failed'; message: string } | { type: 'exited' };

const data = workerData as IoWorkerData;
const post = (m: IoWorkerMessage) => parentPort!.postMessage(m);
const msi = new MsiSignal(data.vmFd);
const writer = new EventFdWriter();
const pci = attachPci(data.deviceSab, data.board, {
  signalMsi: (a, d) => bus.signal(a, d),
  signalEventFd: (fd) => writer.signal(fd),
  setIoeventfd: (address, length, fd, assign) => setIoEventFd(data.vmFd, { address, length, fd }, !assign),
  // The disks' I/O: straight between the image and guest RAM's SharedArrayBuffer.
  blkFileIo: {
    preadAddress: (fd, address, length, offset) => Number(libc.preadAddress(fd, address, length, offset)),
    pwriteAddress: (fd, address, length, offset) => Number(libc.pwriteAddress(fd, address, length, offset)),
    fdatasync: (fd) => libc.fdatasync(fd),
    punchHole: (fd, offset, length) => libc.fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, offset, length),
    ramAddress: guestRamAddress,
  },
  entropy: getrandomIo,
});
/** The bus lock as this thread holds it: what its devices raise under it is sent after the unlock. */
const bus = new DeferringBusLock(pci.lock, (a, d) => { msi.signal(a, d); });
const ram = GuestRam.fromHandle(data.ram);
const control = new VmControl(data.controlSab, data.cpus);
const poll = new PollSet([data.wakeFd, ...pci.virtio.map((v) => v.eventFd)]);
const backEnds: (IoBackEnd | undefined)[] = [];
/** Devices whose notification was taken from their eventfd but whose queues a pause cut short. */
const owed = pci.virtio.map(() => false);

/**
 * Whether the thread may serve now: the command is run. On a pause it acknowledges (after reading
 * CHANGES first, so an acknowledgement never vouches for a command it did not see); while the VM
 * stops it serves nothing either (the guest is going).
 */
function mayServe(): boolean {
  const changes = control.changes;
  const cmd = control.command;
  if (cmd === COMMAND.pause) control.acknowledgeIoPause(changes);
  return cmd === COMMAND.run;
}

/** Serves device i's queues, a bounded pass at a time; a pause between passes leaves it owed. */
function serveDevice(i: number, kicks: number): void {
  const device = pci.virtio[i]!.device;
  const server = backEnds[i] ?? device.type;
  // One pass at a time under the lock (a bounded number of chains), the lock let go between
  // passes so the vCPUs' UART and register accesses interleave with a long queue.
  for (let more = true, first = true; more; kicks = 0, first = false) {
    // Only a check (the acknowledgement is mayServe's): a pause need not wait out a long queue.
    if (!first && control.command !== COMMAND.run) { owed[i] = true; return; }
    bus.lock();
    try {
      more = device.serviceQueues(ram, kicks, server, bus);
    } finally {
      bus.unlock();
    }
  }
  owed[i] = false;
  backEnds[i]?.afterKick();
}

try {
  // Back ends open before `ready`: one that cannot (a port in use, a library missing) fails the start.
  pci.virtio.forEach((v, i) => { backEnds.push(createBackEnd(data.board.virtio[i]!, { device: v.device, ram, lock: bus })); });
  post({ type: 'ready' });
  let serving = mayServe();
  for (;;) {
    poll.reset();
    // Paused: the devices' eventfds keep their notifications until the resume.
    for (let i = 0; i < pci.virtio.length; i++) poll.watch(i + 1, serving);
    let timeout = serving && owed.includes(true) ? 0 : -1;
    for (const b of backEnds) if (b) timeout = minTimeout(timeout, b.fillPoll(poll));
    poll.wait(timeout);
    if (poll.ready(0)) {
      takeEventFd(data.wakeFd);
      if (control.ioStopRequested) break;
    }
    serving = mayServe();
    for (let i = 0; serving && i < pci.virtio.length && control.command === COMMAND.run; i++) {
      const notified = poll.ready(i + 1);
      if (notified || owed[i]) serveDevice(i, notified ? takeEventFd(pci.virtio[i]!.eventFd) : 0);
    }
    // Re-read: a pause that came while the queues were served stops the receive paths too.
    serving = serving && control.command === COMMAND.run;
    for (const b of backEnds) b?.afterPoll(poll, serving);
  }
} catch (e) {
  post({ type: 'failed', message: (e as Error).message });
} finally {
  for (const b of backEnds) {
    try { b?.close(); } catch { /* the thread ends either way */ }
  }
  post({ type: 'exited' });
}

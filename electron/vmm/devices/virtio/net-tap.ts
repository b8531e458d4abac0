// A TAP device as virtio-net's link: the guest's frames are written to the tap, the tap's frames
// go to the guest. The I/O thread polls the tap's fd with its eventfds.
import { POLL, type PollSet } from '../../../../native/kvm/poll-set.ts';
import { TapFd, openTap } from '../../../../native/net/tap.ts';
import { MAX_FRAME_BYTES, type NetLink } from './virtio-net.ts';

/** Frames read per wake-up before the loop polls again (the guest's backlog is bounded too). */
const READS_PER_WAKE = 64;

export class TapNetLink implements NetLink {
  private readonly tap: TapFd;
  private readonly receive: (frame: Uint8Array) => void;
  private readonly buf = new Uint8Array(MAX_FRAME_BYTES);
  private index = -1;

  constructor(name: string, receive: (frame: Uint8Array) => void) {
    this.tap = new TapFd(openTap(name));
    this.receive = receive;
  }

  send(frame: Uint8Array): boolean {
    return this.tap.write(frame); // false: its queue is full or the interface is down
  }

  fillPoll(set: PollSet): number {
    this.index = set.add(this.tap.fd, POLL.in);
    return -1;
  }

  afterPoll(set: PollSet): void {
    if ((set.revents(this.index) & POLL.in) === 0) return;
    for (let i = 0; i < READS_PER_WAKE; i++) {
      const n = this.tap.read(this.buf);
      if (n === 0) return;
      this.receive(this.buf.subarray(0, n));
    }
  }

  close(): void {
    this.tap.close();
  }
}

// User-mode networking for virtio-net: libslirp (native/slirp) as the link. The guest sees
// QEMU's user network (10.0.2.0/24: gateway and host 10.0.2.2, DNS 10.0.2.3, DHCP from
// 10.0.2.15); its connections leave through this process's own sockets, and host port forwards
// come in. Everything runs on the I/O thread that made it (libslirp's callbacks included).
import type { PollSet } from '../../../../native/kvm/poll-set.ts';
import { Slirp, libslirpProblem } from '../../../../native/slirp/libslirp.ts';
import { formatHostForward, USER_NET, type HostForward } from '../../config/net-config.ts';
import type { NetLink } from './virtio-net.ts';

export class UserNetLink implements NetLink {
  private readonly slirp: Slirp;
  /** The last message libslirp gave about the guest's frames (diagnostics). */
  lastGuestError?: string;

  /** Throws (one line) when libslirp is missing or a forward's host port cannot be bound. */
  constructor(hostfwd: readonly HostForward[], receive: (frame: Uint8Array) => void) {
    const problem = libslirpProblem();
    if (problem) throw new Error(problem);
    this.slirp = new Slirp(
      { network: USER_NET.network, netmask: USER_NET.netmask, host: USER_NET.gateway, dhcpStart: USER_NET.dhcpStart, nameserver: USER_NET.nameserver },
      { sendPacket: receive, guestError: (m) => { this.lastGuestError = m; } },
    );
    for (const f of hostfwd) {
      if (!this.slirp.addHostForward({ udp: f.protocol === 'udp', ...f })) {
        this.slirp.close();
        throw new Error(hostPortBusy(f));
      }
    }
  }

  send(frame: Uint8Array): boolean {
    this.slirp.input(frame);
    return true; // libslirp takes every frame (what it cannot route it drops as a router would)
  }

  fillPoll(set: PollSet): number {
    return this.slirp.fillPoll(set, -1);
  }

  afterPoll(set: PollSet): void {
    this.slirp.poll(set);
  }

  close(): void {
    this.slirp.close();
  }
}

/** The one line for a forward whose host port cannot be had. */
export function hostPortBusy(f: HostForward): string {
  return `host port ${f.hostPort} (${f.protocol} on ${f.hostAddress}) is already in use or cannot be bound: hostfwd=${formatHostForward(f)}`;
}

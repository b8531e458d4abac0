// Which back end serves which board device on the I/O thread. A device without one (virtio-rng)
// is served by its type alone. Kept apart from the registrations in board.ts so that only the I/O
// thread loads the back ends (libslirp, taps); vCPU workers never do.
import type { PciDeviceEntry } from '../board.ts';
import type { IoBackEnd, IoBackEndContext } from './io-back-end.ts';
import { TapNetLink } from './net-tap.ts';
import { UserNetLink } from './net-user.ts';
import { VirtioNetBackEnd } from './virtio-net.ts';

export function createBackEnd(entry: PciDeviceEntry, ctx: IoBackEndContext): IoBackEnd | undefined {
  if (entry.name === 'net' && entry.net) {
    const net = entry.net.backEnd;
    if (net.mode === 'user') return new VirtioNetBackEnd(ctx, (receive) => new UserNetLink(net.hostfwd, receive));
    return new VirtioNetBackEnd(ctx, (receive) => new TapNetLink(net.tap, receive));
  }
  return undefined;
}

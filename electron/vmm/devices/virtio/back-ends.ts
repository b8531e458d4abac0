// Which back end serves which board device on the I/O thread. A device without one (virtio-rng)
// is served by its type alone.
import type { BoardConfig } from '../board.ts';
import type { IoBackEnd, IoBackEndContext } from './io-back-end.ts';
import { UserNetLink } from './net-user.ts';
import { VirtioNetBackEnd } from './virtio-net.ts';

export function createBackEnd(entry: BoardConfig['virtio'][number], ctx: IoBackEndContext): IoBackEnd | undefined {
  if (entry.name === 'net' && entry.net) {
    const net = entry.net.backEnd;
    if (net.mode === 'user') return new VirtioNetBackEnd(ctx, (receive) => new UserNetLink(net.hostfwd, receive));
    throw new Error(`the ${net.mode} network back end is not available`);
  }
  return undefined;
}

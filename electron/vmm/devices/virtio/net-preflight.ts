// Before a VM with a network is built: what its back end needs from this host, each problem one
// line naming what to do — libslirp installed (user networking), every forwarded host port free
// (bound and let go again here, as libslirp will bind it), a tap that exists and may be opened
// (opened and closed again here). The I/O thread checks the same things
// again when it opens the back end (a port taken in between fails the start just as clearly).
import { closeFd } from '../../../../native/kvm/libc.ts';
import { TapError, openTap } from '../../../../native/net/tap.ts';
import { libslirpProblem } from '../../../../native/slirp/libslirp.ts';
import { ConfigError } from '../../config/vm-config.ts';
import type { HostForward } from '../../config/net-config.ts';
import type { NetBackEndSpec } from '../board.ts';
import { hostPortBusy } from './net-user.ts';

export async function checkNetBackEnd(net: NetBackEndSpec | undefined): Promise<void> {
  if (!net) return;
  if (net.backEnd.mode === 'tap') {
    try {
      closeFd(openTap(net.backEnd.tap));
    } catch (e) {
      throw e instanceof TapError ? new ConfigError(e.message) : e;
    }
    return;
  }
  const problem = libslirpProblem();
  if (problem) throw new ConfigError(problem);
  for (const f of net.backEnd.hostfwd) {
    const why = await bindProblem(f);
    if (why) throw new ConfigError(`${hostPortBusy(f)} (${why})`);
  }
}

/** Why `f`'s host socket cannot be bound now (EADDRINUSE, EADDRNOTAVAIL, EACCES...), or undefined. */
function bindProblem(f: HostForward): Promise<string | undefined> {
  // Loaded here, not at start-up: only a VM with forwarded ports needs them (tens of ms of loading).
  const { createSocket } = process.getBuiltinModule('node:dgram');
  const { createServer } = process.getBuiltinModule('node:net');
  return new Promise((resolve) => {
    const done = (e?: NodeJS.ErrnoException) => resolve(e ? (e.code ?? e.message) : undefined);
    if (f.protocol === 'udp') {
      const s = createSocket('udp4');
      s.once('error', (e) => { s.close(); done(e); });
      s.bind({ port: f.hostPort, address: f.hostAddress, exclusive: true }, () => s.close(() => done()));
    } else {
      const s = createServer();
      s.once('error', (e) => done(e));
      s.listen({ port: f.hostPort, host: f.hostAddress, exclusive: true }, () => s.close(() => done()));
    }
  });
}

// Test support: a host port for a forward that something else (libslirp, QEMU, the app) will bind.
import { createSocket } from 'node:dgram';
import { createServer } from 'node:net';

export interface FreePortOptions {
  /** The address the caller's forward will bind: the check binds the same one. */
  host?: string;
  protocol?: 'tcp' | 'udp';
}

/**
 * A port that can be bound on `host` right now: the kernel's pick for port 0, released again so
 * the caller's forward can bind it. The kernel picks at random within its ephemeral range and
 * skips ports in use, so parallel test files rarely get the same one. It can still be taken
 * between this check and the use, because the caller cannot hold it: the forward is bound by
 * libslirp or another process. Anything on the host that binds port 0 or connects out in that
 * moment may be given it (an outgoing connection's source port comes from the same range).
 */
export function freePort({ host = '127.0.0.1', protocol = 'tcp' }: FreePortOptions = {}): Promise<number> {
  return protocol === 'udp' ? freeUdpPort(host) : freeTcpPort(host);
}

function freeTcpPort(host: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, host, () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    });
  });
}

function freeUdpPort(host: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createSocket(host.includes(':') ? 'udp6' : 'udp4');
    s.once('error', (e) => { s.close(); reject(e); });
    s.bind(0, host, () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

/** True if `port` can be bound on `host` right now (released at once; see freePort for the race). */
export function canBindTcp(port: number, host = '127.0.0.1'): Promise<boolean> {
  return new Promise((resolve) => {
    const s = createServer();
    s.once('error', () => resolve(false));
    s.listen(port, host, () => s.close(() => resolve(true)));
  });
}

// The libslirp binding on its own (native/slirp/libslirp.ts, Debian's libslirp0): an instance
// comes up with QEMU's user network, a host port forward binds its socket and refuses one that
// is taken, a connection to it makes libslirp ARP for the guest (a frame out of send_packet,
// from inside slirp_pollfds_poll), and its timers — libslirp's C callbacks kept by timer_new and
// called back through koffi — fire when due: with IPv6 on, the router advertisement timer sends
// an RA. Everything on this one thread, as on the I/O thread.
import { connect } from 'node:net';
import { describe, expect, it } from 'vitest';
import { PollSet } from '../../native/kvm/poll-set.ts';
import { DEFAULT_SLIRP_NETWORK, Slirp, clockMs, libslirpProblem, libslirpVersion } from '../../native/slirp/libslirp.ts';
import { freePort } from '../support/free-port.ts';

const missing = libslirpProblem();

describe.skipIf(!!missing)('libslirp through koffi', () => {
  it('a forward binds its port (a second one on it is refused); a host connection makes libslirp ARP for 10.0.2.15', async () => {
    expect(libslirpVersion()).toMatch(/^4\.\d+/);
    const frames: Uint8Array[] = [];
    const s = new Slirp(DEFAULT_SLIRP_NETWORK, { sendPacket: (f) => { frames.push(f.slice()); }, guestError: () => {} });
    try {
      const port = await freePort();
      const fwd = { udp: false, hostAddress: '127.0.0.1', hostPort: port, guestAddress: '10.0.2.15', guestPort: 22 };
      expect(s.addHostForward(fwd)).toBe(true);
      expect(s.addHostForward(fwd)).toBe(false);
      const sock = connect(port, '127.0.0.1');
      sock.on('error', () => {});
      const set = new PollSet([]);
      const until = Date.now() + 10_000;
      while (frames.length === 0 && Date.now() < until) {
        set.reset();
        const timeout = s.fillPoll(set, 20);
        expect(set.size).toBeGreaterThan(0); // its listening socket at least
        set.wait(Math.min(timeout < 0 ? 20 : timeout, 20));
        s.poll(set);
        await new Promise((r) => setTimeout(r, 5)); // let this thread's own socket connect
      }
      sock.destroy();
      const arp = Buffer.from(frames[0]!);
      expect(arp.readUInt16BE(12)).toBe(0x0806); // ARP
      expect(arp.readUInt16BE(20)).toBe(1); // request
      expect([...arp.subarray(28, 32)]).toEqual([10, 0, 2, 2]); // from the gateway
      expect([...arp.subarray(38, 42)]).toEqual([10, 0, 2, 15]); // for the guest
    } finally {
      s.close();
    }
  });

  it('timers: libslirp\'s own C callback is called back when due (IPv6 router advertisements)', () => {
    const frames: Uint8Array[] = [];
    const s = new Slirp({ ...DEFAULT_SLIRP_NETWORK, ipv6: true }, { sendPacket: (f) => { frames.push(f.slice()); }, guestError: () => {} });
    try {
      const t = s.timerState();
      expect(t.timers).toBeGreaterThan(0);
      expect(t.nextMs).toBeGreaterThan(clockMs() - 1000);
      s.runTimers(clockMs()); // nothing due yet
      expect(frames).toEqual([]);
      const before = clockMs();
      s.runTimers(t.nextMs!); // as if its time had come
      expect(frames.length).toBeGreaterThan(0);
      const ra = Buffer.from(frames[0]!);
      expect(ra.readUInt16BE(12)).toBe(0x86dd); // IPv6
      expect(ra[14 + 6]).toBe(58); // ICMPv6
      expect(ra[14 + 40]).toBe(134); // router advertisement
      expect(s.timerState().nextMs).toBeGreaterThanOrEqual(before); // re-armed by its own handler (on the real clock)
    } finally {
      s.close();
    }
  });
});

// koffi binding of libslirp (Debian's libslirp0, the user-mode network stack QEMU's `-netdev
// user` uses): a virtual 10.0.2.0/24 with a gateway, DHCP and DNS at 10.0.2.2/.3, whose guest
// TCP/UDP leaves through ordinary host sockets, and host port forwards into the guest. Only the
// ABI is here (struct layouts, callbacks, the poll protocol); what to do with frames is the
// caller's.
//
// Threads: libslirp has no thread of its own. It calls back (send_packet, timers, poll
// registration) only from inside slirp_input / slirp_pollfds_* / slirp_cleanup, so everything —
// the callbacks registered here included — runs on the one thread that created the instance (a
// VM's I/O thread). Nothing here may be used from another thread.
import type { LibraryHandle, TypeObject } from 'koffi';
import koffi from '../kvm/koffi.ts';
import { addressOf, libc } from '../kvm/libc.ts';

export const LIBSLIRP_SONAME = 'libslirp.so.0';
/** UNHALT_LIBSLIRP names another file to load (a build of one's own; tests: one that is not there). */
const libraryPath = () => process.env.UNHALT_LIBSLIRP || LIBSLIRP_SONAME;
/** What to install when the library is missing (one line for the user). */
export const LIBSLIRP_PACKAGE = 'libslirp0';

// SlirpConfig version 3 (libslirp >= 4.1): the fields we set all exist since version 1; 3 adds
// disable_dns. Version 4's extra callbacks (timer_new_opaque) are then unused, and timers come
// through timer_new with a C callback we call back ourselves.
const CONFIG_VERSION = 3;

// Flags of SlirpAddPollCb / SlirpGetREventsCb (libslirp's own numbering, not poll(2)'s).
export const SLIRP_POLL = Object.freeze({ in: 1, out: 2, pri: 4, err: 8, hup: 16 });

type Fn = ReturnType<LibraryHandle['func']>;

interface Binding {
  slirp_new: Fn;
  slirp_cleanup: Fn;
  slirp_input: Fn;
  slirp_pollfds_fill: Fn;
  slirp_pollfds_poll: Fn;
  slirp_add_hostfwd: Fn;
  slirp_version_string: Fn;
  types: {
    config: TypeObject;
    callbacks: TypeObject;
    sendPacket: TypeObject;
    guestError: TypeObject;
    clockGetNs: TypeObject;
    timerNew: TypeObject;
    timerFree: TypeObject;
    timerMod: TypeObject;
    fdCb: TypeObject;
    notify: TypeObject;
    timerCb: TypeObject;
    addPoll: TypeObject;
    getRevents: TypeObject;
  };
}

let binding: Binding | string | undefined;

/** The one-line reason libslirp cannot be used here, or undefined when it loads. */
export function libslirpProblem(): string | undefined {
  const b = load();
  return typeof b === 'string' ? b : undefined;
}

export function libslirpVersion(): string {
  return (need().slirp_version_string() as string) ?? 'unknown';
}

function need(): Binding {
  const b = load();
  if (typeof b === 'string') throw new Error(b);
  return b;
}

function load(): Binding | string {
  if (binding !== undefined) return binding;
  let lib: LibraryHandle;
  try {
    lib = koffi.load(libraryPath());
  } catch {
    return (binding = `user networking needs libslirp (${libraryPath()}), which cannot be loaded: install it with apt-get install ${LIBSLIRP_PACKAGE}`);
  }
  // struct in_addr is one network-order u32; struct in6_addr is 16 bytes aligned to 4 (a union
  // with u32[4]), which is what places the fields after it.
  const in6 = koffi.struct({ s6: koffi.array('uint32', 4) });
  const config = koffi.struct({
    version: 'uint32',
    restricted: 'int',
    in_enabled: 'bool',
    vnetwork: 'uint32',
    vnetmask: 'uint32',
    vhost: 'uint32',
    in6_enabled: 'bool',
    vprefix_addr6: in6,
    vprefix_len: 'uint8',
    vhost6: in6,
    vhostname: 'const char *',
    tftp_server_name: 'const char *',
    tftp_path: 'const char *',
    bootfile: 'const char *',
    vdhcp_start: 'uint32',
    vnameserver: 'uint32',
    vnameserver6: in6,
    vdnssearch: 'void *',
    vdomainname: 'const char *',
    if_mtu: 'size_t',
    if_mru: 'size_t',
    disable_host_loopback: 'bool',
    enable_emu: 'bool',
    outbound_addr: 'void *',
    outbound_addr6: 'void *',
    disable_dns: 'bool',
  });
  // Timer handles are small integers of ours; a uintptr_t is what a void * is in a register.
  const sendPacket = koffi.proto('intptr_t slirp_send_packet(const void *buf, size_t len, void *opaque)');
  const guestError = koffi.proto('void slirp_guest_error(const char *msg, void *opaque)');
  const clockGetNs = koffi.proto('int64_t slirp_clock_get_ns(void *opaque)');
  const timerCb = koffi.proto('void slirp_timer_cb(void *opaque)');
  const timerNew = koffi.proto('uintptr_t slirp_timer_new(void *cb, void *cb_opaque, void *opaque)');
  const timerFree = koffi.proto('void slirp_timer_free(uintptr_t timer, void *opaque)');
  const timerMod = koffi.proto('void slirp_timer_mod(uintptr_t timer, int64_t expire_ms, void *opaque)');
  const fdCb = koffi.proto('void slirp_fd_cb(int fd, void *opaque)');
  const notify = koffi.proto('void slirp_notify(void *opaque)');
  const addPoll = koffi.proto('int slirp_add_poll(int fd, int events, void *opaque)');
  const getRevents = koffi.proto('int slirp_get_revents(int idx, void *opaque)');
  const callbacks = koffi.struct({
    send_packet: 'void *',
    guest_error: 'void *',
    clock_get_ns: 'void *',
    timer_new: 'void *',
    timer_free: 'void *',
    timer_mod: 'void *',
    register_poll_fd: 'void *',
    unregister_poll_fd: 'void *',
    notify: 'void *',
  });
  const f = (proto: string) => lib.func(proto);
  return (binding = {
    // The callbacks go as a pointer to memory of ours: libslirp keeps that pointer (slirp->cb), so
    // a struct koffi would marshal for the call alone would be freed under it.
    slirp_new: lib.func('slirp_new', 'void *', [koffi.pointer(config), 'void *', 'void *']),
    slirp_cleanup: f('void slirp_cleanup(void *slirp)'),
    slirp_input: f('void slirp_input(void *slirp, const uint8_t *pkt, int len)'),
    slirp_pollfds_fill: f('void slirp_pollfds_fill(void *slirp, _Inout_ uint32_t *timeout, void *add_poll, void *opaque)'),
    slirp_pollfds_poll: f('void slirp_pollfds_poll(void *slirp, int select_error, void *get_revents, void *opaque)'),
    // struct in_addr by value: one u32 in an integer register, the same as a uint32_t.
    slirp_add_hostfwd: f('int slirp_add_hostfwd(void *slirp, int is_udp, uint32_t host_addr, int host_port, uint32_t guest_addr, int guest_port)'),
    slirp_version_string: f('const char *slirp_version_string()'),
    types: { config, callbacks, sendPacket, guestError, clockGetNs, timerNew, timerFree, timerMod, fdCb, notify, timerCb, addPoll, getRevents },
  });
}

/** An IPv4 address as struct in_addr holds it (network byte order) read as a little-endian u32. */
export function inAddr(dotted: string): number {
  const p = dotted.split('.').map(Number);
  if (p.length !== 4 || p.some((x) => !Number.isInteger(x) || x < 0 || x > 255)) throw new RangeError(`not an IPv4 address: ${dotted}`);
  return (p[0]! | (p[1]! << 8) | (p[2]! << 16) | (p[3]! << 24)) >>> 0;
}

export interface SlirpNetwork {
  /** 10.0.2.0/24, gateway (host) .2, DHCP from .15, DNS .3: QEMU's defaults, which guests expect. */
  network: string;
  netmask: string;
  host: string;
  dhcpStart: string;
  nameserver: string;
  /** Guest connections to 127.0.0.1 through the gateway are refused. */
  restrictLoopback?: boolean;
  /**
   * IPv6 as QEMU's user network has it (fec0::/64, host fec0::2, DNS fec0::3, router
   * advertisements on a timer); off unless asked for.
   */
  ipv6?: boolean;
}

export const DEFAULT_SLIRP_NETWORK: SlirpNetwork = Object.freeze({
  network: '10.0.2.0', netmask: '255.255.255.0', host: '10.0.2.2', dhcpStart: '10.0.2.15', nameserver: '10.0.2.3',
});

/** What the owner of an instance does with what libslirp hands out. */
export interface SlirpHandlers {
  /** A frame for the guest; `frame` is valid only during the call (copy it). */
  sendPacket(frame: Uint8Array): void;
  /** A message about guest misbehaviour (diagnostics). */
  guestError(message: string): void;
}

/** The poll(2) set the caller waits on: libslirp adds its sockets to it each round. */
export interface SlirpPollSet {
  /** Adds `fd` with poll(2) events; returns its index. */
  add(fd: number, events: number): number;
  /** poll(2) revents of index `i` after the wait. */
  revents(i: number): number;
}

// poll(2) bits.
const POLLIN = 1, POLLPRI = 2, POLLOUT = 4, POLLERR = 8, POLLHUP = 16;

interface Timer {
  cb: unknown;
  cbOpaque: unknown;
  /** ms on clockMs()'s scale, or undefined while unarmed. */
  expireMs?: number;
}

/** One libslirp instance: a user-mode network with its sockets and timers. */
export class Slirp {
  private readonly b: Binding;
  private handle: unknown;
  private readonly registered: unknown[] = [];
  private readonly timers = new Map<number, Timer>();
  private nextTimerId = 1;
  private readonly timeout = new Uint32Array(1);
  private pollSet?: SlirpPollSet;
  private readonly addPoll: unknown;
  private readonly getRevents: unknown;
  /** The SlirpCb libslirp points at, in memory that does not move (koffi.alloc), for the instance's life. */
  private cbMemory: unknown;

  constructor(net: SlirpNetwork, handlers: SlirpHandlers) {
    const b = need();
    this.b = b;
    const t = b.types;
    const reg = (fn: (...a: never[]) => unknown, type: TypeObject) => {
      const p = koffi.register(fn as (...a: unknown[]) => unknown, koffi.pointer(type));
      this.registered.push(p);
      return p;
    };
    const callbacks = {
      send_packet: reg((buf: unknown, len: number | bigint) => {
        const n = Number(len);
        // Copied out with memcpy, never a koffi.view over libslirp's buffer: Electron's V8 memory
        // cage forbids ArrayBuffers over foreign memory (DESIGN.md).
        const frame = new Uint8Array(n);
        if (n > 0) libc.copy(addressOf(frame), koffi.address(buf), n);
        handlers.sendPacket(frame);
        return n;
      }, t.sendPacket),
      guest_error: reg((msg: string) => handlers.guestError(msg), t.guestError),
      clock_get_ns: reg(() => process.hrtime.bigint(), t.clockGetNs),
      timer_new: reg((cb: unknown, cbOpaque: unknown) => {
        const id = this.nextTimerId++;
        this.timers.set(id, { cb, cbOpaque });
        return id;
      }, t.timerNew),
      timer_free: reg((id: number | bigint) => { this.timers.delete(Number(id)); }, t.timerFree),
      timer_mod: reg((id: number | bigint, expire: number | bigint) => {
        const timer = this.timers.get(Number(id));
        if (timer) timer.expireMs = Number(expire);
      }, t.timerMod),
      // The poll set is rebuilt from slirp_pollfds_fill every round: nothing to keep per fd.
      register_poll_fd: reg(() => {}, t.fdCb),
      unregister_poll_fd: reg(() => {}, t.fdCb),
      notify: reg(() => {}, t.notify),
    };
    this.addPoll = reg((fd: number, events: number) => this.pollSet!.add(fd, toPoll(events)), t.addPoll);
    this.getRevents = reg((idx: number) => fromPoll(this.pollSet!.revents(idx)), t.getRevents);
    const zero6 = { s6: [0, 0, 0, 0] };
    const v6 = (last: number) => in6Addr([0xfe, 0xc0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, last]);
    const cfg = {
      version: CONFIG_VERSION,
      restricted: 0,
      in_enabled: true,
      vnetwork: inAddr(net.network),
      vnetmask: inAddr(net.netmask),
      vhost: inAddr(net.host),
      in6_enabled: net.ipv6 ?? false,
      vprefix_addr6: net.ipv6 ? v6(0) : zero6, vprefix_len: net.ipv6 ? 64 : 0, vhost6: net.ipv6 ? v6(2) : zero6,
      vhostname: null, tftp_server_name: null, tftp_path: null, bootfile: null,
      vdhcp_start: inAddr(net.dhcpStart),
      vnameserver: inAddr(net.nameserver),
      vnameserver6: net.ipv6 ? v6(3) : zero6,
      vdnssearch: null, vdomainname: null,
      if_mtu: 0, if_mru: 0, // libslirp's defaults (1500)
      disable_host_loopback: net.restrictLoopback ?? false,
      enable_emu: false,
      outbound_addr: null, outbound_addr6: null,
      disable_dns: false,
    };
    this.cbMemory = koffi.alloc(t.callbacks, 1);
    koffi.encode(this.cbMemory, t.callbacks, callbacks);
    this.handle = b.slirp_new(cfg, this.cbMemory, null);
    if (!this.handle) {
      this.release();
      throw new Error('libslirp refused its configuration (slirp_new returned NULL)');
    }
  }

  /** A frame the guest sent; libslirp may answer from inside (sendPacket). */
  input(frame: Uint8Array): void {
    this.b.slirp_input(this.live(), frame, frame.length);
  }

  /**
   * Forwards host `hostAddress:hostPort` (tcp or udp) to the guest's `guestPort` (at
   * `guestAddress`, by default the first DHCP address). False when the host socket cannot be
   * bound (the port is in use, or the address is not this host's).
   */
  addHostForward(f: { udp: boolean; hostAddress: string; hostPort: number; guestAddress: string; guestPort: number }): boolean {
    return this.b.slirp_add_hostfwd(this.live(), f.udp ? 1 : 0, inAddr(f.hostAddress), f.hostPort, inAddr(f.guestAddress), f.guestPort) === 0;
  }

  /**
   * Adds libslirp's sockets to `set` for the next wait and returns the wait's timeout in ms
   * (`timeoutMs` lowered to libslirp's own and to the next timer's).
   */
  fillPoll(set: SlirpPollSet, timeoutMs: number): number {
    this.pollSet = set;
    this.timeout[0] = timeoutMs < 0 ? 0xffffffff : timeoutMs;
    this.b.slirp_pollfds_fill(this.live(), this.timeout, this.addPoll, null);
    let t = this.timeout[0]!;
    const next = this.nextTimerMs();
    if (next !== undefined) t = Math.min(t, Math.max(0, Math.ceil(next - clockMs())));
    return t === 0xffffffff ? -1 : t;
  }

  /** After the wait: libslirp reads and writes its ready sockets (and may send frames). */
  poll(set: SlirpPollSet): void {
    this.pollSet = set;
    this.b.slirp_pollfds_poll(this.live(), 0, this.getRevents, null);
    this.runTimers();
  }

  /** How many timers libslirp has made, and when the next one is due (ms on clockMs's scale). */
  timerState(): { timers: number; nextMs?: number } {
    const next = this.nextTimerMs();
    return next === undefined ? { timers: this.timers.size } : { timers: this.timers.size, nextMs: next };
  }

  /** Runs the timers that are due (at `now`, ms on clockMs's scale). */
  runTimers(now = clockMs()): void {
    for (const timer of this.timers.values()) {
      if (timer.expireMs === undefined || timer.expireMs > now) continue;
      timer.expireMs = undefined;
      koffi.call(timer.cb, this.b.types.timerCb, timer.cbOpaque);
    }
  }

  private nextTimerMs(): number | undefined {
    let next: number | undefined;
    for (const t of this.timers.values()) if (t.expireMs !== undefined && (next === undefined || t.expireMs < next)) next = t.expireMs;
    return next;
  }

  /** Closes every socket and frees the instance (idempotent). */
  close(): void {
    if (!this.handle) return;
    this.b.slirp_cleanup(this.handle);
    this.handle = undefined;
    this.release();
  }

  private live(): unknown {
    if (!this.handle) throw new Error('this slirp instance was closed');
    return this.handle;
  }

  /** After slirp_cleanup (or a failed slirp_new): nothing will call back any more. */
  private release(): void {
    for (const p of this.registered.splice(0)) koffi.unregister(p as never);
    this.timers.clear();
    if (this.cbMemory) koffi.free(this.cbMemory);
    this.cbMemory = undefined;
  }
}

/** struct in6_addr's 16 bytes as the four u32 koffi writes (little-endian reads of them). */
function in6Addr(bytes: number[]): { s6: number[] } {
  const b = Buffer.from(bytes);
  return { s6: [0, 4, 8, 12].map((o) => b.readUInt32LE(o)) };
}

/** libslirp's clock in ms (timer_mod's scale: clock_get_ns / 1e6). */
export function clockMs(): number {
  return Number(process.hrtime.bigint() / 1_000_000n);
}

function toPoll(events: number): number {
  return (events & SLIRP_POLL.in ? POLLIN : 0) | (events & SLIRP_POLL.out ? POLLOUT : 0) | (events & SLIRP_POLL.pri ? POLLPRI : 0);
}

function fromPoll(revents: number): number {
  return (revents & POLLIN ? SLIRP_POLL.in : 0) | (revents & POLLOUT ? SLIRP_POLL.out : 0) | (revents & POLLPRI ? SLIRP_POLL.pri : 0)
    | (revents & POLLERR ? SLIRP_POLL.err : 0) | (revents & POLLHUP ? SLIRP_POLL.hup : 0);
}

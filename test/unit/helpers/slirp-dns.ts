// Child of slirp-dns.test.ts, run in a mount namespace whose /etc/resolv.conf names the test's
// DNS server: a libslirp instance (QEMU's user network) is sent, as frames from the guest
// 10.0.2.15, an ARP request (so libslirp learns the guest's MAC) and then one DNS question per
// name on the command line to 10.0.2.3:53, each answered before the next. Prints one JSON line per
// name: {name, rcode, addresses, from} from the answer frame libslirp sends the guest, or
// {name, error} when none comes within 10 s.
import { PollSet } from '../../../native/kvm/poll-set.ts';
import { DEFAULT_SLIRP_NETWORK, Slirp } from '../../../native/slirp/libslirp.ts';

const GUEST_MAC = [0x52, 0x54, 0x00, 0x12, 0x34, 0x56];
const ip = (dotted: string) => dotted.split('.').map(Number);
const GUEST_IP = ip(DEFAULT_SLIRP_NETWORK.dhcpStart);

function checksum(b: Uint8Array): number {
  let sum = 0;
  for (let i = 0; i < b.length; i += 2) sum += (b[i]! << 8) | (b[i + 1] ?? 0);
  while (sum > 0xffff) sum = (sum & 0xffff) + (sum >>> 16);
  return ~sum & 0xffff;
}

function arpRequest(): Uint8Array {
  return Uint8Array.from([
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, ...GUEST_MAC, 0x08, 0x06,
    0, 1, 0x08, 0, 6, 4, 0, 1, ...GUEST_MAC, ...GUEST_IP, 0, 0, 0, 0, 0, 0, ...ip(DEFAULT_SLIRP_NETWORK.host),
  ]);
}

function dnsQuery(id: number, name: string): Uint8Array {
  const qname = Buffer.concat([...name.split('.').map((l) => Buffer.concat([Buffer.from([l.length]), Buffer.from(l, 'latin1')])), Buffer.from([0])]);
  const dns = Buffer.concat([Buffer.from([id >> 8, id & 0xff, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0]), qname, Buffer.from([0, 1, 0, 1])]);
  const udp = Buffer.alloc(8 + dns.length);
  udp.writeUInt16BE(40000 + id, 0);
  udp.writeUInt16BE(53, 2);
  udp.writeUInt16BE(udp.length, 4); // checksum 0: none (IPv4 allows it)
  dns.copy(udp, 8);
  const ipHeader = Buffer.from([0x45, 0, 0, 0, 0, id & 0xff, 0x40, 0, 64, 17, 0, 0, ...GUEST_IP, ...ip(DEFAULT_SLIRP_NETWORK.nameserver)]);
  ipHeader.writeUInt16BE(20 + udp.length, 2);
  ipHeader.writeUInt16BE(checksum(ipHeader), 10);
  return Buffer.concat([Buffer.from([0x52, 0x55, 0x0a, 0, 2, 2, ...GUEST_MAC, 0x08, 0x00]), ipHeader, udp]);
}

/** The DNS answer in an Ethernet frame from 10.0.2.3:53, or undefined for any other frame. */
function parseAnswer(f: Uint8Array): { id: number; rcode: number; addresses: string[]; from: string } | undefined {
  const b = Buffer.from(f);
  if (b.length < 42 || b.readUInt16BE(12) !== 0x0800 || b[23] !== 17) return undefined;
  const ihl = (b[14]! & 0x0f) * 4;
  const udp = 14 + ihl;
  if (b.readUInt16BE(udp) !== 53) return undefined;
  const dns = b.subarray(udp + 8);
  const id = dns.readUInt16BE(0);
  const rcode = dns[3]! & 0x0f;
  const qd = dns.readUInt16BE(4);
  const an = dns.readUInt16BE(6);
  let at = 12;
  const skipName = () => {
    while (at < dns.length) {
      const l = dns[at]!;
      if (l === 0) { at += 1; return; }
      if ((l & 0xc0) === 0xc0) { at += 2; return; }
      at += 1 + l;
    }
  };
  for (let i = 0; i < qd; i++) { skipName(); at += 4; }
  const addresses: string[] = [];
  for (let i = 0; i < an && at < dns.length; i++) {
    skipName();
    const type = dns.readUInt16BE(at);
    const len = dns.readUInt16BE(at + 8);
    if (type === 1 && len === 4) addresses.push([...dns.subarray(at + 10, at + 14)].join('.'));
    at += 10 + len;
  }
  return { id, rcode, addresses, from: [...b.subarray(26, 30)].join('.') };
}

const frames: Uint8Array[] = [];
const slirp = new Slirp(DEFAULT_SLIRP_NETWORK, { sendPacket: (f) => { frames.push(f.slice()); }, guestError: () => {} });
const set = new PollSet([]);
function pump(ms: number): void {
  set.reset();
  const timeout = slirp.fillPoll(set, ms);
  set.wait(Math.min(timeout < 0 ? ms : timeout, ms));
  slirp.poll(set);
  slirp.runTimers();
}

slirp.input(arpRequest());
let id = 1;
for (const name of process.argv.slice(2)) {
  const queryId = id++;
  slirp.input(dnsQuery(queryId, name));
  const until = Date.now() + 10_000;
  let answer: ReturnType<typeof parseAnswer>;
  while (!answer && Date.now() < until) {
    pump(20);
    for (const f of frames.splice(0)) answer ??= parseAnswer(f)?.id === queryId ? parseAnswer(f) : undefined;
  }
  console.log(JSON.stringify(answer ? { name, ...answer } : { name, error: 'no answer within 10 s' }));
}
slirp.close();

// A DNS server of a test's own (RFC 1035 over UDP), for the checks of libslirp's DNS forwarding:
// A questions for DNS_NAME get DNS_ADDRESS, other types of DNS_NAME an empty answer, every other
// name NXDOMAIN. It listens on port 53 (a resolv.conf names no port) of a loopback address of its
// own (all of 127.0.0.0/8 is local), so it meets no resolver of the host. Needs root (port 53).
import { createSocket } from 'node:dgram';

export const DNS_NAME = 'unhalt-dns-check.test';
export const DNS_ADDRESS = '192.0.2.53';

export interface DnsServer {
  address: string;
  /** Each question heard, as "A name" or "typeN name", in order. */
  asked: string[];
  close(): void;
}

export async function startDnsServer(): Promise<DnsServer> {
  // reuseAddr: a resolver of the host's that holds the wildcard 0.0.0.0:53 with SO_REUSEADDR then
  // does not keep this one off its own loopback address.
  const sock = createSocket({ type: 'udp4', reuseAddr: true });
  const asked: string[] = [];
  sock.on('message', (q, from) => {
    if (q.length < 17) return;
    const labels: string[] = [];
    let at = 12;
    while (at < q.length && q[at] !== 0) {
      labels.push(q.subarray(at + 1, at + 1 + q[at]!).toString('latin1'));
      at += 1 + q[at]!;
    }
    if (at + 5 > q.length) return;
    const name = labels.join('.').toLowerCase();
    const qtype = q.readUInt16BE(at + 1);
    const question = q.subarray(12, at + 5);
    asked.push(`${qtype === 1 ? 'A' : `type${qtype}`} ${name}`);
    const known = name === DNS_NAME;
    // The answer names the question's name by a pointer to offset 12; class IN, TTL 60.
    const answer = known && qtype === 1
      ? Buffer.concat([Buffer.from([0xc0, 12, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4]), Buffer.from(DNS_ADDRESS.split('.').map(Number))])
      : Buffer.alloc(0);
    const header = Buffer.alloc(12);
    q.copy(header, 0, 0, 2); // the query's id
    // A response, authoritative, recursion-desired echoed; rcode 0 or 3 (NXDOMAIN).
    header.writeUInt16BE(0x8400 | (q.readUInt16BE(2) & 0x0100) | (known ? 0 : 3), 2);
    header.writeUInt16BE(1, 4);
    header.writeUInt16BE(answer.length ? 1 : 0, 6);
    sock.send(Buffer.concat([header, question, answer]), from.port, from.address);
  });
  const address = `127.53.${(process.pid >> 8) & 0xff}.${(process.pid & 0xff) || 1}`;
  await new Promise<void>((resolve, reject) => {
    sock.once('error', reject);
    sock.bind(53, address, () => resolve());
  });
  return { address, asked, close: () => sock.close() };
}

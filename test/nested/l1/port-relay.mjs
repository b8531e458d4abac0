// Inside L1, for the e2e files run there: relays each TCP port of a range from one address to the
// same port on another. Two uses (test/nested/l1/run-checks): QEMU's user network forwards the
// outer host's 127.0.0.1:PORT to L1's 10.0.2.15:PORT, taken on to L1's loopback where `unhalt serve`
// listens (as everywhere); and L1's 127.0.0.1:PORT to the outer host's browser server (10.0.2.2 is
// the outer host's loopback), so each side sees the loopback Host its checks expect.
//   node port-relay.mjs LISTEN_ADDRESS TARGET_ADDRESS BASE COUNT
import { connect, createServer } from 'node:net';

const [from, to, base, count] = [process.argv[2], process.argv[3], Number(process.argv[4]), Number(process.argv[5])];
for (let port = base; port < base + count; port++) {
  createServer((inbound) => {
    const outbound = connect(port, to);
    inbound.pipe(outbound).pipe(inbound);
    // Either side gone (a server stopped, a page closed): end the other, never crash the relay.
    inbound.on('error', () => outbound.destroy());
    outbound.on('error', () => inbound.destroy());
  }).listen(port, from);
}
process.stdout.write(`port-relay: ${from}:${base}-${base + count - 1} -> ${to}\n`);

// Inside L1, for the e2e files run there: relays each TCP port of a range from one address to the
// same port on another. Two uses (test/nested/l1/run-checks): QEMU's user network forwards the
// outer host's 127.0.0.1:PORT to L1's 10.0.2.15:PORT, taken on to L1's loopback where `unhalt serve`
// listens (as everywhere); and L1's 127.0.0.1:PORT to the outer host's browser server (10.0.2.2 is
// the outer host's loopback), so each side sees the loopback Host its checks expect.
//   node port-relay.mjs LISTEN_ADDRESS TARGET_ADDRESS BASE COUNT
import { connect, createServer } from 'node:net';

const [from, to, base, count] = [process.argv[2], process.argv[3], Number(process.argv[4]), Number(process.argv[5])];
let listening = 0;
for (let port = base; port < base + count; port++) {
  // allowHalfOpen: one side's end of its writing is passed on, not taken for the end of both.
  const server = createServer({ allowHalfOpen: true }, (inbound) => {
    const outbound = connect({ port, host: to, allowHalfOpen: true });
    inbound.pipe(outbound).pipe(inbound);
    // Either side gone (a server stopped, a page closed): end the other, never crash the relay.
    inbound.on('error', () => outbound.destroy());
    outbound.on('error', () => inbound.destroy());
  });
  // A port that cannot be taken is the relay's end: whoever waits for "ready" is told.
  server.on('error', (e) => {
    process.stdout.write(`port-relay: cannot listen on ${from}:${port}: ${e.message}\n`);
    process.exit(1);
  });
  server.listen(port, from, () => {
    if (++listening === count) process.stdout.write(`port-relay: ready ${from}:${base}-${base + count - 1} -> ${to}\n`);
  });
}

// libslirp's DNS forwarding through our binding, on any host (no KVM, no guest): frames a guest
// would send — a DNS question to 10.0.2.3:53 — go into libslirp, which asks the resolver the
// host's /etc/resolv.conf names and sends the guest the answer. The resolver is a DNS server of
// the test's own on a loopback address, named by a resolv.conf bind-mounted over the host's in a
// mount namespace of the child's own (the host's file is never touched). The same path with a
// stock Linux's own resolver runs in linux-net.test.ts on hardware-semantics KVM.
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { libslirpProblem } from '../../native/slirp/libslirp.ts';
import { DNS_ADDRESS, DNS_NAME, startDnsServer } from '../support/dns-server.ts';

const CHILD = fileURLToPath(new URL('./helpers/slirp-dns.ts', import.meta.url));
const missing = libslirpProblem();
const canMountNs = process.getuid?.() === 0 && spawnSync('unshare', ['--mount', 'true']).status === 0 && existsSync('/etc/resolv.conf');
const dir = mkdtempSync(join(tmpdir(), 'unhalt-slirp-dns-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe.skipIf(!!missing || !canMountNs)('libslirp\'s DNS at 10.0.2.3 (root: a mount namespace and port 53)', () => {
  it('forwards the guest\'s question to the host\'s resolver and the answer back: an address, then an NXDOMAIN', async () => {
    const dns = await startDnsServer();
    try {
      const conf = join(dir, 'resolv.conf');
      writeFileSync(conf, `nameserver ${dns.address}\n`);
      // Asynchronously: the DNS server answers on this process's event loop.
      const r = await new Promise<{ status: number | null; stdout: string; stderr: string }>((resolve) => {
        const c = spawn('unshare', ['--mount', '--propagation', 'private', 'sh', '-c', 'mount --bind "$0" /etc/resolv.conf && exec "$@"',
          conf, process.execPath, CHILD, DNS_NAME, `nowhere.${DNS_NAME}`], { stdio: ['ignore', 'pipe', 'pipe'] });
        let stdout = '';
        let stderr = '';
        c.stdout.on('data', (d) => { stdout += d; });
        c.stderr.on('data', (d) => { stderr += d; });
        c.on('close', (status) => resolve({ status, stdout, stderr }));
      });
      expect(r.status, r.stderr).toBe(0);
      const [found, missingName] = r.stdout.trim().split('\n').map((l) => JSON.parse(l));
      expect(found).toMatchObject({ name: DNS_NAME, rcode: 0, addresses: [DNS_ADDRESS], from: '10.0.2.3' });
      expect(missingName).toMatchObject({ name: `nowhere.${DNS_NAME}`, rcode: 3, addresses: [], from: '10.0.2.3' });
      // Both questions reached the host's resolver through libslirp.
      expect(dns.asked).toEqual([`A ${DNS_NAME}`, `A nowhere.${DNS_NAME}`]);
    } finally {
      dns.close();
    }
  }, 60_000);
});

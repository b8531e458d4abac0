// The exported QEMU command line of a VM with user networking, run as written (`sh FILE`): the
// probe guest's virtio-net driver finds QEMU's virtio-net-pci with the MAC Unhalt gives the same
// VM, QEMU's libslirp offers it 10.0.2.15 by DHCP, and a connection to the exported hostfwd port
// reaches the guest as a SYN — the same events the VM gives under Unhalt (test/kvm/virtio-net.test.ts).
// The libvirt export of every network form passes libvirt's own schema (virt-xml-validate).
import { spawn, spawnSync } from 'node:child_process';
import { connect } from 'node:net';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { type AgentEvent, parseAgentLine } from '../../electron/vmm/agent/line-protocol.ts';
import { macForVm, parseNetOption } from '../../electron/vmm/config/net-config.ts';
import { resolveBoot } from '../../electron/vmm/config/resolve.ts';
import { validateConfig } from '../../electron/vmm/config/vm-config.ts';
import { exportConfig } from '../../electron/vmm/export/export.ts';
import { probeHost } from '../../electron/vmm/machine/host-caps.ts';
import { hostKind } from '../../electron/vmm/host.ts';
import { freePort } from '../support/free-port.ts';
import { qemuSkipReason } from '../support/qemu-probe.ts';
import { scaled } from '../support/time-scale.ts';

const skip = qemuSkipReason();
if (skip) console.warn(`skipping the QEMU network export tests: ${skip}`);

const ip = (dotted: string) => dotted.split('.').reduce((a, x) => a * 256 + Number(x), 0);
const mac48 = (mac: string) => mac.split(':').reduce((a, x) => a * 256 + Number.parseInt(x, 16), 0);

/** Runs the exported script; `whenEvent` is called once with each new ttyS1 event while it runs. */
async function runExported(name: string, append: string, net: string, whenEvent: (e: AgentEvent) => void = () => {}) {
  const host = probeHost();
  const config = validateConfig({ name, guest: 'probe', cpus: 1, append, net: parseNetOption(net) });
  const { text } = exportConfig('qemu', { config, boot: resolveBoot(config, host.kind), hostKind: host.kind, agentLog: 'ttyS1.log' });
  const dir = mkdtempSync(join(tmpdir(), 'unhalt-export-net-'));
  try {
    writeFileSync(join(dir, 'vm.sh'), text);
    const child = spawn('sh', [join(dir, 'vm.sh')], { cwd: dir, stdio: ['pipe', 'pipe', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (b: Buffer) => { stderr += b.toString('latin1'); });
    child.stdout.resume();
    const seen: AgentEvent[] = [];
    const log = join(dir, 'ttyS1.log');
    const poll = setInterval(() => {
      if (!existsSync(log)) return;
      // Whole lines only: QEMU writes the file as the guest's UART sends, and a line cut short
      // ("@u1 net_li") parses as an event of its own, which would take the whole line's place in
      // `seen` and hide it from whenEvent.
      const text = readFileSync(log, 'latin1');
      const events = text.slice(0, text.lastIndexOf('\n') + 1).split('\n').map(parseAgentLine).filter((e): e is AgentEvent => typeof e === 'object');
      for (const e of events.slice(seen.length)) { seen.push(e); whenEvent(e); }
    }, 50);
    const killer = setTimeout(() => child.kill('SIGKILL'), scaled(60_000));
    const status = await new Promise<number | null>((resolve, reject) => {
      child.on('error', reject);
      child.on('close', (code) => { clearTimeout(killer); resolve(code); });
    });
    clearInterval(poll);
    const events = readFileSync(log, 'latin1').split('\n').map(parseAgentLine).filter((e): e is AgentEvent => typeof e === 'object');
    return { status, stderr, events, text };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const field = (events: AgentEvent[], name: string) => events.find((e) => e.event === name)?.fields;

describe.skipIf(!!skip)('the exported QEMU command line with user networking', () => {
  it('QEMU\'s virtio-net-pci has the VM\'s MAC and its libslirp offers 10.0.2.15; a connection to the hostfwd port reaches the guest', async () => {
    const hostPort = await freePort();
    const run = await runExported('export net', 'scenario=net-listen port=8080 wait_ms=30000', `user,hostfwd=tcp:127.0.0.1:${hostPort}-:8080`, (e) => {
      if (e.event !== 'net_listen') return;
      const sock = connect(hostPort, '127.0.0.1');
      sock.on('error', () => {});
      setTimeout(() => sock.destroy(), 5000);
    });
    const context = `stderr: ${run.stderr.slice(-300)}; script: ${run.text.slice(-400)}`;
    expect(run.text).toContain(`-netdev user,id=n0,ipv6=off,hostfwd=tcp:127.0.0.1:${hostPort}-:8080`);
    expect(field(run.events, 'net_up'), context).toMatchObject({ mac: mac48(macForVm('export net')), link: 1 });
    expect(field(run.events, 'net_dhcp'), context).toMatchObject({ ok: 1, yiaddr: ip('10.0.2.15'), router: ip('10.0.2.2'), dns: ip('10.0.2.3') });
    expect(field(run.events, 'net_syn'), context).toMatchObject({ port: 8080, syn: 1, src: ip('10.0.2.2') });
    expect(run.status, context).toBe(0);
  }, scaled(90_000));
});

const validateSkip = spawnSync('virt-xml-validate', ['--version']).error ? 'virt-xml-validate is not installed (Debian libvirt-clients)' : undefined;

describe.skipIf(!!validateSkip)('the exported libvirt interface', () => {
  for (const net of ['user', 'user,hostfwd=tcp::2222-:22,hostfwd=udp:0.0.0.0:5353-:53', 'tap=tap0']) {
    it(`--net ${net} passes libvirt's schema, with the VM's MAC`, () => {
      const kind = hostKind(); // no KVM needed: the export and libvirt's schema check run on any host
      const config = validateConfig({ name: 'lv net', guest: 'probe', net: parseNetOption(net) });
      const { text } = exportConfig('libvirt', { config, boot: resolveBoot(config, kind), hostKind: kind });
      expect(text).toContain(`<mac address='${macForVm('lv net')}'/>`);
      const dir = mkdtempSync(join(tmpdir(), 'unhalt-export-net-'));
      try {
        writeFileSync(join(dir, 'd.xml'), text);
        const r = spawnSync('virt-xml-validate', [join(dir, 'd.xml'), 'domain'], { encoding: 'utf8' });
        expect(r.status, `${r.stdout}${r.stderr}`).toBe(0);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    });
  }
});

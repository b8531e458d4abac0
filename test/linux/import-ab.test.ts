// The user's own benchmark on a distribution's cloud image, on hardware-semantics KVM (the nested
// lane's L1): `unhalt import`, then `unhalt bench --vm` — an A/B of halt-poll-ns whose figure is a
// host command's (ten connections to the guest's sshd through the forward the import made, timed
// to the banner), ready once the console shows the login prompt — gives a verdict, and the image
// is byte for byte as before. Two systemd boots under TCG (minutes): part of the full own-guest
// set, its own command (npm run test:own-guest), not the default lanes (test/support/e2e-files.ts).
import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { LINUX_KIT_DIR, linuxKitBuilt } from '../../electron/vmm/guests-linux.ts';
import { runCli } from '../support/cli.ts';
import { hardwareKvm, NEEDS_HARDWARE } from '../support/kvm-semantics.ts';
import { kvmAvailable } from '../support/probe.ts';
import { scaled } from '../support/time-scale.ts';

const CLOUD_IMAGE = `${LINUX_KIT_DIR}cloud-image.raw`;
const hw = kvmAvailable && linuxKitBuilt() && hardwareKvm();
if (!hw) console.log(`import-ab: skipped: ${NEEDS_HARDWARE}`);
const STEP_MS = scaled(60_000);
const dir = mkdtempSync(join(tmpdir(), 'unhalt-import-ab-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const home = join(dir, 'home');
const unhalt = join(home, 'unhalt');
const sha256 = (file: string) => createHash('sha256').update(readFileSync(file)).digest('hex');

describe.skipIf(!hw)('an A/B on an imported cloud image', () => {
  it('unhalt bench --vm: an A/B of halt-poll-ns with a host command against the forwarded SSH port gives a verdict; the image unchanged', async () => {
    if (!existsSync(CLOUD_IMAGE)) throw new Error(`${CLOUD_IMAGE} is missing: the nested lane builds it before L1 (node native/guest/linux/build-cloud-image.mjs, as root)`);
    const pw = join(dir, 'password');
    writeFileSync(pw, 'l1-secret-42\n');
    const imported = await runCli(['import', CLOUD_IMAGE, '--name', 'cloud', '--user', 'tester', '--password-file', pw, '--cpus', '1'],
      { env: { HOME: home, UNHALT_HOME: unhalt }, killAfterMs: 5 * STEP_MS });
    expect(imported.code, imported.stderr).toBe(0);
    const lib = JSON.parse(readFileSync(join(unhalt, 'vms.json'), 'utf8')) as { vms: { imported: { sshPort: number } }[] };
    const port = lib.vms[0]!.imported.sshPort;
    // The user's load generator: connections to the guest's sshd through the forward, each timed
    // until its banner; the median of them.
    const client = join(dir, 'ssh-banner.mjs');
    writeFileSync(client, [
      "import { connect } from 'node:net';",
      'const times = [];',
      'const once = () => new Promise((ok, fail) => {',
      '  const t0 = performance.now();',
      "  const s = connect(Number(process.argv[2]), '127.0.0.1');",
      "  s.on('data', (d) => { if (String(d).startsWith('SSH-')) { times.push(performance.now() - t0); s.destroy(); ok(); } });",
      "  s.on('error', fail);",
      '});',
      'for (let i = 0; i < 10; i++) await once();',
      'times.sort((a, b) => a - b);',
      'console.log(`banner_ms=${times[5].toFixed(3)}`);',
    ].join('\n'));
    const before = sha256(CLOUD_IMAGE);
    const out = join(dir, 'ab.json');
    const t0 = performance.now();
    const r = await runCli(['bench', '--vm', 'cloud', '--config', 'a=halt-poll-ns=0', '--config', 'b=halt-poll-ns=200000', '--runs', '1',
      '--host-cmd', `${process.execPath} ${client} ${port}`, '--ready', 'login: ', '--metric', 'banner_ms=([0-9.]+)', '--unit', 'ms', '--format', 'json', '--output', out],
    { env: { HOME: home, UNHALT_HOME: unhalt }, killAfterMs: 45 * STEP_MS });
    console.log(`import-ab: the A/B took ${((performance.now() - t0) / 1000).toFixed(1)} s`);
    expect(r.code, r.stderr).toBe(0);
    const j = JSON.parse(readFileSync(out, 'utf8'));
    console.log(`import-ab: ${j.rows.map((x: { config: string; median: number }) => `${x.config} ${x.median.toFixed(2)} ms`).join(', ')}; ${j.comparisons[0]?.text ?? 'no verdict'}`);
    expect(j.failures).toEqual([]);
    expect(j.rows.map((x: { config: string }) => x.config)).toEqual(['a', 'b']);
    for (const row of j.rows) expect(row.median).toBeGreaterThan(0);
    expect(j.comparisons).toHaveLength(1);
    expect(j.comparisons[0]).toMatchObject({ baseline: 'a', candidate: 'b', verdict: expect.any(String), text: expect.any(String) });
    expect(j.environment.configs.map((c: { config: { haltPollNs: number } }) => c.config.haltPollNs)).toEqual([0, 200000]);
    expect(j.spec.vm).toMatchObject({ name: 'cloud' });
    expect(sha256(CLOUD_IMAGE)).toBe(before);
  }, 45 * STEP_MS);
});

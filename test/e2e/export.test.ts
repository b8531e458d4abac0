// End to end, in headless Chromium against host mode: the VM page's Export panel. A person
// opens a VM, clicks Export…, reads the QEMU command line, copies it, switches to libvirt and
// saves the file, switches to KubeVirt. What is copied and saved is what `unhalt export` writes
// for the same VM. Screenshots go to test/artifacts/.
// It starts no VM, so it runs on every host, with KVM or without (test/support/e2e-files.ts).
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { LibraryStore } from '../../electron/service/library-store.ts';
import { validateConfig } from '../../electron/vmm/config/vm-config.ts';
import { runCli } from '../support/cli.ts';
import { parseYamlSubset } from '../support/yaml-subset.ts';
import { artifact, useApp } from './support.ts';
import { scaled } from '../support/time-scale.ts';

describe('exporting a VM from its page', () => {
  const name = 'fleet web 1';
  const config = validateConfig({ name, cpus: 2, machine: 'unhalt-1.0', haltPollNs: 1_000_000, pin: [0, 1], append: 'scenario=hello' });

  const app = useApp({
    width: 1440, height: 1300,
    prepare: async (home) => {
      const store = await LibraryStore.open(home);
      await store.mutate((vms) => { vms.push({ id: 'vm-export-1', config, createdAt: Date.now(), updatedAt: Date.now() }); });
    },
  });

  beforeAll(async () => {
    await app.browser.ctx.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: new URL(app.url).origin });
  }, scaled(60_000));

  /** What the command line writes for the same VM (it reads the library host mode owns, without changing it). */
  async function cliExport(format: string): Promise<string> {
    const r = await runCli(['export', name, '--format', format], { env: { UNHALT_HOME: app.home } });
    expect(r.stderr).toBe('');
    return r.stdout;
  }

  it('shows the QEMU command line and copies it', async () => {
    const { page } = app;
    await app.goto();
    await page.getByRole('button', { name, exact: true }).first().click();
    await page.getByRole('heading', { name, level: 1 }).waitFor();
    await page.getByRole('button', { name: 'Export…' }).click();
    const text = page.getByTestId('export-text');
    await page.locator('[data-testid="export-text"][data-format="qemu"]').waitFor();
    const qemu = (await text.textContent())!;
    expect(qemu).toContain('exec qemu-system-x86_64');
    expect(qemu).toContain('kvm-pv-unhalt=off'); // unhalt-1.0
    expect(qemu).toMatch(/#\s+halt-poll-ns=1000000: no per-VM halt polling/);
    expect(qemu).toContain('/sys/module/kvm/parameters/halt_poll_ns');
    expect(qemu).toMatch(/#\s+pin: QEMU does not pin vCPU threads/);
    expect(qemu).toBe(await cliExport('qemu'));
    await page.screenshot({ path: artifact('export-qemu.png'), fullPage: true });

    await page.getByRole('region', { name: 'Export' }).getByRole('button', { name: 'Copy to clipboard' }).click();
    await page.getByRole('status').filter({ hasText: 'Copied to the clipboard.' }).waitFor();
    expect(await page.evaluate(() => (globalThis as unknown as { navigator: { clipboard: { readText(): Promise<string> } } }).navigator.clipboard.readText())).toBe(qemu);
    expect(app.errors).toEqual([]);
  });

  it('switches to libvirt and saves the domain XML', async () => {
    const { page } = app;
    await page.getByRole('radio', { name: /libvirt domain XML/ }).click();
    await page.locator('[data-testid="export-text"][data-format="libvirt"]').waitFor();
    const shown = (await page.getByTestId('export-text').textContent())!;
    expect(shown).toContain("<vcpupin vcpu='1' cpuset='1'/>");
    const [download] = await Promise.all([
      page.waitForEvent('download'),
      page.getByRole('button', { name: 'Save fleet-web-1.libvirt.xml' }).click(),
    ]);
    expect(download.suggestedFilename()).toBe('fleet-web-1.libvirt.xml');
    const file = join(app.home, 'saved.xml');
    await download.saveAs(file);
    const saved = readFileSync(file, 'utf8');
    expect(saved).toBe(shown);
    expect(saved).toBe(await cliExport('libvirt'));
    const check = spawnSync('virt-xml-validate', [file, 'domain'], { encoding: 'utf8' });
    if (check.error) console.warn('virt-xml-validate is not installed: the saved XML is checked in test/qemu/export-libvirt.test.ts where it is');
    else expect(`${check.stdout}${check.stderr}`.trim()).toBe(`${file} validates`);
    await page.getByRole('status').filter({ hasText: 'Saved as fleet-web-1.libvirt.xml.' }).waitFor();
    await page.screenshot({ path: artifact('export-libvirt.png'), fullPage: true });
  });

  it('switches to KubeVirt: a manifest that parses, with dedicated CPUs for the pinned VM', async () => {
    const { page } = app;
    await page.getByRole('radio', { name: /KubeVirt VirtualMachine/ }).click();
    await page.locator('[data-testid="export-text"][data-format="kubevirt"]').waitFor();
    const yaml = (await page.getByTestId('export-text').textContent())!;
    const doc = parseYamlSubset(yaml) as any;
    expect(doc.kind).toBe('VirtualMachine');
    expect(doc.metadata.name).toBe('fleet-web-1');
    expect(doc.spec.template.spec.domain.cpu.dedicatedCpuPlacement).toBe(true);
    expect(yaml).toBe(await cliExport('kubevirt'));
    await page.screenshot({ path: artifact('export-kubevirt.png'), fullPage: true });
    expect(app.errors).toEqual([]);
  });
});

// End to end, in headless Chromium against host mode: a VM in the library with user networking
// (saved by another surface, here the API) shows its network on its page
// and in its command line; a user edits it in the wizard — types a new vCPU count, saves — and
// the network is still there, in the saved configuration and the command line; started from the
// page, its guest gets 10.0.2.15 by DHCP. Typed and clicked as a person does; screenshots in
// test/artifacts/net/.
import { describe, expect, it } from 'vitest';
import { LibraryStore } from '../../electron/service/library-store.ts';
import { parseNetOption } from '../../electron/vmm/config/net-config.ts';
import { validateConfig } from '../../electron/vmm/config/vm-config.ts';
import { artifact, hook, skipReason, typeInto, useApp, waitFor } from './support.ts';
import { scaled } from '../support/time-scale.ts';

const reason = skipReason();
if (reason) console.warn(`[e2e] skipped: ${reason}`);

const shot = (name: string) => artifact(`net/${name}.png`);
const NET = 'user,hostfwd=tcp:127.0.0.1:2222-:22';

describe.skipIf(reason !== null)('a VM with a network in the app', () => {
  const app = useApp({
    width: 1440, height: 1300,
    prepare: async (home) => {
      const store = await LibraryStore.open(home);
      const config = validateConfig({ name: 'netvm', guest: 'probe', cpus: 2, memoryMiB: 64, append: 'scenario=net-dhcp', net: parseNetOption(NET) });
      await store.mutate((vms) => { vms.push({ id: 'vm-net', config, createdAt: 1, updatedAt: 1 }); });
    },
  });

  it('shows the network, keeps it through an edit in the wizard, and the guest gets its DHCP offer', async () => {
    const { page } = app;
    await app.goto();
    await page.getByRole('button', { name: /netvm/ }).first().click();
    await page.getByRole('heading', { name: 'netvm', level: 1 }).waitFor();
    const panel = page.getByTestId('config-panel');
    expect(await panel.textContent()).toContain(`Network${NET}`);
    await page.screenshot({ path: shot('vm-page'), fullPage: true });

    await page.locator('button[data-action="edit"]').click();
    await page.getByRole('heading', { name: 'Edit netvm', level: 1 }).waitFor();
    await page.locator('button[data-action="next"]').click();
    await page.locator('form.step-panel[data-step="resources"]').waitFor();
    await typeInto(page, page.getByLabel('vCPUs', { exact: true }), '1');
    while ((await page.locator('form.step-panel').getAttribute('data-step')) !== 'summary') await page.locator('button[data-action="next"]').click();
    const cmd = page.getByTestId('cmdline');
    await waitFor('--cpus 1 and the network in the command line', async () => {
      const t = (await cmd.textContent()) ?? '';
      return t.includes('--cpus 1') && t.includes(`--net ${NET}`) ? t : undefined;
    }, 15_000);
    await page.screenshot({ path: shot('edit-summary'), fullPage: true });
    await page.locator('button[data-action="save"]').click();
    await page.getByRole('heading', { name: 'netvm', level: 1 }).waitFor();
    await waitFor('the saved command line', async () => ((await page.getByTestId('vm-cmdline').textContent()) ?? '').includes(`--net ${NET}`) || undefined, 15_000);
    const saved = await hook<{ vms: { id: string; config: Record<string, unknown> }[] }>(page, 'state');
    expect(saved.vms.find((v) => v.id === 'vm-net')!.config).toMatchObject({ cpus: 1, net: parseNetOption(NET) });
    expect(await panel.textContent()).toContain(`Network${NET}`);

    await page.locator('button[data-action="start"]').click();
    const text = await waitFor('the guest\'s DHCP offer', async () => {
      const t = await hook<string>(page, 'consoleText', 'vm-net');
      return t.includes('dhcp offer 10.0.2.15 router 10.0.2.2 dns 10.0.2.3') ? t : undefined;
    }, 60_000);
    expect(text).toMatch(/virtio-net 00:03\.0 mac [0-9a-f:]{17} link up/);
    await waitFor('the VM to power off', async () => (await page.getByTestId('vm-state').first().textContent()) === 'stopped', 30_000);
    await page.screenshot({ path: shot('console'), fullPage: true });
  }, scaled(180_000));
});

// End to end, in headless Chromium against host mode: a user turns virtio-rng on in the wizard
// (step 3, "Storage & network": "Devices"), picks the probe's virtio-rng scenario, sees `--rng on` in the equivalent
// command line and "virtio-rng" in the summary, creates and starts the VM, and its console shows
// the guest's PCI scan finding 1af4:1044 and random bytes read from it; the VM page's
// configuration says virtio-rng is on. Typed and clicked as a person does; screenshots in
// test/artifacts/virtio-rng/.
import { describe, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import type { Page } from 'playwright-core';
import { artifact, hook, skipReason, typeInto, useApp, waitFor } from './support.ts';
import { scaled } from '../support/time-scale.ts';

const reason = skipReason();
if (reason) console.warn(`[e2e] skipped: ${reason}`);

const shot = (name: string) => artifact(`virtio-rng/${name}.png`);
const step = (page: Page) => page.locator('form.step-panel').getAttribute('data-step');

async function next(page: Page): Promise<void> {
  const before = await step(page);
  await page.locator('button[data-action="next"]').click();
  await waitFor(`the step after ${before}`, async () => (await step(page)) !== before, 10_000);
}

describe.skipIf(reason !== null)('virtio-rng from the wizard to the guest', () => {
  const app = useApp({ width: 1440, height: 1300 });

  it('a VM made with virtio-rng on finds the device on its PCI bus and reads random bytes from it', async () => {
    const { page } = app;
    await app.goto();
    await page.getByRole('button', { name: 'New VM', exact: true }).click();
    await page.getByRole('heading', { name: 'New virtual machine' }).waitFor();
    const name = `rng-${randomBytes(2).toString('hex')}`;
    await typeInto(page, 'Name', name);
    await page.getByRole('radio', { name: /Probe/ }).check();
    await page.getByLabel('Scenario', { exact: true }).selectOption('virtio-rng');
    await next(page);
    await next(page);
    expect(await step(page)).toBe('storage');
    const rng = page.getByRole('switch', { name: /^virtio-rng/ });
    expect(await rng.isChecked()).toBe(false);
    await rng.click();
    expect(await rng.isChecked()).toBe(true);
    await page.screenshot({ path: shot('wizard-devices'), fullPage: true });
    while ((await step(page)) !== 'summary') await next(page);
    const cmd = page.getByTestId('cmdline');
    await cmd.waitFor({ timeout: 15_000 });
    await waitFor('--rng on in the command line', async () => ((await cmd.textContent()) ?? '').includes('--rng on'), 15_000);
    expect(await cmd.textContent()).toMatch(/--append 'scenario=virtio-rng bytes=64 rounds=4'/);
    expect(await page.locator('dl.summary').textContent()).toContain('Devicesvirtio-rng');
    await page.screenshot({ path: shot('wizard-summary'), fullPage: true });
    await page.locator('button[data-action="create"]').click();
    await page.locator('section.vm-view').waitFor();
    const vmId = (await page.locator('section.vm-view').getAttribute('data-vm-id'))!;
    expect(await page.getByTestId('config-panel').textContent()).toMatch(/virtio-rngon \(virtio-pci/);

    await page.locator('button[data-action="start"]').click();
    const text = await waitFor('the guest to read its random bytes', async () => {
      const t = await hook<string>(page, 'consoleText', vmId);
      return /virtio-rng ok bytes=64 distinct=\d+ rounds=4 irqs=4/.test(t) ? t : undefined;
    }, 60_000);
    expect(text).toMatch(/pci 00:01\.0 1af4:1044 class 00ff00/);
    // The terminal wraps the 145-character line: join its rows before reading the hex.
    expect(text.replace(/\r?\n/g, '')).toMatch(/virtio-rng bytes [0-9a-f]{128}/);
    const distinct = Number(/distinct=(\d+)/.exec(text)![1]);
    expect(distinct).toBeGreaterThan(40);
    await waitFor('the VM to power off', async () => (await page.getByTestId('vm-state').first().textContent()) === 'stopped', 30_000);
    await page.screenshot({ path: shot('console'), fullPage: true });
  }, scaled(180_000));
});

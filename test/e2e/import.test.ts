// "Import a disk image" as a person uses it: from the library, through the service's file browser
// (only the allowed folders) to a distribution's cloud image, a name and a password typed, Import;
// the VM page says where it came from and how to log in; deleting it offers to remove what the
// import made, and the user's image stays as it was. Needs no KVM (nothing boots here), so it
// runs on every host.
import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { randomBytes } from 'node:crypto';
import { beforeAll, describe, expect, it } from 'vitest';
import { CLOUD_IMAGE, ensureCloudImage } from '../support/cloud-image.ts';
import { scaled } from '../support/time-scale.ts';
import { artifact, hook, typeInto, useApp, waitFor } from './support.ts';

const sha256 = (file: string) => createHash('sha256').update(readFileSync(file)).digest('hex');

describe('importing a cloud image in the app', () => {
  const app = useApp({ width: 1440, height: 1300 });
  let before = '';
  beforeAll(() => {
    ensureCloudImage();
    before = sha256(CLOUD_IMAGE);
  }, scaled(1_000_000));

  it('picks the image in the file browser, imports it with a typed name and password, shows how to log in; delete removes what the import made', async () => {
    const { page } = app;
    await app.goto();
    await page.getByRole('button', { name: 'Import a disk image…' }).click();
    await page.getByRole('heading', { name: 'Import a disk image', level: 1 }).waitFor();
    // The allowed folders first; the guest kits' folder holds the image.
    const guests = dirname(dirname(CLOUD_IMAGE));
    await page.getByRole('button', { name: guests, exact: false }).first().click();
    await waitFor('the guests folder listed', async () => (await page.getByTestId('file-browser-path').textContent()) === guests, 15_000);
    await page.getByRole('button', { name: /linux/ }).first().click();
    await page.getByRole('button', { name: /cloud-image\.raw/ }).click();
    expect(await page.getByTestId('import-picked').textContent()).toBe(`Picked: ${CLOUD_IMAGE}`);
    await page.screenshot({ path: artifact('ui-import/picked.png'), fullPage: true });

    // Nothing typed for the password yet: said at once, nothing imported.
    const name = `cloud-${randomBytes(2).toString('hex')}`;
    await typeInto(page, 'Name', name);
    await page.getByRole('radio', { name: 'A password' }).click();
    await page.locator('button[data-action="import"]').click();
    await waitFor('the missing password said', async () => ((await page.getByTestId('import-error').textContent()) ?? '').includes('Type the password'), 5_000);
    await typeInto(page, 'Password', 'correct horse');
    await page.locator('button[data-action="import"]').click();
    await page.locator('section.vm-view').waitFor({ timeout: scaled(120_000) });
    const vmId = (await page.locator('section.vm-view').getAttribute('data-vm-id'))!;
    const from = page.getByTestId('imported-from');
    await from.waitFor();
    expect(await from.textContent()).toMatch(new RegExp(`Imported from ${CLOUD_IMAGE.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')} \\(Debian GNU/Linux 12 \\(bookworm\\)\\)`));
    expect(await from.textContent()).toMatch(/ssh -p \d+ \w+@127\.0\.0\.1/);
    expect(await page.getByTestId('config-panel').textContent()).toContain('console=ttyS0');
    await page.screenshot({ path: artifact('ui-import/imported.png'), fullPage: true });
    const state = await hook<{ vms: { id: string; imported?: { dir: string } }[] }>(page, 'state');
    const dir = state.vms.find((v) => v.id === vmId)!.imported!.dir;
    expect(existsSync(`${dir}/seed.iso`)).toBe(true);

    // Delete: the dialog offers to remove what the import made (checked), never the image.
    await page.locator('button[data-action="delete"]').click();
    const dialog = page.locator('dialog[data-confirm="delete"]');
    await dialog.waitFor();
    const remove = dialog.getByRole('checkbox', { name: /Also delete what the import made/ });
    expect(await remove.isChecked()).toBe(true);
    await page.screenshot({ path: artifact('ui-import/delete.png'), fullPage: true });
    await dialog.locator('button[data-action="confirm-delete"]').click();
    await page.getByRole('heading', { name: 'Virtual machines', level: 1 }).waitFor();
    await waitFor('the import\'s folder removed', async () => !existsSync(dir), 10_000);
    expect(existsSync(CLOUD_IMAGE)).toBe(true);
    expect(sha256(CLOUD_IMAGE)).toBe(before);
  }, scaled(240_000));

  it('a file that is no disk image is refused in one line, and nothing is added', async () => {
    const { page } = app;
    await app.goto('#/import');
    await page.getByRole('heading', { name: 'Import a disk image', level: 1 }).waitFor();
    const kit = dirname(CLOUD_IMAGE);
    await page.getByRole('button', { name: dirname(kit), exact: false }).first().click();
    await page.getByRole('button', { name: /linux/ }).first().click();
    await page.getByRole('button', { name: /kit\.json/ }).click();
    await page.getByRole('radio', { name: 'A password' }).click();
    await typeInto(page, 'Password', 'correct horse');
    await page.locator('button[data-action="import"]').click();
    const error = page.getByTestId('import-error');
    await error.waitFor({ timeout: scaled(30_000) });
    expect(await error.textContent()).toMatch(/kit\.json: not a disk image/);
    const state = await hook<{ vms: unknown[] }>(page, 'state');
    expect(state.vms).toEqual([]);
  }, scaled(120_000));
});

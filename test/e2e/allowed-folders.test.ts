// End to end, in headless Chromium against host mode: the library's "Folders for boot files" as a
// person uses it (no VM starts, so the same on every host). A folder of one's own is added by
// typing its path; a broad one (/tmp) is added with what it exposes said; the added folder, once
// swapped for a symbolic link to /etc behind the app's back, is shown as not used now, with why
// and what to do; removing it takes it off the list. Screenshot: test/artifacts/allowed-folders.png.
import { mkdirSync, renameSync, symlinkSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { artifact, typeInto, useApp } from './support.ts';

describe('folders for boot files', () => {
  const app = useApp({ width: 1280, height: 900, env: { UNHALT_KVM_DEVICE: '/nonexistent/kvm' } });

  it('adds folders by typing, says what a broad one exposes, and shows a swapped folder as not used', async () => {
    const { page } = app;
    const mine = join(app.home, 'boot-files');
    mkdirSync(mine);
    await app.goto();
    await page.getByText('Folders for boot files').click();
    const list = page.locator('details.allowed-folders');
    await typeInto(page, list.getByLabel('Add a folder'), mine);
    await list.getByRole('button', { name: 'Add', exact: true }).click();
    const item = list.locator('li', { hasText: mine });
    await item.waitFor();
    expect(await item.textContent()).not.toMatch(/Note:|Not used now/);

    await typeInto(page, list.getByLabel('Add a folder'), '/tmp');
    await list.getByRole('button', { name: 'Add', exact: true }).click();
    const tmp = list.locator('li', { has: page.locator('code', { hasText: /^\/tmp$/ }) });
    await tmp.waitFor();
    expect(await tmp.textContent()).toContain('Note: any local user can put files there: a guest may be given what another user left.');

    // Behind the app's back, the folder becomes a symbolic link to /etc; the page, opened again, says so.
    renameSync(mine, `${mine}.old`);
    symlinkSync('/etc', mine);
    await page.reload();
    await page.getByText('Folders for boot files').click();
    await list.locator('li[data-refused="true"]').waitFor();
    expect(await list.locator('li[data-refused="true"]').textContent())
      .toContain('Not used now: it now leads to /etc (it was replaced by a symbolic link): remove it and add it again if you trust it.');
    await page.screenshot({ path: artifact('allowed-folders.png') });
    await list.locator('li[data-refused="true"]').getByRole('button', { name: 'Remove' }).click();
    await list.locator('li[data-refused="true"]').waitFor({ state: 'detached' });
    expect(await list.locator('li', { hasText: mine }).count()).toBe(0);
  });
});

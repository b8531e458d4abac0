// Where KVM cannot be opened (UNHALT_KVM_DEVICE names no device, so every host behaves like one
// without /dev/kvm; no VM is started), the app says so before any click: one notice naming the
// cause and its fix on every view (the empty library, the library, a VM page, Compare), a header
// badge that does not claim a KVM, and Start buttons that are disabled and point at the notice.
// A start that reaches the service anyway is refused in the notice's words. Clone and export work.
// Typed and clicked as a person does; screenshots go to test/artifacts/no-kvm/.
import { describe, expect, it } from 'vitest';
import type { Page } from 'playwright-core';
import { artifact, hook, useApp, waitFor } from './support.ts';

const NO_KVM = { UNHALT_KVM_DEVICE: '/nonexistent/kvm' };
const CAUSE = 'KVM is not usable on this host: UNHALT_KVM_DEVICE names /nonexistent/kvm, a path that does not exist';
const FIX = "To fix: unset UNHALT_KVM_DEVICE to use /dev/kvm, or set it to the KVM device's path";
const shot = (name: string) => artifact(`no-kvm/${name}.png`);

/** The notice is there exactly once, and the cause is written once on the page. */
async function noticeOnce(page: Page): Promise<string> {
  const notice = page.getByTestId('kvm-notice');
  await notice.waitFor();
  expect(await notice.count()).toBe(1);
  expect((await page.locator('body').innerText()).split(CAUSE).length - 1).toBe(1);
  return (await notice.textContent())!;
}

describe('without KVM, the app says so once and Start says why it cannot', () => {
  const app = useApp({ env: NO_KVM, width: 1440, height: 1000 });
  let vmId = '';

  it('the empty library shows the notice with the cause and its fix, and the badge claims no KVM', async () => {
    const page = await app.goto();
    await page.getByRole('heading', { name: 'No virtual machines yet' }).waitFor();
    const text = await noticeOnce(page);
    expect(text).toContain(CAUSE);
    expect(text).toContain(FIX);
    expect(text).toMatch(/created, edited, cloned and exported/);
    const badge = page.locator('.topbar .host-kind');
    expect(await badge.textContent()).toBe('No KVM');
    await page.screenshot({ path: shot('empty-library'), fullPage: true });
  }, 60_000);

  it('a VM page: Start is disabled and points at the notice; clone and export work', async () => {
    const { page } = app;
    await page.getByRole('button', { name: 'Create a probe VM' }).click();
    await page.locator('section.vm-view').waitFor();
    vmId = (await page.locator('section.vm-view').getAttribute('data-vm-id'))!;
    await noticeOnce(page);
    const start = page.locator('button[data-action="start"]');
    expect(await start.isDisabled()).toBe(true);
    expect(await start.getAttribute('title')).toMatch(/needs KVM, which this host lacks/);
    expect(await start.getAttribute('aria-describedby')).toBe('kvm-notice');
    expect(await page.getByTestId('start-blocked').textContent()).toMatch(/cannot start here: this host lacks KVM/);
    await page.screenshot({ path: shot('vm-page'), fullPage: true });

    await page.getByRole('button', { name: 'Export…' }).click();
    const exported = page.getByTestId('export-text');
    await exported.waitFor({ timeout: 15_000 });
    expect(await exported.textContent()).toMatch(/qemu-system-x86_64/);

    await page.getByRole('button', { name: 'Clone' }).click();
    await page.getByRole('heading', { name: 'probe-copy', level: 1 }).waitFor();
    await noticeOnce(page);
  }, 60_000);

  it('a start that reaches the service is refused with the cause and its fix, and the VM stays stopped', async () => {
    const { page } = app;
    const refusal = await page.evaluate(async (id) => {
      const h = (globalThis as unknown as { __unhalt: { api: { startVm(id: string): Promise<unknown> } } }).__unhalt;
      try {
        await h.api.startVm(id);
        return 'started';
      } catch (e) {
        return (e as Error).message;
      }
    }, vmId);
    expect(refusal).toBe(`${CAUSE}. ${FIX}`);
    const state = await hook<{ vms: { id: string; status: { state: string } }[] }>(page, 'state');
    expect(state.vms.find((v) => v.id === vmId)?.status.state).toBe('stopped');
  }, 30_000);

  it('the library: every Start is disabled, on cards and in the table; the notice is there once', async () => {
    const { page } = app;
    await page.getByRole('button', { name: 'Library', exact: true }).click();
    const cards = page.locator('li.vm-card');
    await waitFor('two cards', async () => (await cards.count()) === 2, 10_000);
    await noticeOnce(page);
    for (const card of await cards.all()) {
      const start = card.getByRole('button', { name: 'Start' });
      expect(await start.isDisabled()).toBe(true);
      expect(await start.getAttribute('title')).toMatch(/needs KVM/);
    }
    await page.screenshot({ path: shot('library-cards'), fullPage: true });
    await page.getByRole('button', { name: 'Table', exact: true }).click();
    const table = page.getByTestId('vm-table');
    await table.waitFor();
    const starts = table.getByRole('button', { name: 'Start' });
    expect(await starts.count()).toBe(2);
    for (const start of await starts.all()) expect(await start.isDisabled()).toBe(true);
    await page.getByRole('button', { name: 'Cards', exact: true }).click();
  }, 60_000);

  it('Compare shows the notice once', async () => {
    const { page } = app;
    await page.getByRole('button', { name: 'Compare', exact: true }).click();
    await page.locator('h1', { hasText: /Compare/ }).first().waitFor();
    await noticeOnce(page);
    await page.screenshot({ path: shot('compare'), fullPage: true });
    expect(app.errors.filter((e) => !/favicon|WebSocket/.test(e))).toEqual([]);
  }, 30_000);
});

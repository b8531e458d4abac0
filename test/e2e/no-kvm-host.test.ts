// End to end, in headless Chromium against host mode, the app on a host whose KVM cannot be opened,
// as a new user meets it (on every host: the server is told UNHALT_KVM_DEVICE=/nonexistent/kvm, so
// these tests start no VM and never skip): the host's CPUs come from the OS (the wizard, the
// pinning step, the VM page), the notice names the cause and its fix, a failed Start stays on the
// VM page with its reason and time across a reload, and a link with a wrong or missing key says so
// and how to get a good one. Typed and clicked as a person does; screenshots in test/artifacts/no-kvm/.
import { describe, expect, it } from 'vitest';
import type { Page } from 'playwright-core';
import { hostCpuList } from '../../electron/vmm/host.ts';
import { artifact, typeInto, useApp, waitFor } from './support.ts';

const NO_KVM = '/nonexistent/kvm';
const shot = (name: string) => artifact(`no-kvm/${name}.png`);
const step = (page: Page) => page.locator('form.step-panel').getAttribute('data-step');

async function nextStep(page: Page): Promise<void> {
  const before = await step(page);
  await page.locator('button[data-action="next"]').click();
  await waitFor(`the step after ${before}`, async () => (await step(page)) !== before, 10_000);
}

describe('a host whose KVM cannot be opened', () => {
  const app = useApp({ width: 1440, height: 1200, env: { UNHALT_KVM_DEVICE: NO_KVM } });
  const cpus = hostCpuList();

  it('says why KVM cannot be opened and what to do, in the notice and the header', async () => {
    const page = await app.goto();
    const notice = page.getByTestId('kvm-notice');
    await notice.waitFor();
    expect(await notice.getAttribute('data-cause')).toBe('override-missing');
    const text = (await notice.textContent())!;
    expect(text).toContain('No KVM here.');
    expect(text).toContain(`UNHALT_KVM_DEVICE names ${NO_KVM}, a path that does not exist.`);
    expect(text).toContain('To fix: unset UNHALT_KVM_DEVICE to use /dev/kvm');
    expect(text).not.toMatch(/kvm_intel|kvm_amd/);
    expect(await page.locator('.topbar .host-kind').textContent()).toBe('No KVM');
    await page.screenshot({ path: shot('banner'), fullPage: true });
  });

  it('the wizard counts the host\'s CPUs from the OS and the pinning step lists them', async () => {
    const { page } = app;
    await page.getByRole('button', { name: 'New VM', exact: true }).click();
    await page.getByRole('heading', { name: 'New virtual machine' }).waitFor();
    await typeInto(page, 'Name', 'no-kvm-wizard', { leave: true, delay: 20 });
    await nextStep(page);
    expect(await step(page)).toBe('resources');
    await typeInto(page, 'vCPUs', String(cpus.length), { leave: true, delay: 20 });
    const hint = (await page.locator('form.step-panel').textContent())!;
    expect(hint).toContain(`This host has ${cpus.length} CPU${cpus.length === 1 ? '' : 's'}; a VM has up to 254 vCPUs (the machine's limit); KVM cannot be asked here, so its own limit is checked at start.`);
    expect(hint).not.toContain('This host has 0 CPUs');
    expect(hint).not.toContain('overcommitted');
    // One vCPU more than the host has: now it is overcommitted.
    await typeInto(page, 'vCPUs', String(cpus.length + 1), { leave: true, delay: 20 });
    expect(await page.locator('form.step-panel').textContent()).toContain('overcommitted');
    await typeInto(page, 'vCPUs', '1', { leave: true, delay: 20 });
    while ((await step(page)) !== 'pinning') await nextStep(page);
    const chips = page.locator('form.step-panel .cpu-chip');
    expect(await chips.allTextContents()).toEqual(cpus.map((c) => `CPU ${c}`));
    // Picking a CPU with a click works without KVM: pinning needs only the host's CPUs.
    await chips.first().click();
    expect(await page.locator('form.step-panel .cpu-chip.on').allTextContents()).toEqual([`CPU ${cpus[0]} #1`]);
    await page.screenshot({ path: shot('pinning-step'), fullPage: true });
  });

  it('a Start that fails stays on the VM page with its reason and time, also after a reload', async () => {
    const { page } = app;
    await app.goto();
    await page.getByRole('button', { name: 'Create a probe VM' }).click();
    await page.locator('section.vm-view').waitFor();
    const vmId = (await page.locator('section.vm-view').getAttribute('data-vm-id'))!;
    expect(await page.getByTestId('status-line').textContent()).toMatch(/^Never started\. It cannot start here/);
    // The VM page's live knobs list the host's CPUs too (not "Host CPUs: .").
    expect(await page.locator('section.vm-view').textContent()).toContain(`Host CPUs: ${cpus.join(', ')}.`);

    // Start is disabled here (no KVM); a start that another client asks for fails all the same.
    expect(await page.locator('button[data-action="start"]').isDisabled()).toBe(true);
    const before = Date.now();
    await page.evaluate(async (id) => {
      const h = (globalThis as unknown as { __unhalt: { api: { startVm(id: string): Promise<unknown> } } }).__unhalt;
      await h.api.startVm(id).catch(() => {});
    }, vmId);
    const failure = page.getByTestId('start-failure');
    await failure.waitFor({ timeout: 15_000 });
    const said = (await failure.textContent())!;
    expect(said).toMatch(/^Start failed \(.+\): KVM is not usable on this host: UNHALT_KVM_DEVICE names \/nonexistent\/kvm, a path that does not exist\. To fix: unset UNHALT_KVM_DEVICE/);
    expect(await page.getByTestId('status-line').textContent()).toMatch(/^It has never started\. It cannot start here/);
    await page.screenshot({ path: shot('start-failed'), fullPage: true });

    await page.reload();
    await page.locator(`section.vm-view[data-vm-id="${vmId}"]`).waitFor();
    await failure.waitFor();
    expect(await failure.textContent()).toBe(said);
    // The time shown is the failed start's, in this browser's locale (to the second).
    const shown = /^Start failed \((.+?)\):/.exec(said)![1]!;
    const matches = await page.evaluate(([lo, hi, s]) => {
      for (let t = Math.floor(lo / 1000) * 1000; t <= hi + 1000; t += 1000) if (new Date(t).toLocaleString() === s) return true;
      return false;
    }, [before, Date.now(), shown] as [number, number, string]);
    expect(matches, `"${shown}" is the time of the start`).toBe(true);
  });
});

describe('a link with a wrong or missing key', () => {
  const app = useApp({ width: 1200, height: 900, env: { UNHALT_KVM_DEVICE: NO_KVM } });

  it('says the key is wrong and how to get a good one, instead of "retrying" for ever', async () => {
    const { page } = app;
    const good = new URL(app.url);
    const wrong = new URL(good);
    wrong.searchParams.set('token', `${good.searchParams.get('token')!.slice(0, -4)}abcd`);
    await page.goto(wrong.href);
    const banner = page.getByTestId('connection-banner');
    await waitFor('the wrong-key banner', async () => (await banner.getAttribute('data-state')) === 'refused', 15_000);
    const text = (await banner.textContent())!;
    expect(text).toMatch(/^Wrong key\. This link's key is wrong: this Unhalt server does not accept the token in its address/);
    expect(text).toContain('Open the address `unhalt serve` printed when it started');
    expect(text).toContain('run/host-token');
    expect(text).not.toContain('retrying');
    await page.screenshot({ path: shot('wrong-key'), fullPage: true });
    // It stays so (no flicker back to "connecting" while the tab keeps trying).
    await page.waitForTimeout(1500);
    expect(await banner.getAttribute('data-state')).toBe('refused');

    const none = new URL(good);
    none.search = '';
    await page.goto(none.href);
    await waitFor('the no-key banner', async () => (await banner.getAttribute('data-state')) === 'refused', 15_000);
    expect(await banner.textContent()).toMatch(/^Wrong key\. This link has no key: Unhalt's address needs the \?token=… that `unhalt serve` prints\. Open the address/);

    // The good link works, and the banner goes.
    await page.goto(good.href);
    await page.getByRole('button', { name: 'Create a probe VM' }).waitFor();
    await waitFor('no connection banner', async () => (await banner.count()) === 0, 15_000);
  });
});

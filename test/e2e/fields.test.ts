// The wizard's and the live knobs' fields, used as a person uses them (keyboard.type, clicks, Tab
// to leave a field) in headless Chromium against host mode:
// - typed numbers stay what was typed (clearing a field never snaps it to its minimum, so "512"
//   is 512 MiB and "4" is 4 vCPUs);
// - bad values are refused at the field, saying why in the API's words (pin lists, halt polling,
//   an own kernel the service would refuse), and cpu-pm=on shows kvm-pv-unhalt as the guest gets it;
// - a live knob change shows on the VM page and in the library as "this run only", until saved.
// - host facts arriving late (a slow host) never replace the field the user is typing in.
// Screenshots of each fixed state go to test/artifacts/ui-fields/.
import { describe, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import type { Page } from 'playwright-core';
import { artifact, skipReason, typeInto, useApp, waitFor } from './support.ts';
import { scaled } from '../support/time-scale.ts';

/** Type, then Tab out of the field, so its blur-time check runs. */
const LEAVE = { leave: true, delay: 25 };

const reason = skipReason();
if (reason) console.warn(`[e2e] skipped: ${reason}`);

const step = (page: Page) => page.locator('form.step-panel').getAttribute('data-step');

async function next(page: Page, times = 1): Promise<void> {
  for (let i = 0; i < times; i++) {
    const before = await step(page);
    await page.locator('button[data-action="next"]').click();
    await waitFor(`the step after ${before}`, async () => (await step(page)) !== before, 10_000);
  }
}

/** Empties a field the way a person does: click into it, select everything, delete. */
async function clear(page: Page, label: string): Promise<void> {
  await page.getByLabel(label, { exact: true }).click();
  await page.keyboard.press('Control+A');
  await page.keyboard.press('Backspace');
}

const value = (page: Page, label: string) => page.getByLabel(label, { exact: true }).inputValue();
/** The message under the field labelled `label` (its aria-describedby error), or ''. */
async function fieldError(page: Page, label: string): Promise<string> {
  const input = page.getByLabel(label, { exact: true });
  if ((await input.getAttribute('aria-invalid')) !== 'true') return '';
  const ids = (await input.getAttribute('aria-describedby')) ?? '';
  for (const id of ids.split(' ')) {
    const el = page.locator(`[id="${id}"].field-error`);
    if (await el.count()) return (await el.textContent())!.trim();
  }
  return '';
}

async function openWizard(page: Page, url: string): Promise<void> {
  await page.goto(url);
  await page.getByRole('button', { name: 'New VM', exact: true }).click();
  await page.getByRole('heading', { name: 'New virtual machine' }).waitFor();
}

async function finishWizard(page: Page): Promise<string> {
  while ((await step(page)) !== 'summary') await next(page);
  await page.getByTestId('cmdline').waitFor({ timeout: 15_000 });
  await page.locator('button[data-action="create"]').click();
  await page.locator('section.vm-view').waitFor();
  return (await page.locator('section.vm-view').getAttribute('data-vm-id'))!;
}

describe.skipIf(reason !== null)('fields keep what is typed and say what is wrong', () => {
  const suffix = randomBytes(2).toString('hex');
  let typedVm = '';

  const app = useApp({ width: 1440, height: 1300 });

  it('typed numbers are kept as typed: clearing never snaps to the minimum, "512" is 512 MiB and "4" is 4 vCPUs', async () => {
    const { page } = app;
    await openWizard(page, app.url);
    await typeInto(page, 'Name', `typed-${suffix}`, LEAVE);
    await next(page);
    expect(await step(page)).toBe('resources');

    await clear(page, 'vCPUs');
    expect(await value(page, 'vCPUs')).toBe('');
    await page.keyboard.type('4', { delay: 25 });
    expect(await value(page, 'vCPUs')).toBe('4');
    await clear(page, 'Memory (MiB)');
    expect(await value(page, 'Memory (MiB)')).toBe('');
    await page.keyboard.type('512', { delay: 25 });
    expect(await value(page, 'Memory (MiB)')).toBe('512');
    await page.keyboard.press('Tab');
    expect(await fieldError(page, 'vCPUs')).toBe('');
    expect(await fieldError(page, 'Memory (MiB)')).toBe('');

    // An empty field left with Tab says so at the field, and Next stays on the step.
    await clear(page, 'vCPUs');
    await page.keyboard.press('Tab');
    expect(await fieldError(page, 'vCPUs')).toBe('cpus is empty: give a whole number from 1 to 254');
    await page.locator('button[data-action="next"]').click();
    await page.waitForTimeout(300);
    expect(await step(page)).toBe('resources');
    await page.screenshot({ path: artifact('ui-fields/numbers-empty-field.png'), fullPage: true });
    await page.getByLabel('vCPUs', { exact: true }).click();
    await page.keyboard.type('4', { delay: 25 });
    await page.keyboard.press('Tab');
    expect(await fieldError(page, 'vCPUs')).toBe('');
    await page.screenshot({ path: artifact('ui-fields/numbers-typed.png'), fullPage: true });

    while ((await step(page)) !== 'summary') await next(page);
    await expect(page.locator('.summary').textContent()).resolves.toContain('4 / 512 MiB');
    typedVm = await finishWizard(page);
    await page.getByRole('button', { name: 'Library', exact: true }).click();
    const card = page.locator(`li.vm-card[data-vm-id="${typedVm}"]`);
    await card.waitFor();
    expect(await card.locator('[data-knob="vCPUs"] dd').textContent()).toBe('4');
    expect(await card.locator('[data-knob="memory"] dd').textContent()).toBe('512 MiB');
  }, scaled(90_000));

  it('bad values are refused at the field, in the API\'s words', async () => {
    const { page } = app;
    await openWizard(page, app.url);
    await typeInto(page, 'Name', `cpupm-${suffix}`, LEAVE);

    // An own kernel the service would refuse is refused when the field is left, not at Create.
    await page.getByRole('radio', { name: /Own kernel/ }).click();
    await typeInto(page, 'Kernel', '/etc/passwd', LEAVE);
    const kernelError = await waitFor('the kernel field\'s message', () => fieldError(page, 'Kernel'), 10_000);
    expect(kernelError).toMatch(/^kernel \/etc\/passwd is outside the folders Unhalt may give to a guest/);
    await page.locator('button[data-action="next"]').click();
    await page.waitForTimeout(500);
    expect(await step(page)).toBe('basics');
    await page.screenshot({ path: artifact('ui-fields/kernel-refused.png'), fullPage: true });
    await page.getByRole('radio', { name: /Probe/ }).click();
    await next(page, 5);

    // cpu-pm=on: kvm-pv-unhalt shows what the guest gets (off), not its machine default.
    expect(await step(page)).toBe('overcommit');
    await page.getByRole('switch', { name: /^cpu-pm/ }).click();
    await page.getByRole('button', { name: 'Back' }).click();
    const pv = page.getByRole('switch', { name: /^kvm-pv-unhalt/ });
    expect(await pv.isChecked()).toBe(false);
    const pvItem = page.locator('li', { has: pv });
    await expect(pvItem.textContent()).resolves.toContain('cpu-pm=on turned kvm-pv-unhalt off');
    await pvItem.screenshot({ path: artifact('ui-fields/pv-unhalt-with-cpu-pm.png') });
    await next(page, 2);

    // Halt polling: a value the API takes passes (no browser bubble); one it refuses says why.
    expect(await step(page)).toBe('halt-poll');
    await page.getByRole('radio', { name: /This VM's own maximum/ }).click();
    await typeInto(page, 'Maximum poll time (ns)', '-5', LEAVE);
    expect(await fieldError(page, 'Maximum poll time (ns)')).toBe('halt-poll-ns must be between 0 and 1000000000, got -5');
    await page.screenshot({ path: artifact('ui-fields/halt-poll-refused.png'), fullPage: true });
    await typeInto(page, 'Maximum poll time (ns)', '1500', LEAVE);
    expect(await fieldError(page, 'Maximum poll time (ns)')).toBe('');
    await next(page);

    // A pin list that does not parse keeps what was typed and says why; Next stays.
    expect(await step(page)).toBe('pinning');
    await typeInto(page, 'Or type a list', 'abc', LEAVE);
    expect(await value(page, 'Or type a list')).toBe('abc');
    expect(await fieldError(page, 'Or type a list')).toBe('pin: "abc" is not a host CPU number or range (e.g. 0,1 or 0-3)');
    await page.locator('button[data-action="next"]').click();
    await page.waitForTimeout(300);
    expect(await step(page)).toBe('pinning');
    await page.screenshot({ path: artifact('ui-fields/pin-refused.png'), fullPage: true });
    await typeInto(page, 'Or type a list', '0', LEAVE);
    expect(await fieldError(page, 'Or type a list')).toBe('');

    const id = await finishWizard(page);
    await page.getByRole('button', { name: 'Library', exact: true }).click();
    const card = page.locator(`li.vm-card[data-vm-id="${id}"]`);
    await card.waitFor();
    expect(await card.locator('[data-knob="cpu-pm"] dd').textContent()).toBe('on');
    expect(await card.locator('[data-knob="pv-unhalt"] dd').textContent()).toBe('off');
    expect(await card.locator('[data-knob="halt-poll"] dd').textContent()).toBe('1.5 µs');
    await card.screenshot({ path: artifact('ui-fields/library-card-cpu-pm.png') });
  }, scaled(90_000));

  it('a live knob change shows on the VM page and in the library as "this run only", until it is saved', async () => {
    const { page } = app;
    const card = page.locator(`li.vm-card[data-vm-id="${typedVm}"]`);
    await card.getByRole('button', { name: 'Open' }).click();
    await page.locator('section.vm-view').waitFor();
    await page.locator('button[data-action="start"]').click();
    await waitFor('the VM to run', async () => (await page.getByTestId('vm-state').first().textContent()) === 'running', 30_000);
    const knob = (scope: string) => page.locator(`${scope} [data-knob="halt-poll"] dd`);
    const before = (await knob('section.vm-view').textContent())!;

    // The live pin field refuses at the field, not by greying Apply out.
    await typeInto(page, 'Pin vCPUs to host CPUs', 'abc', LEAVE);
    expect(await fieldError(page, 'Pin vCPUs to host CPUs')).toBe('pin: "abc" is not a host CPU number or range (e.g. 0,1 or 0-3)');
    await page.screenshot({ path: artifact('ui-fields/live-pin-refused.png'), fullPage: true });

    await page.getByRole('group', { name: 'Halt polling presets' }).getByRole('button', { name: '1 ms' }).click();
    await waitFor('the VM page to show 1 ms for this run', async () => (await knob('section.vm-view').textContent()) === '1 ms (this run only)', 10_000);
    await expect(page.getByTestId('halt-poll-now').textContent()).resolves.toMatch(/^Now: 1 ms this run only · saved: /);
    await page.screenshot({ path: artifact('ui-fields/live-knob-vm-page.png'), fullPage: true });
    // The VM page's whole configuration says it too.
    await expect(page.getByTestId('config-panel').textContent()).resolves.toMatch(/Halt polling1 ms \(this run only; saved: /);

    await page.getByRole('button', { name: 'Library', exact: true }).click();
    await waitFor('the library card to show 1 ms for this run', async () => (await knob(`li.vm-card[data-vm-id="${typedVm}"]`).textContent()) === '1 ms (this run only)', 10_000);
    await page.locator(`li.vm-card[data-vm-id="${typedVm}"]`).screenshot({ path: artifact('ui-fields/live-knob-library.png') });

    // Saved, it is the VM's setting: no longer "this run only", everywhere.
    await page.locator(`li.vm-card[data-vm-id="${typedVm}"]`).getByRole('button', { name: 'Open' }).click();
    await page.getByRole('button', { name: 'Save to the VM' }).first().click();
    await waitFor('the VM page to show 1 ms as saved', async () => (await knob('section.vm-view').textContent()) === '1 ms', 10_000);
    expect(before).not.toBe('1 ms');
    await expect(page.getByTestId('halt-poll-now').textContent()).resolves.toMatch(/^Configured: 1 ms/);
    await page.screenshot({ path: artifact('ui-fields/live-knob-saved.png'), fullPage: true });
    await page.getByRole('button', { name: 'Library', exact: true }).click();
    await waitFor('the library card to show 1 ms as saved', async () => (await knob(`li.vm-card[data-vm-id="${typedVm}"]`).textContent()) === '1 ms', 10_000);

    await page.locator(`li.vm-card[data-vm-id="${typedVm}"]`).getByRole('button', { name: 'Open' }).click();
    await page.locator('button[data-action="force-stop"]').click();
    await page.locator('button[data-action="confirm-force-stop"]').click();
    await waitFor('the VM to stop', async () => (await page.getByTestId('vm-state').first().textContent()) === 'stopped', 30_000);
    expect(app.errors.filter((e) => !/favicon|WebSocket/.test(e))).toEqual([]);
  }, scaled(120_000));
});

// Host facts that arrive late: a host whose KVM reads as hardware-backed (no PVM module at that
// path) defaults to the Linux guest, so its default name differs from the one shown before them.
describe.skipIf(reason !== null)('late host facts', () => {
  const suffix = randomBytes(2).toString('hex');
  const app = useApp({ width: 1440, height: 1300, env: { UNHALT_PVM_MODULE_PATH: '/nonexistent/kvm_pvm' } });

  it('host facts that arrive while a field is being typed in leave that field to the user', async () => {
    // A slow host (the nested lane's L1, a loaded machine) answers `host` after the wizard opened.
    // Hold that answer, select the Name field's text, then let it through: the name typed next is
    // the name, not the host's default name ("probe" before, "linux" after) with a letter eaten.
    const page = app.page;
    const held: (() => void)[] = [];
    let holding = true;
    await page.routeWebSocket(/\/api\?token=/, (ws) => {
      const server = ws.connectToServer();
      const hostCalls = new Set<number>();
      ws.onMessage((m) => {
        const msg = JSON.parse(String(m)) as { id: number; method: string };
        if (msg.method === 'host') hostCalls.add(msg.id);
        server.send(m);
      });
      server.onMessage((m) => {
        const msg = JSON.parse(String(m)) as { id?: number };
        if (holding && msg.id !== undefined && hostCalls.has(msg.id)) held.push(() => ws.send(m));
        else ws.send(m);
      });
    });
    await openWizard(page, app.url);
    await waitFor('the host answer held', async () => held.length > 0, 15_000);
    const linux = page.getByRole('radio', { name: /^Linux/ });
    expect(await linux.isDisabled(), 'no host facts yet: the Linux guest is not known to be built').toBe(true);
    await page.getByLabel('Name', { exact: true }).click();
    await page.keyboard.press('Control+A');
    holding = false;
    for (const send of held.splice(0)) send();
    await waitFor('the host facts in the wizard', async () => !(await linux.isDisabled()), 15_000);
    await page.keyboard.press('Backspace');
    await page.keyboard.type(`late-${suffix}`, { delay: 10 });
    expect(await value(page, 'Name')).toBe(`late-${suffix}`);
    await page.screenshot({ path: artifact('ui-fields/late-host-name-kept.png'), fullPage: true });
  }, scaled(60_000));
});

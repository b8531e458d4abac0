// End to end, in headless Chromium against host mode: a user chooses user networking in the
// wizard's Network part (step 3, "Storage & network"), adds a host port forward and types it in — a malformed host port
// is refused at the field, when it is left, in the schema rule's own words, and holds Next back —
// sees `--net user,hostfwd=...` in the equivalent command line, creates the VM (the probe's
// net-listen scenario), is told in one line why Start fails while something else holds the host
// port, then starts it; a connection from the test to 127.0.0.1:HOSTPORT reaches the guest as a
// SYN on its port (the guest's console says so). Edited again, the VM shows its forward in the
// fields and keeps it through a save. A tap is chosen by name: a name no interface can have is
// refused at the field, forwards typed before survive switching modes, and an interface that is
// not a tap is refused at start in one line. Typed and clicked as a person does; screenshots in
// test/artifacts/wizard-net/.
import { describe, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import { connect, createServer, type Server } from 'node:net';
import type { Page } from 'playwright-core';
import { checkForwardPort, macForVm, parseNetOption } from '../../electron/vmm/config/net-config.ts';
import { freePort } from '../support/free-port.ts';
import { scaled } from '../support/time-scale.ts';
import { artifact, hook, skipReason, typeInto, useApp, waitFor } from './support.ts';

const reason = skipReason();
if (reason) console.warn(`[e2e] skipped: ${reason}`);

const shot = (name: string) => artifact(`wizard-net/${name}.png`);
const step = (page: Page) => page.locator('form.step-panel').getAttribute('data-step');
const GUEST_PORT = 8123;

async function next(page: Page): Promise<void> {
  const before = await step(page);
  await page.locator('button[data-action="next"]').click();
  await waitFor(`the step after ${before}`, async () => (await step(page)) !== before, 10_000);
}

function listenOn(port: number): Promise<Server> {
  return new Promise((resolve, reject) => {
    const s = createServer((sock) => sock.destroy());
    s.once('error', reject);
    s.listen({ port, host: '127.0.0.1', exclusive: true }, () => resolve(s));
  });
}

/** The rule's own message for a port value (what the field must say). */
function portRule(v: unknown, which: 'host' | 'guest', forward: number): string {
  try {
    checkForwardPort(v, which, `forward ${forward}`);
  } catch (e) {
    return (e as Error).message;
  }
  throw new Error(`${String(v)} passes the port rule`);
}

describe.skipIf(reason !== null)('the network chosen in the wizard', () => {
  const app = useApp({ width: 1440, height: 1600 });

  it('a forward typed in the wizard: refused while malformed, in the command line, refused at start while the port is taken, then a host connection reaches the guest; kept through an edit', async () => {
    const { page } = app;
    const hostPort = await freePort();
    const net = `user,hostfwd=tcp:127.0.0.1:${hostPort}-:${GUEST_PORT}`;

    await app.goto();
    await page.getByRole('button', { name: 'New VM', exact: true }).click();
    await page.getByRole('heading', { name: 'New virtual machine' }).waitFor();
    const name = `net-${randomBytes(2).toString('hex')}`;
    await typeInto(page, 'Name', name);
    await page.getByRole('radio', { name: /Probe/ }).check();
    await page.getByLabel('Scenario', { exact: true }).selectOption('net-listen');
    await typeInto(page, 'Parameters', `port=${GUEST_PORT} wait_ms=60000`);
    await next(page);
    await next(page);
    expect(await step(page)).toBe('storage');

    // Network: user networking, one forward; the host address comes filled in as 127.0.0.1.
    await page.getByRole('radio', { name: /User networking \(NAT\)/ }).click();
    await page.getByText('No host port forwards').waitFor();
    await page.getByRole('button', { name: 'Add a port forward' }).click();
    const hostAddress = page.getByLabel('Forward 1 host address', { exact: true });
    expect(await hostAddress.inputValue()).toBe('127.0.0.1');
    const mac = macForVm(name);
    expect(await page.getByTestId('net-mac').textContent()).toContain(`MAC ${mac}`);
    expect(await page.getByLabel('Forward 1 protocol', { exact: true }).inputValue()).toBe('tcp');

    // A malformed host port, typed where the focus went (the one field left to fill): nothing said
    // while typing, the rule's words when the field is left.
    const hostPortField = page.getByLabel('Forward 1 host port', { exact: true });
    await waitFor('the focus on the new forward\'s host port', () => hostPortField.evaluate((e) => e === e.ownerDocument.activeElement), 5_000);
    await page.keyboard.type(`${hostPort}x`, { delay: 10 });
    expect(await page.getByText(portRule(`${hostPort}x`, 'host', 1)).count()).toBe(0);
    await page.keyboard.press('Tab');
    await page.getByText(portRule(`${hostPort}x`, 'host', 1), { exact: true }).waitFor();
    expect(await hostPortField.getAttribute('aria-invalid')).toBe('true');
    await typeInto(page, page.getByLabel('Forward 1 guest port', { exact: true }), '0', { leave: true });
    await page.getByText(portRule(0, 'guest', 1), { exact: true }).waitFor();
    await page.screenshot({ path: shot('wizard-bad-port'), fullPage: true });
    // Next holds at this step, the focus on the first bad field.
    await page.locator('button[data-action="next"]').click();
    await new Promise((r) => setTimeout(r, 300));
    expect(await step(page)).toBe('storage');
    await waitFor('the focus on the bad host port', () => hostPortField.evaluate((e) => e === e.ownerDocument.activeElement), 5_000);

    // Typed right: the messages go.
    await typeInto(page, hostPortField, String(hostPort), { leave: true });
    await typeInto(page, page.getByLabel('Forward 1 guest port', { exact: true }), String(GUEST_PORT), { leave: true });
    await waitFor('no port message left', async () => (await page.getByText(/port must be 1 to 65535/).count()) === 0, 5_000);
    // The step itself shows its equivalent command line, the forward in it.
    await waitFor('the forward in the step\'s command line', async () => ((await page.getByTestId('step-cmdline').textContent({ timeout: 1_000 }).catch(() => '')) ?? '').includes(`--net ${net}`), 15_000);
    await page.screenshot({ path: shot('wizard-network'), fullPage: true });

    while ((await step(page)) !== 'summary') await next(page);
    const cmd = page.getByTestId('cmdline');
    await cmd.waitFor({ timeout: scaled(15_000) });
    await waitFor('the forward in the command line', async () => ((await cmd.textContent()) ?? '').includes(`--net ${net}`), 15_000);
    expect(await page.locator('dl.summary').textContent()).toContain(`Network${net}`);
    await page.screenshot({ path: shot('wizard-summary'), fullPage: true });
    await page.locator('button[data-action="create"]').click();
    await page.locator('section.vm-view').waitFor();
    const vmId = (await page.locator('section.vm-view').getAttribute('data-vm-id'))!;
    const panel = page.getByTestId('config-panel');
    expect(await panel.textContent()).toContain(`Network${net}`);

    // Something else holds the host port: Start is refused in one line naming it, nothing runs.
    const squatter = await listenOn(hostPort);
    try {
      await page.locator('button[data-action="start"]').click();
      const notice = page.locator('.notice-error', { hasText: `host port ${hostPort} (tcp on 127.0.0.1) is already in use` });
      await notice.waitFor({ timeout: scaled(30_000) });
      // The action and the VM named once, then the cause.
      expect(await notice.locator('span').textContent())
        .toBe(`start ${name}: host port ${hostPort} (tcp on 127.0.0.1) is already in use or cannot be bound: hostfwd=tcp:127.0.0.1:${hostPort}-:${GUEST_PORT} (EADDRINUSE)`);
      await page.screenshot({ path: shot('start-refused'), fullPage: true });
      expect(await page.getByTestId('vm-state').first().textContent()).toBe('stopped');
    } finally {
      await new Promise((r) => squatter.close(r));
    }
    await page.getByRole('button', { name: 'Dismiss' }).first().click();

    // Free again: the guest listens, and a connection to the host port reaches it as a SYN.
    await page.locator('button[data-action="start"]').click();
    await waitFor('the guest to listen', async () => (await hook<string>(page, 'consoleText', vmId)).includes(`listening on ${GUEST_PORT}`), 60_000);
    const sock = connect(hostPort, '127.0.0.1');
    sock.on('error', () => {});
    try {
      const text = await waitFor('the guest to see the SYN', async () => {
        const t = await hook<string>(page, 'consoleText', vmId);
        return t.includes(`tcp SYN on ${GUEST_PORT}: yes`) ? t : undefined;
      }, 30_000);
      expect(text).toContain('dhcp offer 10.0.2.15');
      // The card the guest found has the MAC the wizard showed.
      expect(text).toMatch(new RegExp(`virtio-net 00:03\\.0 mac ${mac} link up`));
    } finally {
      sock.destroy();
    }
    await waitFor('the VM to power off', async () => (await page.getByTestId('vm-state').first().textContent()) === 'stopped', 30_000);
    await page.screenshot({ path: shot('console'), fullPage: true });

    // Edit: the network is in the fields as saved, and a save keeps it.
    await page.locator('button[data-action="edit"]').click();
    await page.getByRole('heading', { name: `Edit ${name}`, level: 1 }).waitFor();
    await next(page);
    await next(page);
    expect(await step(page)).toBe('storage');
    expect(await page.getByRole('radio', { name: /User networking \(NAT\)/ }).isChecked()).toBe(true);
    expect(await page.getByLabel('Forward 1 host port', { exact: true }).inputValue()).toBe(String(hostPort));
    expect(await page.getByLabel('Forward 1 guest port', { exact: true }).inputValue()).toBe(String(GUEST_PORT));
    expect(await page.getByLabel('Forward 1 host address', { exact: true }).inputValue()).toBe('127.0.0.1');
    expect(await page.getByLabel('Forward 1 guest address', { exact: true }).inputValue()).toBe('');
    await page.screenshot({ path: shot('edit-network'), fullPage: true });
    while ((await step(page)) !== 'summary') await next(page);
    await waitFor('the forward in the edit\'s command line', async () => ((await page.getByTestId('cmdline').textContent()) ?? '').includes(`--net ${net}`), 15_000);
    await page.locator('button[data-action="save"]').click();
    await page.getByRole('heading', { name, level: 1 }).waitFor();
    const saved = await hook<{ vms: { id: string; config: Record<string, unknown> }[] }>(page, 'state');
    expect(saved.vms.find((v) => v.id === vmId)!.config.net).toEqual(parseNetOption(net));
    expect(await panel.textContent()).toContain(`Network${net}`);
  }, scaled(300_000));

  it('a tap by name: a bad name refused at the field, forwards kept while switching modes, an interface that is no tap refused at start in one line', async () => {
    const { page } = app;
    // An interface every host has and that is no tap (a name no interface has would be created by a
    // service with CAP_NET_ADMIN — on this host's own network — so the test does not ask for one).
    const tap = 'lo';
    await app.goto();
    await page.getByRole('button', { name: 'New VM', exact: true }).click();
    await page.getByRole('heading', { name: 'New virtual machine' }).waitFor();
    const name = `tap-${randomBytes(2).toString('hex')}`;
    await typeInto(page, 'Name', name);
    await page.getByRole('radio', { name: /Probe/ }).check();
    await page.getByLabel('Scenario', { exact: true }).selectOption('net-dhcp');
    await next(page);
    await next(page);
    expect(await step(page)).toBe('storage');

    // Forwards typed under user networking survive a switch to a tap and back.
    await page.getByRole('radio', { name: /User networking \(NAT\)/ }).click();
    await page.getByRole('button', { name: 'Add a port forward' }).click();
    await typeInto(page, page.getByLabel('Forward 1 host port', { exact: true }), '2222');
    await typeInto(page, page.getByLabel('Forward 1 guest port', { exact: true }), '22', { leave: true });
    // Every interface: allowed, and said what it means.
    await typeInto(page, page.getByLabel('Forward 1 host address', { exact: true }), '0.0.0.0', { leave: true });
    await page.getByText('Listens on every host interface', { exact: false }).waitFor();
    await page.getByRole('radio', { name: /A TAP device by name/ }).click();
    expect(await page.getByLabel('Forward 1 host port', { exact: true }).count()).toBe(0);
    await page.getByRole('radio', { name: /User networking \(NAT\)/ }).click();
    expect(await page.getByLabel('Forward 1 host port', { exact: true }).inputValue()).toBe('2222');
    await page.getByRole('radio', { name: /A TAP device by name/ }).click();

    // A name no interface can have: the tap rule's words at the field once it is left.
    const tapField = page.getByLabel('TAP interface name', { exact: true });
    await typeInto(page, tapField, 'tap/0', { leave: true });
    await page.getByText('tap "tap/0" is not an interface name (at most 15 letters, digits, dot, dash or underscore)', { exact: true }).waitFor();
    await page.screenshot({ path: shot('wizard-tap-bad-name'), fullPage: true });
    await typeInto(page, tapField, tap, { leave: true });
    await waitFor('the tap message gone', async () => (await page.getByText(/is not an interface name/).count()) === 0, 5_000);

    while ((await step(page)) !== 'summary') await next(page);
    const cmd = page.getByTestId('cmdline');
    await waitFor('the tap in the command line', async () => {
      const t = (await cmd.textContent()) ?? '';
      return t.includes(`--net tap=${tap}`) && !t.includes('hostfwd') ? t : undefined;
    }, 15_000);
    expect(await page.locator('dl.summary').textContent()).toContain(`Networktap=${tap}`);
    await page.locator('button[data-action="create"]').click();
    await page.locator('section.vm-view').waitFor();
    expect(await page.getByTestId('config-panel').textContent()).toContain(`Networktap=${tap}`);

    // Not a tap: Start says so in one line, with what to do; nothing runs.
    await page.locator('button[data-action="start"]').click();
    const notice = page.locator('.notice-error', { hasText: `${tap} is a network interface but not a tap` });
    await notice.waitFor({ timeout: scaled(30_000) });
    expect(await notice.locator('span').textContent())
      .toBe(`start ${name}: ${tap} is a network interface but not a tap (no TUN/TAP flags): give the name of a tap device`);
    expect(await page.getByTestId('vm-state').first().textContent()).toBe('stopped');
    await page.screenshot({ path: shot('start-refused-tap'), fullPage: true });
  }, scaled(180_000));
});

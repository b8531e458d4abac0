// The compare view and the advisor on a VM of the user's library, with the user's own benchmark,
// as a person does it (typing and clicking, headless Chromium against host mode): Run on the VM,
// "My own command" — a load generator on this machine against the VM's forwarded port — with its
// metric, ready line and unit, saved by name; the command is shown in full and runs only once the
// code `unhalt serve` printed on its terminal is typed (a wrong one is refused); the A/B of halt
// polling gives two rows and a verdict, the header names the VM and the benchmark, the VM's disk
// is unchanged; the advisor on the VM page offers the saved benchmark and starts on it. Real VMs.
import { createHash } from 'node:crypto';
import { readFileSync, truncateSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { LibraryStore } from '../../electron/service/library-store.ts';
import { parseNetOption } from '../../electron/vmm/config/net-config.ts';
import { validateConfig } from '../../electron/vmm/config/vm-config.ts';
import { freePort } from '../support/free-port.ts';
import { artifact, skipReason, typeInto, useApp, waitFor } from './support.ts';
import { scaled } from '../support/time-scale.ts';

const reason = skipReason();
if (reason) console.warn(`[e2e compare-own] skipped: ${reason}`);

const sha = (f: string) => createHash('sha256').update(readFileSync(f)).digest('hex');
const node = process.execPath;
let port = 0;
let disk = '';
let client = '';

describe.skipIf(reason !== null)('the compare view on a library VM with my own benchmark', () => {
  const app = useApp({
    width: 1500, height: 1600,
    prepare: async (home) => {
      port = await freePort();
      disk = join(home, 'web.img');
      writeFileSync(disk, Buffer.alloc(1 << 20, 0x5a));
      truncateSync(disk, 1 << 20);
      // The user's load generator: connect through the forward, time until the guest's answer closes it.
      client = join(home, 'client.mjs');
      writeFileSync(client, [
        "import { connect } from 'node:net';",
        'const t0 = performance.now();',
        "const s = connect(Number(process.argv[2]), '127.0.0.1');",
        "s.on('error', () => {});",
        "s.on('close', () => { console.log(`latency_ms=${(performance.now() - t0).toFixed(3)}`); });",
        'setTimeout(() => s.destroy(), 20000).unref();',
      ].join('\n'));
      const store = await LibraryStore.open(home);
      const now = Date.now();
      await store.mutate((vms) => {
        vms.push({ id: 'vm-web', createdAt: now, updatedAt: now, config: validateConfig({
          name: 'web', guest: 'probe', cpus: 1, append: 'scenario=net-listen port=8080 wait_ms=60000',
          net: parseNetOption(`user,hostfwd=tcp:127.0.0.1:${port}-:8080`), disks: [{ path: disk }],
        }) });
      });
    },
  });

  it('runs an A/B of halt polling with a host command confirmed by the code from the terminal; saves it for the advisor', async () => {
    const { page } = app;
    const before = sha(disk);
    await app.goto('#/compare');
    await page.getByRole('heading', { name: 'Compare configurations' }).waitFor();
    await page.getByLabel('Run on', { exact: true }).selectOption({ label: 'web' });
    await page.getByTestId('compare-on-vm').waitFor();
    await page.getByRole('radio', { name: 'My own command' }).click();
    // A probe VM has no agent: a guest command cannot be chosen.
    expect(await page.getByRole('radio', { name: /In the guest, through its agent \(this VM has no agent\)/ }).isDisabled()).toBe(true);
    // A bad metric is said at the field, in the service's words.
    await typeInto(page, 'Metric', 'latency_ms=[0-9.]+');
    await waitFor('the metric problem', async () => /exactly one capture group/.test(await page.getByTestId('own-metric-problem').textContent() ?? ''));
    await typeInto(page, 'Metric', 'latency_ms=([0-9.]+)');
    await typeInto(page, 'Command', `${node} ${client} ${port}`);
    await typeInto(page, 'Ready when the console prints', 'listening on 8080');
    await typeInto(page, 'Unit', 'ms');
    await typeInto(page, 'Save as workload', 'web-latency');
    await page.getByRole('button', { name: 'halt polling 0 vs default' }).click();
    // On a VM the presets are knob changes only (its own vCPU count stays).
    expect(await page.getByLabel('Configuration 1 config string').inputValue()).toBe('halt-poll-ns=0');
    await typeInto(page, 'Configuration 2 config string', 'halt-poll-ns=200000');
    await typeInto(page, 'Runs each', '2');
    await page.getByRole('button', { name: 'Run experiment' }).click();

    // The command in full, and a code this page was never told.
    const dialog = page.locator('dialog[data-confirm="host-command"]');
    await dialog.waitFor();
    expect(await dialog.getByTestId('host-command-shown').textContent()).toBe(`${node} ${client} ${port}`);
    const codes = () => [...app.host.output().matchAll(/type the code (\d{3}) (\d{3})/g)].map((m) => `${m[1]}${m[2]}`);
    const code = await waitFor('the code on the terminal', () => codes()[0]);
    // One request, one code: the dialog asked once.
    await page.waitForTimeout(500);
    expect(codes()).toEqual([code]);
    await page.screenshot({ path: artifact('ui-compare-own/confirm.png'), fullPage: true });
    await typeInto(page, dialog.getByLabel('Code'), code === '111111' ? '222222' : '111111');
    await dialog.getByRole('button', { name: 'Allow and run' }).click();
    await waitFor('the wrong code refused', async () => /wrong code/.test(await dialog.getByTestId('host-command-error').textContent() ?? ''));
    expect(await page.locator('.exp-list li').count()).toBe(0);
    await typeInto(page, dialog.getByLabel('Code'), `${code.slice(0, 3)} ${code.slice(3)}`);
    await dialog.getByRole('button', { name: 'Allow and run' }).click();

    const panel = page.locator('section.experiment');
    const state = await waitFor('the experiment to finish', async () => {
      const s = await panel.getAttribute('data-state');
      return s === 'running' ? '' : s;
    }, 300_000, 500);
    expect(state, await panel.textContent() ?? '').toBe('done');
    expect(await panel.getByRole('heading', { level: 2 }).first().textContent()).toBe('web · web-latency');
    expect(await panel.getByTestId('experiment-bench').textContent())
      .toBe(`benchmark: host command ${node} ${client} ${port} after the console printed /listening on 8080/; metric /latency_ms=([0-9.]+)/ in ms, lower is better`);
    const table = page.getByTestId('results-table');
    await table.waitFor();
    const rows = await table.locator('tbody tr').allTextContents();
    expect(rows).toHaveLength(2);
    expect(rows[0]).toContain('halt-poll 0');
    expect(rows[1]).toContain('halt-poll default');
    expect((await panel.textContent()) ?? '').toMatch(/\d\.\d+×/);
    await page.screenshot({ path: artifact('ui-compare-own/result.png'), fullPage: true });
    expect(sha(disk)).toBe(before);

    // The advisor on the VM page offers the saved benchmark; its goal follows the metric's direction.
    await app.goto('#/vm/vm-web');
    await page.getByRole('button', { name: 'Tune…' }).click();
    const tune = page.locator('section.tune-panel');
    await typeInto(page, tune.getByLabel('Workload', { exact: true }), 'web-latency');
    expect(await tune.getByLabel('Goal').inputValue()).toBe('latency-p50');
    // A budget the advisor accepts on any host (it refuses one it cannot finish a round in).
    await typeInto(page, tune.getByLabel('Budget', { exact: true }), '30m');
    await tune.getByRole('button', { name: 'Start tuning' }).click();
    await tune.getByRole('button', { name: 'Cancel tuning' }).waitFor({ timeout: scaled(30_000) });
    await tune.getByRole('button', { name: 'Cancel tuning' }).click();
    await waitFor('the tune to end', async () => (await tune.getByRole('button', { name: 'Cancel tuning' }).count()) === 0, 60_000);
    expect(sha(disk)).toBe(before);
  }, 600_000);
});

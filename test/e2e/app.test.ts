// End to end, in headless Chromium against host mode (`unhalt serve`): create a VM through the
// wizard on the probe guest (its echo shell), start it, type into the console and see the echo,
// see the halt-exits chart receive non-zero points, stop it, and find it again after the host
// process restarts. Screenshots of each view go to test/artifacts/.
import { describe, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import { SERVER_GONE, artifact, hook, launchBrowser, skipReason, typeInto, useApp, waitFor } from './support.ts';

const reason = skipReason();
if (reason) console.warn(`[e2e] skipped: ${reason}`);

interface TelemetryHook {
  points: number;
  vcpus: number;
  nonZeroHaltPoints: number;
  maxHaltExitsPerS: number;
}

describe.skipIf(reason !== null)('the app in host mode', () => {
  const vmName = `e2e-${randomBytes(3).toString('hex')}`;
  let vmId = '';

  const app = useApp({ width: 1440, height: 1300 });

  it('shows the empty library with the built-in guests offered', async () => {
    const { page } = app;
    await app.goto();
    await page.getByRole('heading', { name: 'No virtual machines yet' }).waitFor();
    await expect(page.getByRole('button', { name: 'Create a probe VM' }).isEnabled()).resolves.toBe(true);
    await page.screenshot({ path: artifact('library-empty.png'), fullPage: true });
  });

  it('creates a probe VM through the wizard', async () => {
    const { page } = app;
    await page.getByRole('button', { name: 'New VM', exact: true }).click();
    await page.getByRole('heading', { name: 'New virtual machine' }).waitFor();
    await typeInto(page, 'Name', vmName);
    await page.getByRole('radio', { name: /Probe/ }).check();
    await page.screenshot({ path: artifact('wizard-basics.png'), fullPage: true });
    const next = page.locator('button[data-action="next"]');
    const shots: Record<string, string> = { resources: 'wizard-resources.png', storage: 'wizard-storage-network.png', features: 'wizard-features.png', 'halt-poll': 'wizard-halt-polling.png' };
    for (let i = 0; i < 8; i++) {
      await next.click();
      const step = await page.locator('form.step-panel').getAttribute('data-step');
      if (step && shots[step]) await page.screenshot({ path: artifact(shots[step]!), fullPage: true });
    }
    await expect(page.locator('form.step-panel').getAttribute('data-step')).resolves.toBe('summary');
    const cmd = page.getByTestId('cmdline');
    await cmd.waitFor({ timeout: 15_000 });
    expect(await cmd.textContent()).toMatch(/unhalt run/);
    await page.screenshot({ path: artifact('wizard-summary.png'), fullPage: true });
    await page.locator('button[data-action="create"]').click();
    await page.locator('section.vm-view').waitFor();
    vmId = (await page.locator('section.vm-view').getAttribute('data-vm-id'))!;
    expect(vmId).toBeTruthy();
    await expect(page.getByRole('heading', { name: vmName, level: 1 }).isVisible()).resolves.toBe(true);
  });

  it('starts the VM and echoes a line typed into the console', async () => {
    const { page } = app;
    await page.locator('button[data-action="start"]').click();
    await waitFor('the VM to run', async () => (await page.getByTestId('vm-state').first().textContent()) === 'running', 30_000);
    await waitFor('the echo shell prompt', async () => (await hook<string>(page, 'consoleText', vmId)).includes('probe>'), 30_000);
    const line = `hello${randomBytes(4).toString('hex')}`;
    await page.getByTestId('console').click();
    await page.keyboard.type(line, { delay: 15 });
    await page.keyboard.press('Enter');
    const text = await waitFor('the echoed line', async () => {
      const t = await hook<string>(page, 'consoleText', vmId);
      return t.includes(`unknown command: ${line}`) ? t : '';
    }, 20_000);
    expect(text).toContain(`probe> ${line}`);
  });

  it('lets the keyboard leave the console (Shift+Tab) and reach the VM actions', async () => {
    const { page } = app;
    await page.getByTestId('console').click();
    const inTerminal = () => page.evaluate(() => !!(globalThis as unknown as { document: { activeElement: { closest(s: string): unknown } | null } })
      .document.activeElement?.closest('.term-host'));
    expect(await inTerminal()).toBe(true);
    await page.keyboard.press('Shift+Tab');
    expect(await inTerminal()).toBe(false);
    // Tab order from the top of the page reaches the Stop button (buttons, not divs).
    await page.locator('#vm-title').focus();
    let reached = false;
    for (let i = 0; i < 12 && !reached; i++) {
      await page.keyboard.press('Tab');
      reached = await page.evaluate(() => (globalThis as unknown as { document: { activeElement: { getAttribute(n: string): string | null } | null } })
        .document.activeElement?.getAttribute('data-action') === 'stop');
    }
    expect(reached).toBe(true);
    await page.getByTestId('console').click();
  });

  it('draws non-zero halt exits on the live chart', async () => {
    const { page } = app;
    const chart = page.locator('figure[data-chart="halt-exits"]');
    // Looked at, as a person does: a chart out of view does not draw (nor count its points).
    await chart.scrollIntoViewIfNeeded();
    // The echo shell halts between keystrokes: typing wakes it, and each wake-up is a halt exit.
    const nonZero = await waitFor('non-zero halt exits on the chart', async () => {
      const n = Number(await chart.getAttribute('data-nonzero-points') ?? 0);
      if (n > 0) return n;
      await page.keyboard.type('help', { delay: 20 });
      await page.keyboard.press('Enter');
      return 0;
    }, 30_000, 500);
    expect(nonZero).toBeGreaterThan(0);
    const t = await hook<TelemetryHook>(page, 'telemetry', vmId);
    expect(t.points).toBeGreaterThan(0);
    expect(t.maxHaltExitsPerS).toBeGreaterThan(0);
    // Let a few seconds of history accumulate for the screenshots.
    for (let i = 0; i < 6; i++) {
      await page.keyboard.type(i % 2 ? 'cpus' : 'help', { delay: 30 });
      await page.keyboard.press('Enter');
      await page.waitForTimeout(400);
    }
    // A live knob change is marked on the charts.
    const markersBefore = (await hook<{ markers: number }>(page, 'telemetry', vmId)).markers;
    await page.getByRole('group', { name: 'Halt polling presets' }).getByRole('button', { name: '0 (off)' }).click();
    await waitFor('the knob change to apply', async () => /applied/.test(await page.locator('.knob-msg').textContent() ?? ''), 10_000);
    await waitFor('a marker for the knob change', async () => (await hook<{ markers: number }>(page, 'telemetry', vmId)).markers > markersBefore, 10_000);
    for (let i = 0; i < 4; i++) {
      await page.getByTestId('console').click();
      await page.keyboard.type('help', { delay: 30 });
      await page.keyboard.press('Enter');
      await page.waitForTimeout(400);
    }
    // Charts export PNG (uPlot's canvas, with a title and legend).
    const [download] = await Promise.all([
      page.waitForEvent('download'),
      page.getByRole('button', { name: 'Export Halt exits per second as PNG' }).click(),
    ]);
    expect(download.suggestedFilename()).toMatch(/halt-exits\.png$/);
    await download.saveAs(artifact('chart-export-halt-exits.png'));
    // Guests write 80-column lines: the console keeps 80 columns in its column at this window
    // size by a smaller font, not by scrolling sideways.
    const size = await hook<{ cols: number; rows: number; fontSize: number }>(page, 'consoleSize', vmId);
    expect(size.cols, `console ${size.cols}x${size.rows} at ${size.fontSize} px`).toBeGreaterThanOrEqual(80);
    expect(size.fontSize).toBeGreaterThanOrEqual(10);
    const overflow = await page.locator('.term-host').first().evaluate((el) => el.scrollWidth - el.clientWidth);
    expect(overflow, 'the console scrolls sideways').toBeLessThanOrEqual(0);
    await page.screenshot({ path: artifact('vm-view.png'), fullPage: true });
    await page.locator('section.console-panel').screenshot({ path: artifact('console.png') });
    await page.locator('section.charts-panel').screenshot({ path: artifact('charts.png') });
  });

  it('shows the running VM in the library with its sparkline', async () => {
    const { page } = app;
    await page.getByRole('button', { name: 'Library', exact: true }).click();
    const card = page.locator(`li.vm-card[data-vm-id="${vmId}"]`);
    await card.waitFor();
    await expect(card.getAttribute('data-state')).resolves.toBe('running');
    await page.waitForTimeout(500);
    await page.screenshot({ path: artifact('library.png'), fullPage: true });
    await card.getByRole('button', { name: 'Open' }).click();
    await page.locator('section.vm-view').waitFor();
    // The console kept its scrollback across the view switch.
    expect(await hook<string>(page, 'consoleText', vmId)).toContain('unknown command: hello');
  });

  it('stops the VM', async () => {
    const { page } = app;
    await page.locator('button[data-action="stop"]').click();
    await waitFor('the VM to stop', async () => (await page.getByTestId('vm-state').first().textContent()) === 'stopped', 30_000);
    await expect(page.getByTestId('status-line').textContent()).resolves.toMatch(/Last run ended/);
  });

  it('finds the VM again after the host process restarts', async () => {
    const { page } = app;
    const code = await app.host.stop();
    expect(code).toBe(0);
    await app.startHost();
    await app.goto();
    const card = page.locator(`li.vm-card[data-vm-id="${vmId}"]`);
    await card.waitFor({ timeout: 15_000 });
    await expect(card.locator('.card-title').textContent()).resolves.toBe(vmName);
    await expect(card.getAttribute('data-state')).resolves.toBe('stopped');
    // The console log survived too: opening the VM shows the last run's output.
    await card.getByRole('button', { name: 'Open' }).click();
    await waitFor('the console log of the last run', async () => (await hook<string>(page, 'consoleText', vmId)).includes('unknown command: hello'), 15_000);
    await page.screenshot({ path: artifact('vm-after-restart.png'), fullPage: true });
    // While the server was down the page's connection and its key check failed to load: expected.
    expect(app.errors.filter((e) => !/favicon|WebSocket/.test(e) && !SERVER_GONE.test(e))).toEqual([]);
  });

  it('runs an A/B experiment in the compare view and shows the result table', async () => {
    const { page } = app;
    await page.getByRole('button', { name: 'Compare', exact: true }).click();
    await page.getByRole('heading', { name: 'Compare configurations' }).waitFor();
    await page.getByRole('button', { name: 'halt polling 0 vs default' }).click();
    await typeInto(page, 'Workload', 'pio');
    await typeInto(page, 'Workload parameters', 'count=5000');
    await typeInto(page, 'Runs each', '1');
    await page.getByLabel('Also under QEMU').uncheck();
    await page.getByRole('button', { name: 'Run experiment' }).click();
    const panel = page.locator('section.experiment');
    const state = await waitFor('the experiment to finish', async () => {
      const s = await panel.getAttribute('data-state');
      return s === 'done' || s === 'failed' ? s : '';
    }, 120_000, 500);
    expect(state, await panel.textContent() ?? '').toBe('done');
    const table = page.getByTestId('results-table');
    await table.waitFor();
    expect(await table.locator('tbody tr').count()).toBe(2);
    await page.screenshot({ path: artifact('compare.png'), fullPage: true });
  });

  it('renders the dark theme', async () => {
    const dark = await launchBrowser({ colorScheme: 'dark' });
    try {
      await dark.page.goto(app.url);
      await dark.page.locator(`li.vm-card[data-vm-id="${vmId}"]`).waitFor({ timeout: 15_000 });
      await expect(dark.page.evaluate(() => (globalThis as unknown as { document: { documentElement: { dataset: Record<string, string> } } })
        .document.documentElement.dataset.theme)).resolves.toBe('dark');
      await dark.page.screenshot({ path: artifact('library-dark.png'), fullPage: true });
      await dark.page.goto(`${app.url}#/vm/${vmId}`);
      await dark.page.locator('section.vm-view').waitFor();
      await dark.page.waitForTimeout(500);
      await dark.page.screenshot({ path: artifact('vm-view-dark.png'), fullPage: true });
      await dark.page.goto(`${app.url}#/compare`);
      await dark.page.getByRole('heading', { name: 'Compare configurations' }).waitFor();
      await dark.page.screenshot({ path: artifact('compare-dark.png'), fullPage: true });
    } finally {
      await dark.close();
    }
  });
});

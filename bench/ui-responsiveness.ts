// Renderer responsiveness in host mode. A 4-vCPU probe VM (scenario=idle: 1 ms LAPIC ticks with
// HLT between them) streams telemetry at 10 Hz to the VM view — the console and its live charts
// (counted on the page: the report says how many) — in headless Chromium, in two phases of
// --seconds each:
//   live:    the 1-minute window, the history the stream itself builds;
//   history: the 10-minute window over ten minutes of history (6000 rows per series: synthetic
//            rows loaded through the page's test hook, then the live stream continues on them).
// In the page, PerformanceObservers record main-thread long tasks ('longtask') and long animation
// frames; Chromium's Performance.getMetrics gives the main thread's busy time. Observers only: the
// measurement asks for no frames of its own.
// Target (issue 7): no main-thread long task over 50 ms. Measured and reported, not asserted.
// Phase `api` (issue 12) measures the other side, the server: while the page streams, another
// client pings the host-mode API while a VM with a 1 GiB sparse kernel file starts and while a
// flooding guest runs (test/support/api-pinger.ts: raw round trips, and less the runqueue waits
// over rounds where an idle control process answered at once). Target: within 50 ms throughout.
// The host's load average is reported too: on a busy 2-CPU host, other work stretches tasks.
//
//   node bench/ui-responsiveness.ts [--seconds 60] [--vcpus 4] [--phases live,history,api] [--json FILE] [--trace FILE]
import { parseArgs } from 'node:util';
import { copyFileSync, existsSync, truncateSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { cpus, loadavg } from 'node:os';
import type { Page } from 'playwright-core';
import { AppSession, skipReason, waitFor } from '../test/e2e/support.ts';
import { PROBE_KERNEL } from '../electron/vmm/guests.ts';
import { describePings, startControl, startPinger, type PingReport } from '../test/support/api-pinger.ts';
import { apiClient } from '../test/support/serve-child.ts';

const USAGE = `usage: node bench/ui-responsiveness.ts [--seconds 60] [--vcpus 4] [--phases live,history,api] [--json FILE] [--trace FILE]
  --seconds S     length of each phase
  --phases LIST   live (1-min window), history (10-min window over 6000 rows), api (the server's
                  answer time while a 1 GiB-kernel VM starts and while a guest floods)
  --trace FILE    also write a Chromium trace of the last phase (chrome://tracing, Perfetto)
  --devices       the VM has virtio-rng, and the page is scrolled to its Devices panel (three
                  more live charts on screen, the vCPU charts above partly off it)
`;
const { values } = parseArgs({
  options: {
    seconds: { type: 'string', default: '60' },
    vcpus: { type: 'string', default: '4' },
    phases: { type: 'string', default: 'live,history' },
    json: { type: 'string' },
    trace: { type: 'string' },
    devices: { type: 'boolean', default: false },
    help: { type: 'boolean', short: 'h' },
  },
});
if (values.help) {
  process.stdout.write(USAGE);
  process.exit(0);
}
const seconds = Number(values.seconds);
const vcpus = Number(values.vcpus);
const phases = values.phases.split(',').map((p) => p.trim()).filter(Boolean);
if (!(seconds >= 5) || !Number.isInteger(vcpus) || vcpus < 1 || vcpus > 64 || !phases.length || phases.some((p) => p !== 'live' && p !== 'history' && p !== 'api')) {
  process.stderr.write(USAGE);
  process.exit(1);
}
const skip = skipReason();
if (skip) {
  process.stderr.write(`bench: cannot run: ${skip}\n`);
  process.exit(1);
}

const PAGE_PROBE = `
(() => {
  const rec = { longTasks: [], loafs: [], recording: false };
  window.__bench = rec;
  new PerformanceObserver((list) => {
    for (const e of list.getEntries()) if (rec.recording) rec.longTasks.push(e.duration);
  }).observe({ type: 'longtask', buffered: false });
  try {
    new PerformanceObserver((list) => {
      for (const e of list.getEntries()) if (rec.recording) rec.loafs.push(e.duration);
    }).observe({ type: 'long-animation-frame', buffered: false });
  } catch {}
})();
`;

interface Recorder {
  longTasks: number[];
  loafs: number[];
  recording: boolean;
}

interface UnhaltHook {
  api: { createVm(c: unknown): Promise<{ id: string }> };
  addSyntheticHistory(id: string, rows: number, vcpus: number, reset: boolean): number;
}

// (page.evaluate serializes its function: these casts are written out inside each one.)

async function chartPoints(page: Page): Promise<number> {
  return Number(await page.locator('figure[data-chart="halt-exits"]').getAttribute('data-points') ?? 0);
}

/** Rows the page has received for the VM since its history was last replaced (trims included). */
async function rowsReceived(page: Page, vmId: string): Promise<number> {
  return page.evaluate((id) => (globalThis as unknown as { __unhalt: { telemetry(id: string): { received: number } } }).__unhalt.telemetry(id).received, vmId);
}

async function measure(page: Page, vmId: string, name: string, windowMin: number, trace: string | undefined) {
  const cdp = await page.context().newCDPSession(page);
  await cdp.send('Performance.enable');
  const metrics = async () => Object.fromEntries(((await cdp.send('Performance.getMetrics')) as { metrics: { name: string; value: number }[] })
    .metrics.map((m) => [m.name, m.value]));
  const traceEvents: unknown[] = [];
  if (trace) {
    cdp.on('Tracing.dataCollected', (d: { value: unknown[] }) => { traceEvents.push(...d.value); });
    await cdp.send('Tracing.start', { categories: 'devtools.timeline,disabled-by-default-devtools.timeline,v8.execute,blink,cc', transferMode: 'ReportEvents' });
  }
  const received0 = await rowsReceived(page, vmId);
  const m0 = await metrics();
  const load0 = loadavg()[0]!;
  await page.evaluate(() => {
    const r = (globalThis as unknown as { __bench: Recorder }).__bench;
    r.longTasks = [];
    r.loafs = [];
    r.recording = true;
  });
  const t0 = Date.now();
  await page.waitForTimeout(seconds * 1000);
  const elapsed = (Date.now() - t0) / 1000;
  const r = await page.evaluate(() => {
    const b = (globalThis as unknown as { __bench: Recorder }).__bench;
    b.recording = false;
    return { longTasks: b.longTasks, loafs: b.loafs };
  });
  const m1 = await metrics();
  const load1 = loadavg()[0]!;
  const points1 = await chartPoints(page);
  const received1 = await rowsReceived(page, vmId);
  if (trace) {
    const done = new Promise((res) => cdp.once('Tracing.tracingComplete', res));
    await cdp.send('Tracing.end');
    await done;
    writeFileSync(trace, JSON.stringify({ traceEvents }));
  }
  await cdp.detach();
  const perSecond = (k: string) => +((((m1[k] ?? 0) - (m0[k] ?? 0)) * 1000) / elapsed).toFixed(1);
  const tasks = [...r.longTasks].sort((a, b) => a - b);
  const loafs = [...r.loafs].sort((a, b) => a - b);
  return {
    phase: name,
    windowMinutes: windowMin,
    seconds: +elapsed.toFixed(1),
    rowsPerSeriesAtEnd: points1,
    liveRowsPerSecond: +((received1 - received0) / elapsed).toFixed(2),
    longTasks: {
      count: tasks.length,
      maxMs: +(tasks.at(-1) ?? 0).toFixed(1),
      over50ms: tasks.filter((d) => d > 50).length,
      all: tasks.map((d) => +d.toFixed(1)),
    },
    longAnimationFrames: { count: loafs.length, maxMs: +(loafs.at(-1) ?? 0).toFixed(1) },
    mainThreadMsPerSecond: {
      busy: perSecond('TaskDuration'), script: perSecond('ScriptDuration'), layout: perSecond('LayoutDuration'), style: perSecond('RecalcStyleDuration'),
    },
    hostLoadAverage: { start: +load0.toFixed(2), end: +load1.toFixed(2) },
  };
}

/** The server side: API round trips while a VM with a 1 GiB sparse kernel starts, then during a flood. */
async function measureApi(url: URL, serverPid: number, seconds: number): Promise<{ startHugeKernel: PingReport; flood: PingReport }> {
  const control = await startControl();
  const client = await apiClient(url);
  const pinging = await apiClient(url);
  const call = async (method: string, ...params: unknown[]) => {
    const m = await client.call(method, ...params);
    if ('error' in m) throw new Error(`${method}: ${m.error.message}`);
    return (m as { result: unknown }).result;
  };
  try {
    const kernel = join(app.home, 'probe-1g.elf');
    copyFileSync(PROBE_KERNEL, kernel);
    truncateSync(kernel, 1024 ** 3);
    const huge = await call('createVm', { name: 'huge-kernel', guest: 'custom', kernel, cpus: 1, memoryMiB: 64, append: 'scenario=echo' }) as { id: string };
    let pinger = startPinger(pinging, control, serverPid);
    await new Promise((r) => setTimeout(r, 200));
    await call('startVm', huge.id);
    await new Promise((r) => setTimeout(r, 200));
    const startHugeKernel = await pinger.stop();
    await call('forceStopVm', huge.id);
    const flood = await call('createVm', { name: 'flood', guest: 'probe', cpus: 1, memoryMiB: 64, append: `scenario=flood ms=${(seconds + 2) * 1000}` }) as { id: string };
    await call('subscribe', flood.id);
    await call('startVm', flood.id);
    await new Promise((r) => setTimeout(r, 500));
    pinger = startPinger(pinging, control, serverPid);
    const until = performance.now() + seconds * 1000;
    for (let i = 0; performance.now() < until; i++) {
      await call('sendConsole', flood.id, `typed-${i}\r`);
      await new Promise((r) => setTimeout(r, 40));
    }
    const floodReport = await pinger.stop();
    await call('forceStopVm', flood.id);
    return { startHugeKernel, flood: floodReport };
  } finally {
    client.close();
    pinging.close();
    control.close();
  }
}

const app = await AppSession.open({ width: 1600, height: 1000 });
const host = app.host;
let exitCode = 0;
try {
  const { page } = app;
  await page.addInitScript(PAGE_PROBE);
  await app.goto();
  await page.getByRole('heading', { level: 1 }).first().waitFor();
  const total = seconds * phases.length;
  const vmId = await page.evaluate(async ({ vcpus, ms, devices }) => (await (globalThis as unknown as { __unhalt: UnhaltHook }).__unhalt.api.createVm({
    name: 'ui-bench', guest: 'probe', cpus: vcpus, append: `scenario=idle ms=${ms} period_us=1000`, ...(devices ? { rng: true } : {}),
  })).id, { vcpus, ms: (total + 120) * 1000, devices: values.devices });
  await app.goto(`#/vm/${vmId}`);
  await page.locator('section.vm-view').waitFor();
  await page.locator('button[data-action="start"]').click();
  await waitFor('the VM to run', async () => (await page.getByTestId('vm-state').first().textContent()) === 'running', 30_000);
  await waitFor('live samples on the charts', async () => (await chartPoints(page)) > 20, 30_000);
  if (values.devices) await page.getByTestId('devices-panel').scrollIntoViewIfNeeded();
  // The live charts the view drives, as rendered (the devices' charts appear with their panel).
  if (values.devices) await page.locator('[data-testid="devices-panel"] figure[data-chart]').first().waitFor();
  const charts = await page.locator('section.vm-view figure[data-chart]').count();
  const results = [];
  const api: { startHugeKernel?: PingReport; flood?: PingReport } = {};
  for (const [i, phase] of phases.entries()) {
    const trace = i === phases.length - 1 ? values.trace : undefined;
    if (phase === 'api') {
      Object.assign(api, await measureApi(new URL(host.url), host.proc.pid!, seconds));
      continue;
    }
    if (phase === 'live') {
      await page.getByRole('button', { name: '1 min', exact: true }).click();
    } else {
      await page.getByRole('button', { name: '10 min', exact: true }).click();
      await page.evaluate(({ vmId, vcpus }) => (globalThis as unknown as { __unhalt: UnhaltHook }).__unhalt
        .addSyntheticHistory(vmId, 6000, vcpus, true), { vmId, vcpus });
    }
    // Let the switch settle (the history load itself is a one-off, not part of streaming).
    await page.mouse.move(5, 5);
    await page.waitForTimeout(2000);
    results.push(await measure(page, vmId, phase, phase === 'live' ? 1 : 10, trace));
  }
  const state = await page.getByTestId('vm-state').first().textContent();
  const max = Math.max(0, ...results.map((r) => r.longTasks.maxMs));
  const apiMax = Math.max(0, ...Object.values(api).map((r) => r.prompt.maxMs));
  const report = {
    bench: 'ui-responsiveness',
    date: new Date().toISOString(),
    host: { cpus: cpus().length, cpuModel: cpus()[0]?.model, pvm: existsSync('/sys/module/kvm_pvm') },
    setup: { vcpus, guest: 'probe scenario=idle period_us=1000', charts, devices: values.devices, secondsPerPhase: seconds, vmStateAtEnd: state },
    phases: results,
    target: 'no main-thread long task over 50 ms',
    maxLongTaskMs: max,
    met: max <= 50,
    ...(phases.includes('api') ? { api, apiTarget: 'the API answers within 50 ms throughout', apiMaxMs: +apiMax.toFixed(1), apiMet: apiMax <= 50 } : {}),
  };
  let out = `UI responsiveness in host mode: ${vcpus}-vCPU probe VM streaming telemetry at 10 Hz to the VM view (console + ${charts} charts)\n`;
  for (const r of results) {
    out += `  ${r.phase} (${r.windowMinutes}-min window, ${r.seconds} s, ${r.rowsPerSeriesAtEnd} rows per series, ${r.liveRowsPerSecond} new rows/s):\n` +
      `    long tasks: ${r.longTasks.count}, max ${r.longTasks.maxMs} ms, over 50 ms: ${r.longTasks.over50ms}; long animation frames: ${r.longAnimationFrames.count}, max ${r.longAnimationFrames.maxMs} ms\n` +
      `    main thread busy ${r.mainThreadMsPerSecond.busy} ms/s (script ${r.mainThreadMsPerSecond.script}, layout ${r.mainThreadMsPerSecond.layout}, style ${r.mainThreadMsPerSecond.style}); ` +
      `host load average ${r.hostLoadAverage.start} -> ${r.hostLoadAverage.end} on ${report.host.cpus} CPUs\n`;
  }
  if (results.length) out += `  target (no long task over 50 ms): ${report.met ? 'met' : `NOT met (max ${max} ms)`}\n`;
  for (const [what, r] of Object.entries(api)) out += `  api while ${what === 'flood' ? 'a guest floods (1 vCPU)' : 'a VM with a 1 GiB sparse kernel starts'}: ${describePings(r)}\n`;
  if (phases.includes('api')) out += `  target (the API answers within 50 ms): ${apiMax <= 50 ? 'met' : `NOT met (max ${apiMax.toFixed(1)} ms)`}\n`;
  process.stdout.write(out);
  if (values.json) writeFileSync(values.json, `${JSON.stringify(report, null, 2)}\n`);
  await page.locator('button[data-action="force-stop"]').click();
  await waitFor('the VM to stop', async () => (await page.getByTestId('vm-state').first().textContent()) === 'stopped', 30_000).catch(() => {});
} catch (e) {
  process.stderr.write(`bench: ${(e as Error).stack ?? e}\n--- unhalt serve output ---\n${host.output()}\n`);
  exitCode = 1;
} finally {
  await app.close();
}
process.exit(exitCode);

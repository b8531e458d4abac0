// End-to-end support: host mode (`unhalt serve`) in a child process, the renderer build, and
// headless Debian Chromium driven by playwright-core (never a downloaded browser). AppSession /
// useApp put the three together on a temporary UNHALT_HOME and take them down again, always.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium, type BrowserContext, type Locator, type Page } from 'playwright-core';
import { afterAll, afterEach, beforeAll } from 'vitest';
import { scaled } from '../support/time-scale.ts';
import { hostHasKvm } from '../support/e2e-files.ts';
import { canBindTcp } from '../support/free-port.ts';

export const ROOT = fileURLToPath(new URL('../../', import.meta.url));
export const UNHALT_BIN = join(ROOT, 'bin/unhalt.mjs');
export const CHROMIUM = process.env.UNHALT_CHROMIUM ?? '/usr/bin/chromium';
/** Chromium's flags for the tests, here and in the nested lane's browser server. */
export const CHROMIUM_ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
  '--disable-component-update', '--disable-sync'];
export const ARTIFACTS = join(ROOT, 'test/artifacts');
const RENDERER_DIST = join(ROOT, 'renderer/dist/index.html');

/**
 * Inside the nested lane's L1 (test/support/e2e-files.ts) the browser is a Playwright browser
 * server on the outer host (a WebSocket URL), and host mode's ports come from the range that L1's
 * QEMU forwards from the outer host's loopback ("BASE:COUNT"): the browser there opens the same
 * http://127.0.0.1:PORT the server here printed, and its Host and Origin checks hold as they are.
 */
const REMOTE_BROWSER = process.env.UNHALT_E2E_BROWSER;
const FORWARDED_PORTS = process.env.UNHALT_E2E_PORTS;

/**
 * What a page logs while its server is not there (stopped, restarting). Where the browser reaches
 * the server through QEMU's user-network forward (the nested lane), nothing is ever refused: the
 * forward accepts on this side and closes when nobody listens behind it, so the same event shows
 * as an empty response or a reset.
 */
export const SERVER_GONE = /ERR_CONNECTION_REFUSED|ERR_EMPTY_RESPONSE|ERR_CONNECTION_RESET/;

/** Why the UI tests that start VMs cannot run here, or null. On a host without KVM they run in the nested lane. */
export function skipReason(): string | null {
  if (!hostHasKvm()) return 'this host has no KVM this user may open (these UI tests start real VMs: the nested lane runs them, npm test -- nested)';
  if (!REMOTE_BROWSER && !existsSync(CHROMIUM)) return `${CHROMIUM} is missing (apt-get install chromium)`;
  if (!existsSync(join(ROOT, 'electron/cli/serve.ts'))) return '`unhalt serve` is not part of this build';
  return null;
}

function newestMtime(dir: string): number {
  let newest = 0;
  for (const name of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, name.name);
    newest = Math.max(newest, name.isDirectory() ? newestMtime(p) : statSync(p).mtimeMs);
  }
  return newest;
}

/** Builds renderer/dist when it is missing or older than the renderer's sources. */
export function ensureRendererBuilt(): void {
  // L1's image carries the build the outer host made (test/nested/l1/build.mjs): no vite under TCG.
  if (REMOTE_BROWSER && existsSync(RENDERER_DIST)) return;
  const sources = Math.max(newestMtime(join(ROOT, 'renderer/src')), statSync(join(ROOT, 'renderer/index.html')).mtimeMs,
    statSync(join(ROOT, 'electron/service/api.ts')).mtimeMs,
    // The pure rule modules the renderer shares with the VMM (the wizard's field checks).
    newestMtime(join(ROOT, 'electron/vmm/config')), newestMtime(join(ROOT, 'electron/vmm/machine')));
  if (existsSync(RENDERER_DIST) && statSync(RENDERER_DIST).mtimeMs >= sources) return;
  const vite = join(ROOT, 'node_modules/vite/bin/vite.js');
  const r = spawnSync(process.execPath, [vite, 'build', '--config', 'renderer/vite.config.ts', '--logLevel', 'warn'], {
    cwd: ROOT, encoding: 'utf8', timeout: 120_000,
  });
  if (r.status !== 0) throw new Error(`renderer build failed:\n${r.stdout}\n${r.stderr}`);
}

export interface HostMode {
  url: string;
  proc: ChildProcess;
  output(): string;
  /** SIGTERM and wait for the exit (the server stops its VMs first). */
  stop(): Promise<number | null>;
}

/** `unhalt serve --port PORT --no-open` with UNHALT_HOME=home (port 0: any free one); resolves with the printed URL. */
export async function startHostMode(home: string, timeoutMs = 30_000, port = 0, env: Record<string, string> = {}): Promise<HostMode> {
  return spawnHostMode(home, scaled(timeoutMs), port || (await forwardedPort()), env);
}

/**
 * Port 0 (any free one) where the browser is local; in L1 the next free one of the forwarded range,
 * going round it as the kernel's own picks would (a restart on port 0 gets another port, not the last one).
 */
let nextForwarded = 0;
async function forwardedPort(): Promise<number> {
  if (!FORWARDED_PORTS) return 0;
  const [base, count] = FORWARDED_PORTS.split(':').map(Number) as [number, number];
  for (let i = 0; i < count; i++) {
    const port = base + ((nextForwarded + i) % count);
    if (await canBindTcp(port)) {
      nextForwarded = port - base + 1;
      return port;
    }
  }
  throw new Error(`no free port left in the forwarded range ${base}-${base + count - 1} (UNHALT_E2E_PORTS)`);
}

function spawnHostMode(home: string, timeoutMs: number, port: number, env: Record<string, string>): Promise<HostMode> {
  return new Promise((resolve, reject) => {
    const proc = spawn(process.execPath, [UNHALT_BIN, 'serve', '--port', String(port), '--no-open'], {
      cwd: ROOT,
      env: { ...process.env, UNHALT_HOME: home, DISPLAY: '', WAYLAND_DISPLAY: '', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    // The URL is read from stdout alone and only once its line has ended: stdout arrives in
    // chunks (a match on a partial line would cut the token short), and stderr, which also goes
    // into `out`, could land between two chunks of that line.
    let stdout = '';
    let settled = false;
    const timer = setTimeout(() => fail(new Error(`unhalt serve printed no URL within ${timeoutMs} ms:\n${out}`)), timeoutMs);
    const fail = (e: Error) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      proc.kill('SIGKILL');
      reject(e);
    };
    const exited = new Promise<number | null>((r) => proc.on('exit', (code) => r(code)));
    proc.stdout!.on('data', (d) => {
      out += d;
      stdout += d;
      const m = /(http:\/\/127\.0\.0\.1:\d+\/\S*token=\S+)\r?\n/.exec(stdout);
      if (m && !settled) {
        settled = true;
        clearTimeout(timer);
        resolve({
          url: m[1]!,
          proc,
          output: () => out,
          stop: async () => {
            if (proc.exitCode !== null || proc.signalCode !== null) return proc.exitCode;
            proc.kill('SIGTERM');
            const t = setTimeout(() => proc.kill('SIGKILL'), 15_000);
            const code = await exited;
            clearTimeout(t);
            return code;
          },
        });
      }
    });
    proc.stderr!.on('data', (d) => { out += d; });
    proc.on('error', fail);
    proc.on('exit', (code) => fail(new Error(`unhalt serve exited (${code}) before printing its URL:\n${out}`)));
  });
}

export interface Browser {
  ctx: BrowserContext;
  page: Page;
  /** Page errors and console errors seen so far. */
  errors: string[];
  /** Closes Chromium; one that does not go within 20 s is killed. Never throws. */
  close(): Promise<void>;
}

/** Processes of this user whose command line holds `needle` (Chromium's own --user-data-dir), by pid. */
function pidsWithArg(needle: string): number[] {
  const pids: number[] = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name) || Number(name) === process.pid) continue;
    try {
      if (readFileSync(`/proc/${name}/cmdline`, 'latin1').split('\0').includes(needle)) pids.push(Number(name));
    } catch { /* gone meanwhile */ }
  }
  return pids;
}

export async function launchBrowser(opts: BrowserOptions = {}): Promise<Browser> {
  return REMOTE_BROWSER ? connectBrowser(REMOTE_BROWSER, opts) : launchLocalBrowser(opts);
}

/** A context of its own in the outer host's browser server (the nested lane): the same page API, downloads streamed over. */
async function connectBrowser(url: string, opts: BrowserOptions): Promise<Browser> {
  const browser = await chromium.connect(url, { timeout: scaled(60_000) });
  try {
    const ctx = await browser.newContext(contextOptions(opts));
    ctx.setDefaultTimeout(scaled(30_000));
    const page = await ctx.newPage();
    const errors = watchErrors(page);
    // The connection is closed whatever the context's close does (it takes the context with it).
    return { ctx, page, errors, close: () => settleWithin(ctx.close().finally(() => browser.close())) };
  } catch (e) {
    await settleWithin(browser.close());
    throw e;
  }
}

type BrowserOptions = { colorScheme?: 'light' | 'dark'; width?: number; height?: number };

const contextOptions = (opts: BrowserOptions) => ({
  viewport: { width: opts.width ?? 1440, height: opts.height ?? 960 },
  colorScheme: opts.colorScheme ?? 'light',
  acceptDownloads: true,
});

/** Waits for a close at most 20 s and never throws: a browser that hangs must not hang the teardown. */
async function settleWithin(closing: Promise<unknown>, ms = 20_000): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([closing.catch(() => {}), new Promise((r) => { timer = setTimeout(r, ms); })]);
  clearTimeout(timer);
}

function watchErrors(page: Page): string[] {
  const errors: string[] = [];
  page.on('pageerror', (e) => errors.push(`pageerror: ${e.message}`));
  page.on('console', (m) => { if (m.type() === 'error') errors.push(`console: ${m.text()}`); });
  return errors;
}

async function launchLocalBrowser(opts: BrowserOptions): Promise<Browser> {
  const userDataDir = mkdtempSync(join(tmpdir(), 'unhalt-chromium-'));
  const ctx = await chromium.launchPersistentContext(userDataDir, {
    executablePath: CHROMIUM,
    headless: true,
    args: CHROMIUM_ARGS,
    ...contextOptions(opts),
  });
  ctx.setDefaultTimeout(scaled(30_000));
  const page = ctx.pages()[0] ?? (await ctx.newPage());
  const errors = watchErrors(page);
  return {
    ctx,
    page,
    errors,
    close: async () => {
      await settleWithin(ctx.close());
      // Whatever of this browser is still there (a close that hung, a crashed page's leftovers).
      for (const pid of pidsWithArg(`--user-data-dir=${userDataDir}`)) {
        try { process.kill(pid, 'SIGKILL'); } catch { /* already gone */ }
      }
      rmSync(userDataDir, { recursive: true, force: true });
    },
  };
}

export interface AppOptions {
  width?: number;
  height?: number;
  colorScheme?: 'light' | 'dark';
  /** Runs on the fresh UNHALT_HOME before the server starts: a library or files it should find there. */
  prepare?: (home: string) => void | Promise<void>;
  /** Extra environment for the server, e.g. UNHALT_KVM_DEVICE=/nonexistent for a host without KVM on every host. */
  env?: Record<string, string>;
}

/**
 * The app as a person meets it: `unhalt serve` on a temporary UNHALT_HOME (its token in the URL)
 * and a headless Chromium page. close() takes down what open() started — the browser, the
 * server (and with it its VMs), the home — whatever state a failed test left them in.
 */
export class AppSession {
  readonly home: string;
  readonly browser: Browser;
  private current: HostMode | undefined;
  private readonly env: Record<string, string>;

  private constructor(home: string, browser: Browser, host: HostMode, env: Record<string, string>) {
    this.home = home;
    this.browser = browser;
    this.current = host;
    this.env = env;
  }

  static async open(opts: AppOptions = {}): Promise<AppSession> {
    ensureRendererBuilt();
    const home = tempHome();
    let host: HostMode | undefined;
    try {
      await opts.prepare?.(home);
      host = await startHostMode(home, 30_000, 0, opts.env);
      const browser = await launchBrowser({ width: opts.width, height: opts.height, colorScheme: opts.colorScheme });
      return new AppSession(home, browser, host, opts.env ?? {});
    } catch (e) {
      await host?.stop().catch(() => {});
      rmSync(home, { recursive: true, force: true });
      throw e;
    }
  }

  /** The server now running (after a restart, the new one). */
  get host(): HostMode {
    if (!this.current) throw new Error('host mode is not running (stopped by the test and not started again)');
    return this.current;
  }
  get url(): string { return this.host.url; }
  get page(): Page { return this.browser.page; }
  get errors(): string[] { return this.browser.errors; }

  /** Opens the app at `route` (a hash such as `#/vm/ID`, or '' for the library). */
  async goto(route = ''): Promise<Page> {
    await this.page.goto(`${this.url}${route}`);
    return this.page;
  }

  /** Starts host mode again on the same home (on `port`, 0: any), after the test stopped it; stops one still running first. */
  async startHost(port = 0): Promise<HostMode> {
    await this.current?.stop();
    this.current = await startHostMode(this.home, 30_000, port, this.env);
    return this.current;
  }

  async close(): Promise<void> {
    await this.browser.close();
    try {
      await this.current?.stop();
    } finally {
      this.current = undefined;
      rmSync(this.home, { recursive: true, force: true });
    }
  }
}

/**
 * An AppSession for the enclosing describe: opened in its beforeAll, closed in its afterAll
 * (which vitest runs whether the tests passed, failed or never ran). The returned object
 * stands for the session; reading it before beforeAll has run throws.
 */
export function useApp(opts: AppOptions = {}): AppSession {
  let session: AppSession | undefined;
  beforeAll(async () => { session = await AppSession.open(opts); }, scaled(180_000));
  // A failed check leaves a picture of the page and its alerts: where it ran in L1 there is no other way to see it.
  afterEach(async ({ task }) => {
    if (task.result?.state !== 'fail' || !session) return;
    const name = `failed/${task.name.replace(/[^\w.-]+/g, '-').slice(0, 80)}.png`;
    await session.page.screenshot({ path: artifact(name), fullPage: true, timeout: 30_000 }).catch(() => {});
    const alerts = await session.page.getByRole('alert').allTextContents().catch(() => []);
    console.warn(`[e2e] failed: ${task.name}; screenshot ${name}; alerts on the page: ${JSON.stringify(alerts)}`);
  }, scaled(60_000));
  afterAll(async () => {
    await session?.close();
    session = undefined;
  }, scaled(60_000));
  return new Proxy({} as AppSession, {
    get(_target, key) {
      if (!session) throw new Error('the app session is not open (its beforeAll failed or has not run)');
      const v = Reflect.get(session, key, session) as unknown;
      return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(session) : v;
    },
  });
}

/**
 * Creates a VM through the page's API client (`__unhalt.api`), as a test's setup: the wizard has
 * tests of its own. Answers the new VM's id.
 */
export function createVmThroughApi(page: Page, config: Record<string, unknown>): Promise<string> {
  return page.evaluate(async (c) => {
    const api = (globalThis as unknown as { __unhalt: { api: { createVm(c: unknown): Promise<{ id: string }> } } }).__unhalt.api;
    return (await api.createVm(c)).id;
  }, config);
}

/** Opens a VM's page from the library as a person does (its card, by the VM's name) and clicks Start. */
export async function openAndStartVm(page: Page, id: string, name: string): Promise<void> {
  await page.getByRole('button', { name: 'Library', exact: true }).click();
  await page.locator(`li.vm-card[data-vm-id="${id}"]`).getByRole('button', { name, exact: true }).click();
  await page.locator(`section.vm-view[data-vm-id="${id}"]`).waitFor();
  await page.locator('button[data-action="start"]').click();
}

/** Calls the page's test hook (`window.__unhalt`, renderer/src/state/app.ts) function `f` with `args`. */
export function hook<T>(page: Page, f: string, ...args: unknown[]): Promise<T> {
  return page.evaluate(([f, args]) => {
    const h = (globalThis as unknown as { __unhalt: Record<string, (...a: unknown[]) => unknown> }).__unhalt;
    return h[f as string]!(...(args as unknown[])) as T;
  }, [f, args] as const);
}

export function artifact(name: string): string {
  mkdirSync(ARTIFACTS, { recursive: true });
  return join(ARTIFACTS, name);
}

export function tempHome(): string {
  return mkdtempSync(join(tmpdir(), 'unhalt-e2e-home-'));
}

/** Polls `f` until it returns a truthy value (returned) or the time is up (throws with `what`). */
export async function waitFor<T>(what: string, f: () => Promise<T> | T, timeoutMs = 20_000, everyMs = 100): Promise<NonNullable<T>> {
  timeoutMs = scaled(timeoutMs); // a liveness deadline as written for an ordinary machine, grown with this one's slowness
  const end = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const v = await f();
      if (v) return v as NonNullable<T>;
      last = v;
    } catch (e) {
      last = e;
    }
    if (Date.now() > end) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what} (last: ${String(last).slice(0, 300)})`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

/**
 * Replaces a field's text the way a person does: click into it, select all, delete, type (never
 * `fill`, which hides typing bugs such as a field snapping to its minimum). A string is the
 * field's exact label. `leave` tabs out afterwards, so blur-time checks run.
 */
export async function typeInto(page: Page, field: string | Locator, text: string, opts: { delay?: number; leave?: boolean } = {}): Promise<void> {
  await (typeof field === 'string' ? page.getByLabel(field, { exact: true }) : field).click();
  await page.keyboard.press('Control+A');
  await page.keyboard.press('Backspace');
  await page.keyboard.type(text, { delay: opts.delay ?? 10 });
  if (opts.leave) await page.keyboard.press('Tab');
}

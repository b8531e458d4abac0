// The Electron shell's hardening, checked from what it actually uses: the BrowserWindow options
// (window-options.ts, importable without Electron), the CSP, the preload's bridge, and the rule
// that nothing outside electron/main.ts and electron/preload.ts imports 'electron'.
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';
import { API_METHOD_NAMES } from '../../electron/service/api.ts';
import { contentSecurityPolicy } from '../../electron/csp.ts';
import {
  ALLOWED_PERMISSIONS, APP_ENTRY, IPC_CALL, IPC_EVENT, WEB_PREFERENCES, WINDOW_OPTIONS, isAppUrl,
} from '../../electron/window-options.ts';

const ROOT = new URL('../../', import.meta.url).pathname;
const read = (p: string) => readFileSync(join(ROOT, p), 'utf8');

function sources(dir: string, out: string[] = []): string[] {
  for (const e of readdirSync(join(ROOT, dir), { withFileTypes: true })) {
    const rel = join(dir, e.name);
    if (e.isDirectory()) {
      if (['node_modules', 'dist', 'dist-electron', 'artifacts', '.git'].includes(e.name)) continue;
      sources(rel, out);
    } else if (/\.(ts|tsx|mts|cts|js|mjs|cjs)$/.test(e.name)) {
      out.push(rel);
    }
  }
  return out;
}

describe('Electron hardening', () => {
  it('the window is context-isolated, sandboxed, without Node, with web security', () => {
    expect(WINDOW_OPTIONS.webPreferences).toBe(WEB_PREFERENCES);
    expect(WEB_PREFERENCES).toMatchObject({
      contextIsolation: true,
      sandbox: true,
      nodeIntegration: false,
      nodeIntegrationInWorker: false,
      nodeIntegrationInSubFrames: false,
      webSecurity: true,
      allowRunningInsecureContent: false,
      experimentalFeatures: false,
      webviewTag: false,
      navigateOnDragDrop: false,
    });
    expect(Object.isFrozen(WEB_PREFERENCES)).toBe(true);
    expect(WEB_PREFERENCES).not.toHaveProperty('preload'); // added by main.ts, pointing at our own file
  });

  it('main.ts uses those options and blocks navigation, new windows, webviews and permissions', () => {
    const main = read('electron/main.ts');
    expect(main).toMatch(/new BrowserWindow\(\{ \.\.\.WINDOW_OPTIONS, webPreferences: \{ \.\.\.WEB_PREFERENCES, preload: PRELOAD \} \}\)/);
    expect(main).toMatch(/contents\.on\('will-navigate', \(e\) => e\.preventDefault\(\)\)/);
    expect(main).toMatch(/contents\.on\('will-attach-webview', \(e\) => e\.preventDefault\(\)\)/);
    expect(main).toMatch(/setWindowOpenHandler\(\(\) => \(\{ action: 'deny' \}\)\)/);
    expect(main).toMatch(/setPermissionRequestHandler\(/);
    expect(main).toMatch(/setPermissionCheckHandler\(/);
    expect(main).toMatch(/app\.enableSandbox\(\)/);
    // Only the app's own scheme is ever loaded: no file://, no http(s), no loadFile.
    expect(main).toMatch(/win\.loadURL\(APP_ENTRY\)/);
    expect(main).not.toMatch(/loadFile\(|file:\/\/|https?:\/\//);
    expect(main).not.toMatch(/nodeIntegration:\s*true|contextIsolation:\s*false|sandbox:\s*false|webSecurity:\s*false/);
    // IPC answers only the app's own main frame.
    expect(main).toMatch(/if \(!frame \|\| frame\.parent !== null \|\| !isAppUrl\(frame\.url\)\)/);
    expect(APP_ENTRY).toBe('app://unhalt/index.html');
  });

  it('permissions: only clipboard writing, only for the app itself', () => {
    expect([...ALLOWED_PERMISSIONS]).toEqual(['clipboard-sanitized-write']);
    expect(isAppUrl('app://unhalt/index.html')).toBe(true);
    for (const url of ['file:///etc/passwd', 'http://127.0.0.1/', 'https://unhalt/', 'app://evil/index.html', 'javascript:alert(1)', 'not a url', '']) {
      expect(isAppUrl(url), url).toBe(false);
    }
  });

  it('the CSP allows scripts only from the app and no eval', () => {
    const csp = contentSecurityPolicy();
    expect(csp).toMatch(/^default-src 'none'; script-src 'self';/);
    expect(csp).not.toMatch(/unsafe-eval|script-src[^;]*unsafe-inline|\*/);
    expect(csp).toMatch(/object-src 'none'/);
    expect(csp).toMatch(/connect-src 'none'/); // the Electron window talks over IPC only
    expect(csp).toMatch(/frame-ancestors 'none'/);
    expect(contentSecurityPolicy({ connect: 'ws://127.0.0.1:5' })).toMatch(/connect-src 'self' ws:\/\/127\.0\.0\.1:5;/);
  });

  it('the preload exposes exactly the API methods on the channels main.ts serves', () => {
    const preload = read('electron/preload.ts');
    const list = /const METHODS = \[([^\]]*)\]/.exec(preload)![1]!;
    const methods = [...list.matchAll(/'([A-Za-z]+)'/g)].map((m) => m[1]);
    expect(methods).toEqual([...API_METHOD_NAMES]);
    expect(preload).toContain(`const IPC_CALL = '${IPC_CALL}'`);
    expect(preload).toContain(`const IPC_EVENT = '${IPC_EVENT}'`);
    // One exposure, named unhalt; the page never gets ipcRenderer or the IPC event object.
    expect(preload.match(/exposeInMainWorld\(/g)).toHaveLength(1);
    expect(preload).toMatch(/exposeInMainWorld\('unhalt', \{/);
    expect(preload).toMatch(/const handler = \(_e: unknown, event: ApiEvent\) => listener\(event\)/);
    // A sandboxed preload can only require electron: no local imports but types.
    const imports = [...preload.matchAll(/^import (type )?.* from '([^']+)';$/gm)];
    expect(imports.filter((m) => !m[1]).map((m) => m[2])).toEqual(['electron']);
  });

  it("nothing outside electron/main.ts and electron/preload.ts imports 'electron'", () => {
    const importsElectron = /(?:from\s+|import\s*\(\s*|require\s*\(\s*|import\s+)['"]electron(?:\/[^'"]*)?['"]/;
    const offenders = ['electron', 'native', 'renderer', 'test', 'bench', 'scripts', 'bin']
      .filter((d) => existsSync(join(ROOT, d)))
      .flatMap((d) => sources(d))
      .filter((f) => importsElectron.test(readFileSync(join(ROOT, f), 'utf8')))
      .map((f) => relative(ROOT, join(ROOT, f)))
      .filter((f) => f !== 'test/unit/electron-hardening.test.ts'); // this file only names it in a pattern
    expect(offenders.sort()).toEqual(['electron/main.ts', 'electron/preload.ts']);
  });

  it('npm start without the Electron binary says so in one line and offers host mode', () => {
    const pathTxt = join(ROOT, 'node_modules', 'electron', 'path.txt');
    if (existsSync(pathTxt)) return; // the binary is installed here: npm start would launch the app
    const r = spawnSync(process.execPath, [join(ROOT, 'scripts', 'start-electron.mjs')], { encoding: 'utf8', timeout: 30_000 });
    expect(r.status).toBe(1);
    expect(r.stdout).toBe('');
    const lines = r.stderr.trim().split('\n');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/Electron's binary is not installed/);
    expect(lines[0]).toMatch(/npm rebuild electron/);
    expect(lines[0]).toMatch(/ELECTRON_SKIP_BINARY_DOWNLOAD/);
    expect(lines[0]).toMatch(/npm run serve/);
    expect(r.stderr).not.toMatch(/\n\s+at /); // no stack trace
  });
});

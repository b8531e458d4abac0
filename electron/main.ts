// The Electron shell, kept thin: one window, a menu, and the IPC transport over the same service
// host mode uses. Hardening (Electron's security checklist): the renderer is sandboxed and
// context-isolated with no Node (window-options.ts), it is served from the app:// scheme with a
// strict CSP (never from file: URLs, never remote), navigation, new windows and <webview> are refused,
// permission requests are denied, and IPC is answered only for the app's own main frame.
import { app, BrowserWindow, dialog, ipcMain, Menu, protocol, session, type IpcMainInvokeEvent, type MenuItemConstructorOptions, type WebContents } from 'electron';
import { fileURLToPath } from 'node:url';
import { securityHeaders } from './csp.ts';
import type { ServerMessage } from './service/api.ts';
import { handleCall, requestId } from './service/dispatch.ts';
import { toApiError } from './service/errors.ts';
import { HomeBusyError } from './service/home-owner.ts';
import { unhaltHome } from './service/paths.ts';
import { SERVICE_SPARE_VCPU_WORKERS, createService, type ServiceSession, type UnhaltService } from './service/service.ts';
import { NOT_BUILT_PAGE, RENDERER_DIST, readStatic, rendererBuilt, resolveStatic } from './service/static-files.ts';
import {
  ALLOWED_PERMISSIONS, APP_ENTRY, APP_HOST, APP_SCHEME, IPC_CALL, IPC_EVENT, WEB_PREFERENCES, WINDOW_OPTIONS, isAppUrl,
} from './window-options.ts';

/** Built beside this file as CommonJS: a sandboxed preload cannot be an ES module. */
const PRELOAD = fileURLToPath(new URL('./preload.cjs', import.meta.url));

// Before `ready`: app:// behaves like https (secure context, its own origin), not like a file: URL.
protocol.registerSchemesAsPrivileged([{ scheme: APP_SCHEME, privileges: { standard: true, secure: true, supportFetchAPI: true } }]);
app.enableSandbox();

let service: UnhaltService | undefined;
const sessions = new Map<number, ServiceSession>();
let shutDown = false;

app.on('web-contents-created', (_event, contents) => {
  contents.on('will-navigate', (e) => e.preventDefault());
  contents.on('will-redirect', (e) => e.preventDefault());
  contents.on('will-attach-webview', (e) => e.preventDefault());
  contents.setWindowOpenHandler(() => ({ action: 'deny' }));
});

app.whenReady().then(start, (e) => fail(e));

async function start(): Promise<void> {
  const ses = session.defaultSession;
  ses.setPermissionRequestHandler((contents, permission, callback) => {
    callback(ALLOWED_PERMISSIONS.includes(permission) && isAppUrl(contents.getURL()));
  });
  ses.setPermissionCheckHandler((_contents, permission, origin) => ALLOWED_PERMISSIONS.includes(permission) && isAppUrl(origin));
  protocol.handle(APP_SCHEME, (request) => serveApp(request.url));

  const home = unhaltHome();
  try {
    // A host command's confirmation code in a native dialog: the main process's, out of the renderer's reach.
    const announce = (text: string) => void dialog.showMessageBox({ type: 'warning', title: 'Run a command on this machine?', message: text.split('\n')[0]!, detail: text.split('\n').slice(1).join('\n').trim() });
    service = await createService({ home, ownerCommand: 'the Unhalt app', spareVcpuWorkers: SERVICE_SPARE_VCPU_WORKERS, announce });
  } catch (e) {
    // A second app or `unhalt serve` on this home: its message names the owner (home-owner.ts).
    return fail(e instanceof HomeBusyError ? e : new Error(`cannot open the VM library in ${home}: ${(e as Error).message}`));
  }
  ipcMain.handle(IPC_CALL, (event, message: unknown) => onCall(event, message));
  Menu.setApplicationMenu(Menu.buildFromTemplate(menu()));
  createWindow();
}

function serveApp(url: string): Response {
  const u = new URL(url);
  if (u.host !== APP_HOST) return new Response('not found', { status: 404 });
  const headers = securityHeaders();
  if (!rendererBuilt(RENDERER_DIST) && (u.pathname === '/' || u.pathname === '/index.html')) {
    return new Response(NOT_BUILT_PAGE.replace('reload this page (keep the <code>?token=…</code> part of the address)', 'start Unhalt again'),
      { headers: { ...headers, 'Content-Type': 'text/html; charset=utf-8' } });
  }
  const found = resolveStatic(RENDERER_DIST, u.pathname);
  if (found.status !== 200) return new Response(found.reason, { status: found.status });
  return new Response(new Uint8Array(readStatic(found.path)), { headers: { ...headers, 'Content-Type': found.type } });
}

function createWindow(): BrowserWindow {
  const win = new BrowserWindow({ ...WINDOW_OPTIONS, webPreferences: { ...WEB_PREFERENCES, preload: PRELOAD } });
  win.once('ready-to-show', () => win.show());
  win.on('close', (e) => {
    if (shutDown || !service || service.runningVmIds().length === 0) return;
    e.preventDefault();
    void confirmClose(win);
  });
  void win.loadURL(APP_ENTRY);
  return win;
}

/** Closing the window ends the process and its VMs: ask first. */
async function confirmClose(win: BrowserWindow): Promise<void> {
  const n = service?.runningVmIds().length ?? 0;
  const { response } = await dialog.showMessageBox(win, {
    type: 'question',
    buttons: [`Stop ${n === 1 ? 'the VM' : `${n} VMs`} and quit`, 'Cancel'],
    defaultId: 1,
    cancelId: 1,
    title: 'VMs are running',
    message: `${n} VM${n === 1 ? ' is' : 's are'} still running.`,
    detail: 'Quitting Unhalt stops them: each gets the ACPI power button, then is stopped by force after a grace period.',
  });
  if (response !== 0) return;
  await shutdownService();
  win.close();
}

async function shutdownService(): Promise<void> {
  if (shutDown) return;
  shutDown = true;
  for (const s of sessions.values()) s.close();
  sessions.clear();
  await service?.shutdown();
}

app.on('window-all-closed', () => app.quit());
app.on('will-quit', (e) => {
  if (shutDown || !service) return;
  // Quit without a window (a signal, the dock): stop the VMs first, then quit for real.
  e.preventDefault();
  void shutdownService().finally(() => app.quit());
});

/**
 * IPC calls: only from the app's own main frame; one service session per web contents. Always
 * answers with a ServerMessage, never throws: a thrown error would reach the page as a string
 * ("Error invoking remote method ..."), and errors cross as { code, message } only.
 */
function onCall(event: IpcMainInvokeEvent, message: unknown): ServerMessage | Promise<ServerMessage> {
  const frame = event.senderFrame;
  if (!service || shutDown) return { id: -1, error: { code: 'conflict', message: 'Unhalt is shutting down' } };
  // The main frame (no parent) showing our own page; never a subframe or another origin.
  if (!frame || frame.parent !== null || !isAppUrl(frame.url)) {
    return { id: -1, error: { code: 'unauthorized', message: 'calls are accepted from the Unhalt window only' } };
  }
  try {
    return handleCall(sessionFor(event.sender), message);
  } catch (e) {
    return { id: requestId(message), error: toApiError(e).toDto() };
  }
}

function sessionFor(contents: WebContents): ServiceSession {
  let s = sessions.get(contents.id);
  if (s) return s;
  s = service!.connect((e) => { if (!contents.isDestroyed()) contents.send(IPC_EVENT, e); });
  sessions.set(contents.id, s);
  const end = () => {
    sessions.get(contents.id)?.close();
    sessions.delete(contents.id);
  };
  contents.once('destroyed', end);
  // A reload starts a new page: its subscriptions start from scratch too.
  contents.once('did-navigate', end);
  return s;
}

function menu(): MenuItemConstructorOptions[] {
  return [
    { label: 'File', submenu: [{ role: 'quit' }] },
    { label: 'Edit', submenu: [{ role: 'undo' }, { role: 'redo' }, { type: 'separator' }, { role: 'cut' }, { role: 'copy' }, { role: 'paste' }, { role: 'selectAll' }] },
    {
      label: 'View',
      submenu: [
        { role: 'reload' },
        ...(app.isPackaged ? [] : [{ role: 'toggleDevTools' } as const]),
        { type: 'separator' }, { role: 'resetZoom' }, { role: 'zoomIn' }, { role: 'zoomOut' }, { type: 'separator' }, { role: 'togglefullscreen' },
      ],
    },
    {
      label: 'Help',
      submenu: [{
        label: 'About Unhalt',
        click: () => void dialog.showMessageBox({ type: 'info', title: 'About Unhalt', message: `Unhalt ${app.getVersion()}`, detail: `Data folder: ${service?.home ?? unhaltHome()}` }),
      }],
    },
  ];
}

function fail(e: unknown): void {
  dialog.showErrorBox('Unhalt cannot start', (e as Error)?.message ?? String(e));
  app.exit(1);
}

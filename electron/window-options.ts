// The Electron window's options, as plain data in a file that does not import electron, so a
// unit test can read exactly what the shell uses (test/unit/electron-hardening.test.ts). They
// follow Electron's security checklist: isolated and sandboxed renderer, no Node in it, web
// security on, no <webview>, no insecure content, nothing but the app's own files.

/** The custom scheme the renderer is served from (app://unhalt/index.html), never file://. */
export const APP_SCHEME = 'app';
export const APP_HOST = 'unhalt';
export const APP_ORIGIN = `${APP_SCHEME}://${APP_HOST}`;
export const APP_ENTRY = `${APP_ORIGIN}/index.html`;

/** IPC channels of the one transport: calls in, events out. */
export const IPC_CALL = 'unhalt:call';
export const IPC_EVENT = 'unhalt:event';

export const WEB_PREFERENCES = Object.freeze({
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
  safeDialogs: true,
  spellcheck: false,
  enableWebSQL: false,
} as const);

export const WINDOW_OPTIONS = Object.freeze({
  title: 'Unhalt',
  width: 1280,
  height: 820,
  minWidth: 900,
  minHeight: 600,
  // Shown once the first frame is ready: no white flash before the theme applies.
  show: false,
  backgroundColor: '#1e1e1e',
  autoHideMenuBar: false,
  webPreferences: WEB_PREFERENCES,
} as const);

/** Permissions the renderer may have: writing to the clipboard (the console's copy). Nothing else. */
export const ALLOWED_PERMISSIONS: readonly string[] = Object.freeze(['clipboard-sanitized-write']);

/** Whether a URL is one of the app's own pages (the only thing the window may show or call from). */
export function isAppUrl(url: string): boolean {
  try {
    const u = new URL(url);
    return u.protocol === `${APP_SCHEME}:` && u.host === APP_HOST;
  } catch {
    return false;
  }
}

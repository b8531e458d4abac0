// The renderer's Content-Security-Policy, one place for both shells: the Electron window (served
// from the app:// scheme) and host mode (served over HTTP on 127.0.0.1). Scripts only from the
// app itself, no eval, no plugins, no framing, no forms; styles may be inline because xterm.js
// and uPlot set them at run time; the only connection is host mode's own WebSocket.

export interface CspOptions {
  /** Host mode: the WebSocket origin the page may connect to (ws://127.0.0.1:PORT). */
  connect?: string;
}

export function contentSecurityPolicy(options: CspOptions = {}): string {
  return [
    "default-src 'none'",
    "script-src 'self'",
    "style-src 'self' 'unsafe-inline'",
    "img-src 'self' data: blob:",
    "font-src 'self' data:",
    `connect-src ${options.connect ? `'self' ${options.connect}` : "'none'"}`,
    "worker-src 'self' blob:",
    "manifest-src 'self'",
    "object-src 'none'",
    "base-uri 'none'",
    "form-action 'none'",
    "frame-ancestors 'none'",
    "frame-src 'none'",
  ].join('; ');
}

/** Headers every renderer response carries in both shells. */
export function securityHeaders(options: CspOptions = {}): Record<string, string> {
  return {
    'Content-Security-Policy': contentSecurityPolicy(options),
    'X-Content-Type-Options': 'nosniff',
    // The host-mode URL carries the token: never send it on as a Referer.
    'Referrer-Policy': 'no-referrer',
    'X-Frame-Options': 'DENY',
    'Cross-Origin-Opener-Policy': 'same-origin',
    'Cross-Origin-Resource-Policy': 'same-origin',
    'Permissions-Policy': 'camera=(), microphone=(), geolocation=(), usb=(), serial=(), hid=()',
  };
}

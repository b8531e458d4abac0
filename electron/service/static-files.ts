// Files of the built renderer (renderer/dist), for host mode's HTTP server and the Electron
// shell's app:// scheme alike. Only files inside the root are ever served: the decoded path is
// resolved against the root, its real path (symlinks followed) must still lie inside it, and
// anything else — "..", encoded or not, NUL bytes, backslashes — is refused.
import { existsSync, readFileSync, realpathSync, statSync } from 'node:fs';
import { extname, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';

/** renderer/dist beside electron/ (in the repo, and beside dist-electron/electron in the build). */
export const RENDERER_DIST = fileURLToPath(new URL('../../renderer/dist/', import.meta.url));

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.json': 'application/json; charset=utf-8',
  '.map': 'application/json; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.woff2': 'font/woff2',
  '.woff': 'font/woff',
  '.ttf': 'font/ttf',
  '.txt': 'text/plain; charset=utf-8',
  '.webmanifest': 'application/manifest+json',
};

export type StaticResult =
  | { status: 200; path: string; type: string }
  | { status: 400 | 404; reason: string };

/** Maps a URL path ("/assets/x.js", percent-encoded) to a file under root, or says why not. */
export function resolveStatic(root: string, urlPath: string): StaticResult {
  let decoded: string;
  try {
    decoded = decodeURIComponent(urlPath);
  } catch {
    return { status: 400, reason: 'malformed percent-encoding' };
  }
  if (decoded.includes('\0') || decoded.includes('\\')) return { status: 400, reason: 'invalid character in path' };
  if (decoded.split('/').some((part) => part === '..')) return { status: 400, reason: 'path traversal' };
  const rel = decoded === '/' || decoded === '' ? 'index.html' : decoded.replace(/^\/+/, '');
  let realRoot: string;
  try {
    realRoot = realpathSync.native(root);
  } catch {
    return { status: 404, reason: 'the renderer is not built' };
  }
  const candidate = resolve(realRoot, rel);
  if (!inside(realRoot, candidate)) return { status: 400, reason: 'path traversal' };
  let real: string;
  try {
    real = realpathSync.native(candidate);
  } catch {
    return { status: 404, reason: 'not found' };
  }
  if (!inside(realRoot, real)) return { status: 404, reason: 'not found' };
  try {
    if (!statSync(real).isFile()) return { status: 404, reason: 'not found' };
  } catch {
    return { status: 404, reason: 'not found' };
  }
  return { status: 200, path: real, type: TYPES[extname(real).toLowerCase()] ?? 'application/octet-stream' };
}

function inside(root: string, p: string): boolean {
  return p.startsWith(root.endsWith(sep) ? root : root + sep);
}

export function rendererBuilt(root: string): boolean {
  return existsSync(resolve(root, 'index.html'));
}

export function readStatic(path: string): Buffer {
  return readFileSync(path);
}

/** What host mode serves when renderer/dist is missing. */
export const NOT_BUILT_PAGE = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Unhalt</title></head>
<body style="font: 16px system-ui, sans-serif; max-width: 40em; margin: 4em auto; padding: 0 1em">
<h1>Unhalt: the user interface is not built</h1>
<p>The server is running, but <code>renderer/dist/</code> does not exist yet. Build it with</p>
<pre>npm run build:renderer</pre>
<p>then reload this page (keep the <code>?token=…</code> part of the address).</p>
</body></html>
`;

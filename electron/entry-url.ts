// Where one of Unhalt's entry modules (a worker thread's script, a lazily imported runner) is,
// given the URL of its TypeScript source. Unhalt runs in three forms, and this file's own URL
// says which one:
//   - the sources, type-stripped by Node (this file is entry-url.ts): the source itself;
//   - the Electron build of scripts/build-electron.mjs (tsc, entry-url.js): the .js next to it;
//   - the bundle of scripts/build-node.mjs (a flat folder of .mjs files): the bundled entry of the
//     same base name in that folder. The bundler keeps this module's `import.meta.url` as the
//     bundle's own (every other module's is rewritten to its source's), and emits every module
//     named here through `entryUrl(new URL('...', import.meta.url))` as an entry of that name.
import { basename } from 'node:path';

const SELF = import.meta.url;

export function entryUrl(source: URL): URL {
  if (SELF.endsWith('.ts')) return source;
  if (SELF.endsWith('.mjs')) return new URL(`./${basename(source.pathname).replace(/\.ts$/, '.mjs')}`, SELF);
  return new URL(source.href.replace(/\.ts$/, '.js'));
}

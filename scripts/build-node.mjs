#!/usr/bin/env node
// Bundles the CLI (and through it the service of `unhalt serve`), the vCPU worker and the
// experiment runner into plain JavaScript in dist-node/, so that a start loads a few files instead
// of type-stripping a hundred TypeScript modules. bin/unhalt.mjs runs the bundle only while it is
// current (bin/bundle.mjs), else the sources. Built by `postinstall` and by .ci/run; uses the
// bundler vite itself is built on (rolldown, installed with vite). Without it (an install without
// dev dependencies) there is simply no bundle, and the sources run.
//
// Two rewrites keep the bundle behaving as the sources do:
//   - `import.meta.url` in every module means its source file's URL (written relative to the
//     bundle, so a moved checkout still works): paths to assets/, renderer/dist and the like stay
//     right. Except in electron/entry-url.ts, which is how code finds the bundle itself.
//   - every module named through `entryUrl(new URL('...', import.meta.url))` (a worker's script,
//     a lazily imported runner) becomes an entry of the same base name, where entryUrl looks.
// Packages (koffi's native addon, ws, ...) stay external: they load from node_modules as usual.
//
//   node scripts/build-node.mjs [--quiet] [--if-possible]
import { mkdirSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { basename, dirname, relative, resolve, sep } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { BUNDLE_DIR, BUNDLE_FORMAT, INPUTS_FILE, stampOf } from '../bin/bundle.mjs';

export const ROOT = fileURLToPath(new URL('..', import.meta.url));
export const OUT = resolve(ROOT, BUNDLE_DIR);
/** The entries bin/unhalt.mjs and the benches import; the plugin adds the ones the code names. */
const INPUTS = {
  cli: 'electron/cli.ts',
  'worker-pool': 'electron/vmm/vcpu/worker-pool.ts',
  vm: 'electron/vmm/vm.ts',
};
const ENTRY_URL_MODULE = resolve(ROOT, 'electron/entry-url.ts');
const NAMED_ENTRY = /entryUrl\(new URL\((['"])(\.{1,2}\/[^'"]+\.ts)\1, import\.meta\.url\)\)/g;

function unhaltSources(outDir) {
  const named = new Map(); // entry file name -> source path
  return {
    name: 'unhalt-sources',
    transform(code, id) {
      if (!id.startsWith(ROOT) || id.includes(`${sep}node_modules${sep}`) || id === ENTRY_URL_MODULE) return null;
      for (const m of code.matchAll(NAMED_ENTRY)) {
        const source = resolve(dirname(id), m[2]);
        const fileName = basename(source).replace(/\.ts$/, '.mjs');
        if (named.has(fileName) && named.get(fileName) !== source) {
          this.error(`two entries named ${fileName}: ${named.get(fileName)} and ${source} (entryUrl finds entries by base name)`);
        }
        if (!named.has(fileName)) {
          named.set(fileName, source);
          this.emitFile({ type: 'chunk', id: source, fileName });
        }
      }
      if (!code.includes('import.meta.url')) return null;
      const fromBundle = relative(outDir, id).split(sep).join('/');
      return { code: code.replaceAll('import.meta.url', `new URL(${JSON.stringify(fromBundle)}, import.meta.url).href`), map: null };
    },
  };
}

export async function buildNodeBundle({ outDir = OUT } = {}) {
  const { rolldown } = await import('rolldown');
  const bundle = await rolldown({
    input: Object.fromEntries(Object.entries(INPUTS).map(([name, path]) => [name, resolve(ROOT, path)])),
    platform: 'node',
    // Anything that is not a path of ours is a package or a Node built-in: loaded at run time.
    external: (id) => !id.startsWith('.') && !id.startsWith('/') && !/^[A-Za-z]:/.test(id),
    plugins: [unhaltSources(outDir)],
    logLevel: 'warn',
  });
  const staging = `${outDir}.building-${process.pid}`;
  rmSync(staging, { recursive: true, force: true });
  try {
    const { output } = await bundle.write({
      dir: staging,
      format: 'esm',
      entryFileNames: '[name].mjs',
      chunkFileNames: '[name]-[hash].mjs',
      sourcemap: true,
      keepNames: true, // class and function names stay what the sources say (errors, logs)
    });
    await bundle.close();
    const inputs = new Set([fileURLToPath(import.meta.url), fileURLToPath(new URL('../bin/bundle.mjs', import.meta.url))]);
    for (const o of output) if (o.type === 'chunk') for (const id of o.moduleIds) if (id.startsWith(ROOT) && !id.startsWith('\0')) inputs.add(id);
    const files = [...inputs].sort().map((path) => [relative(ROOT, path).split(sep).join('/'), ...stampOf(path)]);
    writeFileSync(resolve(staging, INPUTS_FILE), `${JSON.stringify({ format: BUNDLE_FORMAT, built: new Date().toISOString(), files }, null, 1)}\n`);
    rmSync(outDir, { recursive: true, force: true });
    mkdirSync(dirname(outDir), { recursive: true });
    renameSync(staging, outDir);
    return { outDir, files: files.length, chunks: output.filter((o) => o.type === 'chunk').length };
  } finally {
    rmSync(staging, { recursive: true, force: true });
  }
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const quiet = process.argv.includes('--quiet');
  const ifPossible = process.argv.includes('--if-possible');
  try {
    const t0 = performance.now();
    const r = await buildNodeBundle();
    if (!quiet) process.stderr.write(`build-node: ${r.chunks} files from ${r.files} sources in ${pathToFileURL(r.outDir).pathname} (${Math.round(performance.now() - t0)} ms)\n`);
  } catch (e) {
    // `postinstall` of an install without dev dependencies: no bundler, so the sources run.
    if (ifPossible && e?.code === 'ERR_MODULE_NOT_FOUND' && /rolldown/.test(e.message)) {
      if (!quiet) process.stderr.write('build-node: no bundler installed (no dev dependencies); Unhalt will run from its sources\n');
    } else {
      process.stderr.write(`build-node: ${e?.stack ?? e}\n`);
      process.exit(1);
    }
  }
}

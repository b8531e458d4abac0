#!/usr/bin/env node
// The README's screenshots, taken from a real run: runs the end-to-end UI file that takes them
// (test/e2e/app.test.ts: the wizard, a running probe VM's page with its console and charts, an
// A/B experiment in Compare) and copies the chosen PNGs to docs/images/ under fixed names.
//
// Where this host has a KVM device this user may open, the file runs in the host's e2e lane
// (`npx vitest run --project e2e FILE`) and its screenshots land in test/artifacts/. Where it has
// none, it runs in the nested lane's L1 with its Chromium on this host
// (`UNHALT_NESTED_FILES=FILE npx vitest run --project nested`, docs/nested.md) and its
// screenshots come out in test/artifacts/nested/l1.N/results/artifacts/.
//
//   node scripts/screenshots.mjs                 run, then copy (about 2 min with a KVM, ~10 in L1)
//   node scripts/screenshots.mjs --dry-run       say what would run and be copied, run nothing
//   node scripts/screenshots.mjs --where nested  choose the place: host, nested or auto (default)
//   node scripts/screenshots.mjs --copy-only     copy from the last run's artifacts, run nothing
//   node scripts/screenshots.mjs --allow-failures  copy even if a check of the file failed
//
// Exit 0 when every image was copied; 1 when the run failed (unless --allow-failures), or an image
// is missing, or was not written by this run (older than its start): each one named.
import { spawnSync } from 'node:child_process';
import { accessSync, constants, copyFileSync, existsSync, mkdirSync, readdirSync, rmSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../', import.meta.url));
const OUT = join(ROOT, 'docs/images');
const HOST_ARTIFACTS = join(ROOT, 'test/artifacts');
const NESTED_ARTIFACTS = join(ROOT, 'test/artifacts/nested');

/** The e2e file that takes the screenshots (it starts VMs: test/support/e2e-files.ts E2E_VM_FILES). */
const FILE = 'test/e2e/app.test.ts';
/** What the file writes into test/artifacts/ -> the README's name in docs/images/. */
const IMAGES = [
  { from: 'wizard-summary.png', to: 'wizard.png' },
  { from: 'vm-view.png', to: 'vm-page.png' },
  { from: 'compare.png', to: 'compare.png' },
];

const USAGE = 'usage: node scripts/screenshots.mjs [--dry-run] [--copy-only] [--allow-failures] [--where auto|host|nested]';
const say = (line) => process.stderr.write(`screenshots: ${line}\n`);
const fail = (line) => {
  say(line);
  process.exit(1);
};

const opts = { dryRun: false, copyOnly: false, allowFailures: false, where: 'auto' };
const args = process.argv.slice(2);
for (let i = 0; i < args.length; i++) {
  const a = args[i];
  if (a === '--dry-run') opts.dryRun = true;
  else if (a === '--copy-only') opts.copyOnly = true;
  else if (a === '--allow-failures') opts.allowFailures = true;
  else if (a === '--where' || a.startsWith('--where=')) {
    const v = a.includes('=') ? a.slice(a.indexOf('=') + 1) : args[++i];
    if (!['auto', 'host', 'nested'].includes(v ?? '')) fail(`--where takes auto, host or nested, not ${JSON.stringify(v ?? '')}\n${USAGE}`);
    opts.where = v;
  } else if (a === '--help' || a === '-h') {
    process.stdout.write(`${USAGE}\n`);
    process.exit(0);
  } else fail(`unknown argument ${JSON.stringify(a)}\n${USAGE}`);
}

/** As test/support/e2e-files.ts hostHasKvm: a KVM device this user may open (UNHALT_KVM_DEVICE overrides /dev/kvm). */
function hostHasKvm() {
  try {
    accessSync(process.env.UNHALT_KVM_DEVICE ?? '/dev/kvm', constants.R_OK | constants.W_OK);
    return true;
  } catch {
    return false;
  }
}

const kvm = hostHasKvm();
const where = opts.where === 'auto' ? (kvm ? 'host' : 'nested') : opts.where;
const device = process.env.UNHALT_KVM_DEVICE ?? '/dev/kvm';
const why = opts.where !== 'auto' ? 'chosen with --where'
  : kvm ? `${device} can be opened here` : `${device} cannot be opened here`;
if (where === 'host' && !kvm) say(`warning: ${device} cannot be opened here; the e2e lane leaves ${FILE} out on such a host`);

const run = where === 'host'
  ? { env: {}, cmd: 'npx', args: ['vitest', 'run', '--project', 'e2e', FILE] }
  : { env: { UNHALT_NESTED_FILES: FILE }, cmd: 'npx', args: ['vitest', 'run', '--project', 'nested'] };
const shown = `${Object.entries(run.env).map(([k, v]) => `${k}=${v} `).join('')}${[run.cmd, ...run.args].join(' ')}`;

/** Where the run leaves one screenshot: test/artifacts/NAME, or in L1's results (the first L1 that has it). */
function source(name) {
  if (where === 'host') return join(HOST_ARTIFACTS, name);
  const l1s = existsSync(NESTED_ARTIFACTS) ? readdirSync(NESTED_ARTIFACTS).filter((d) => /^l1\.\d+$/.test(d)).sort() : [];
  for (const d of l1s) {
    const p = join(NESTED_ARTIFACTS, d, 'results/artifacts', name);
    if (existsSync(p)) return p;
  }
  return join(NESTED_ARTIFACTS, 'l1.N/results/artifacts', name);
}

const rel = (p) => relative(ROOT, p);
if (opts.dryRun) {
  process.stdout.write(`place: ${where === 'host' ? "this host's e2e lane" : "the nested lane's L1 (Chromium on this host)"} (${why})\n`);
  process.stdout.write(opts.copyOnly ? 'would run: nothing (--copy-only)\n' : `would run (in ${ROOT}): ${shown}\n`);
  for (const img of IMAGES) process.stdout.write(`would copy: ${rel(source(img.from))} -> ${rel(join(OUT, img.to))}\n`);
  process.exit(0);
}

const started = Date.now();
if (!opts.copyOnly) {
  // A screenshot left by an earlier run must not pass for this one's (the nested lane clears its own folder).
  if (where === 'host') for (const img of IMAGES) rmSync(join(HOST_ARTIFACTS, img.from), { force: true });
  say(`${where === 'host' ? "this host's e2e lane" : "the nested lane's L1"} (${why}): ${shown}`);
  const r = spawnSync(run.cmd, run.args, { cwd: ROOT, stdio: 'inherit', env: { ...process.env, ...run.env } });
  const status = r.status ?? 1;
  if (status !== 0) {
    if (!opts.allowFailures) fail(`the run failed (exit ${r.error ? r.error.message : status}): nothing copied; its output is above (--allow-failures copies what it did take)`);
    say(`the run failed (exit ${status}); copying what it took, as --allow-failures asks`);
  }
}

const missing = [];
const copies = [];
for (const img of IMAGES) {
  const from = source(img.from);
  if (!existsSync(from)) {
    missing.push(`${img.from}: not found at ${rel(from)}`);
    continue;
  }
  // On the host, older than the run means an earlier run's (removed before it, so not expected);
  // the nested lane clears test/artifacts/nested/ itself, and L1's clock is not this host's.
  if (!opts.copyOnly && where === 'host' && statSync(from).mtimeMs < started - 2000) {
    missing.push(`${img.from}: ${rel(from)} is older than this run`);
    continue;
  }
  copies.push({ from, to: join(OUT, img.to) });
}
if (missing.length) fail(`missing screenshot(s), docs/images/ left as it was:\n  ${missing.join('\n  ')}\n(${FILE} writes them; a check that was skipped takes none: its reason is in the run's output)`);
mkdirSync(OUT, { recursive: true });
for (const c of copies) {
  copyFileSync(c.from, c.to);
  process.stdout.write(`${rel(c.from)} -> ${rel(c.to)} (${(statSync(c.to).size / 1024).toFixed(0)} KiB)\n`);
}

#!/usr/bin/env node
// The README's screenshots, taken from a real run: runs the end-to-end UI files that take them
// (test/e2e/app.test.ts: the wizard and an A/B experiment in Compare; chart-drawing.test.ts: a
// probe VM's page under the ipi scenario's load; linux-vm-page.test.ts: the built-in Linux's page
// under `yes | cat`) and copies the chosen PNGs to docs/images/ under fixed names.
//
// A file runs in this host's e2e lane (`npx vitest run --project e2e FILES`, screenshots in
// test/artifacts/) where this host has what it needs: a KVM device this user may open, and for
// the Linux file a KVM with hardware semantics (kvm_intel or kvm_amd, not kvm_pvm). The others run
// in the nested lane's L1 with their Chromium on this host
// (`UNHALT_NESTED_FILES='FILES' npx vitest run --project nested`, docs/nested.md); their
// screenshots come out in test/artifacts/nested/l1.N/results/artifacts/.
//
//   node scripts/screenshots.mjs                 run, then copy (a few minutes with a KVM, ~15 in L1)
//   node scripts/screenshots.mjs --dry-run       say what would run and be copied, run nothing
//   node scripts/screenshots.mjs --where nested  choose the place: host, nested or auto (default)
//   node scripts/screenshots.mjs --copy-only     copy from the last run's artifacts, run nothing
//   node scripts/screenshots.mjs --allow-failures  copy even if a check of a file failed
//
// Exit 0 when every image was copied; 1 when a run failed (unless --allow-failures), or an image
// is missing, or was not written by this run (older than its start): each one named.
import { spawnSync } from 'node:child_process';
import { accessSync, constants, copyFileSync, existsSync, mkdirSync, readdirSync, rmSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../', import.meta.url));
const OUT = join(ROOT, 'docs/images');
const HOST_ARTIFACTS = join(ROOT, 'test/artifacts');
const NESTED_ARTIFACTS = join(ROOT, 'test/artifacts/nested');

/**
 * The e2e files that take the screenshots, what each needs of this host's KVM, and what it writes
 * into test/artifacts/ -> the README's name in docs/images/.
 */
const FILES = [
  { file: 'test/e2e/app.test.ts', needs: 'kvm', images: [{ from: 'wizard-summary.png', to: 'wizard.png' }, { from: 'compare.png', to: 'compare.png' }] },
  { file: 'test/e2e/chart-drawing.test.ts', needs: 'kvm', images: [{ from: 'probe-vm-page.png', to: 'vm-page.png' }] },
  { file: 'test/e2e/linux-vm-page.test.ts', needs: 'hardware', images: [{ from: 'linux-vm-page.png', to: 'linux-vm-page.png' }] },
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

/** As electron/vmm/host.ts kvmBackend: hardware semantics are kvm_intel's or kvm_amd's, never kvm_pvm's. */
function hardwareKvm() {
  const mod = (m) => existsSync(`/sys/module/${m}`);
  return !existsSync(process.env.UNHALT_PVM_MODULE_PATH ?? '/sys/module/kvm_pvm') && (mod('kvm_intel') || mod('kvm_amd'));
}

const kvm = hostHasKvm();
const hardware = kvm && hardwareKvm();
const device = process.env.UNHALT_KVM_DEVICE ?? '/dev/kvm';
const meets = (needs) => (needs === 'hardware' ? hardware : kvm);
const placeOf = (f) => (opts.where !== 'auto' ? opts.where : meets(f.needs) ? 'host' : 'nested');
const whyOf = (f) => (opts.where !== 'auto' ? 'chosen with --where'
  : !kvm ? `${device} cannot be opened here`
  : f.needs === 'hardware' ? (hardware ? `${device} has hardware semantics` : `${device} lacks hardware semantics (a stock Linux needs them)`)
  : `${device} can be opened here`);
for (const f of FILES) if (placeOf(f) === 'host' && !meets(f.needs)) say(`warning: ${f.file} needs ${f.needs === 'hardware' ? 'a KVM with hardware semantics' : `a KVM device (${device})`}, which this host lacks; it will skip here`);

const hostFiles = FILES.filter((f) => placeOf(f) === 'host');
const nestedFiles = FILES.filter((f) => placeOf(f) === 'nested');
const runs = [
  ...(hostFiles.length ? [{ where: 'host', env: {}, cmd: 'npx', args: ['vitest', 'run', '--project', 'e2e', ...hostFiles.map((f) => f.file)] }] : []),
  ...(nestedFiles.length ? [{ where: 'nested', env: { UNHALT_NESTED_FILES: nestedFiles.map((f) => f.file).join(' ') }, cmd: 'npx', args: ['vitest', 'run', '--project', 'nested'] }] : []),
];
const shown = (run) => `${Object.entries(run.env).map(([k, v]) => `${k}='${v}' `).join('')}${[run.cmd, ...run.args].join(' ')}`;

/** Where a run leaves one screenshot: test/artifacts/NAME, or in L1's results (the first L1 that has it). */
function source(where, name) {
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
  for (const f of FILES) process.stdout.write(`${f.file}: ${placeOf(f) === 'host' ? "this host's e2e lane" : "the nested lane's L1 (Chromium on this host)"} (${whyOf(f)})\n`);
  if (opts.copyOnly) process.stdout.write('would run: nothing (--copy-only)\n');
  else for (const r of runs) process.stdout.write(`would run (in ${ROOT}): ${shown(r)}\n`);
  for (const f of FILES) for (const img of f.images) process.stdout.write(`would copy: ${rel(source(placeOf(f), img.from))} -> ${rel(join(OUT, img.to))}\n`);
  process.exit(0);
}

const started = Date.now();
if (!opts.copyOnly) {
  // A screenshot left by an earlier run must not pass for this one's (the nested lane clears its own folder).
  for (const f of hostFiles) for (const img of f.images) rmSync(join(HOST_ARTIFACTS, img.from), { force: true });
  for (const run of runs) {
    say(`${run.where === 'host' ? "this host's e2e lane" : "the nested lane's L1"}: ${shown(run)}`);
    const r = spawnSync(run.cmd, run.args, { cwd: ROOT, stdio: 'inherit', env: { ...process.env, ...run.env } });
    const status = r.status ?? 1;
    if (status !== 0) {
      if (!opts.allowFailures) fail(`the run failed (exit ${r.error ? r.error.message : status}): nothing copied; its output is above (--allow-failures copies what it did take)`);
      say(`the run failed (exit ${status}); copying what it took, as --allow-failures asks`);
    }
  }
}

const missing = [];
const copies = [];
for (const f of FILES) for (const img of f.images) {
  const where = placeOf(f);
  const from = source(where, img.from);
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
if (missing.length) fail(`missing screenshot(s), docs/images/ left as it was:\n  ${missing.join('\n  ')}\n(the files above write them; a check that was skipped takes none: its reason is in the run's output)`);
mkdirSync(OUT, { recursive: true });
for (const c of copies) {
  copyFileSync(c.from, c.to);
  process.stdout.write(`${rel(c.from)} -> ${rel(c.to)} (${(statSync(c.to).size / 1024).toFixed(0)} KiB)\n`);
}

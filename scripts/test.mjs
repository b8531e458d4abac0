// `npm test`: type-check, then each vitest lane in turn (see vitest.config.ts). Lanes run one
// after another because the KVM, e2e and Linux lanes each want the machine's CPUs to themselves.
// Extra arguments select lanes: `npm test -- unit kvm`.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

// The nested lane (hardware-semantics KVM under QEMU TCG, docs/nested.md) is last: it runs every
// check whose outcome depends on KVM's semantics, also where this host has no /dev/kvm at all.
const ALL = ['unit', 'kvm', 'e2e', 'linux', 'nested'];
const lanes = process.argv.slice(2).length ? process.argv.slice(2) : ALL;
for (const lane of lanes) {
  if (!ALL.includes(lane)) {
    console.error(`unknown test lane "${lane}"; lanes: ${ALL.join(', ')}`);
    process.exit(1);
  }
}

const run = (cmd, args) => {
  console.log(`\n> ${[cmd, ...args].join(' ')}`);
  const r = spawnSync(cmd, args, { stdio: 'inherit' });
  return r.status ?? 1;
};

let failed = run('npx', ['tsc', '-p', 'tsconfig.json', '--noEmit']) !== 0;
if (!failed && process.env.UNHALT_SKIP_RENDERER_TYPECHECK !== '1') failed = run('npx', ['tsc', '-p', 'renderer/tsconfig.json', '--noEmit']) !== 0;
const totals = { passed: 0, failed: 0, skipped: 0 };
const NESTED_TOTALS = new URL('../test/artifacts/nested/totals.json', import.meta.url);
const reports = mkdtempSync(join(tmpdir(), 'unhalt-test-'));
for (const lane of lanes) {
  if (failed) break;
  const json = join(reports, `${lane}.json`);
  failed = run('npx', ['vitest', 'run', '--project', lane, '--passWithNoTests',
    '--reporter=default', '--reporter=json', `--outputFile.json=${json}`]) !== 0;
  try {
    const r = JSON.parse(readFileSync(json, 'utf8'));
    totals.passed += r.numPassedTests;
    totals.failed += r.numFailedTests;
    totals.skipped += r.numPendingTests + (r.numTodoTests ?? 0);
  } catch {
    failed = true; // no report: the lane did not run properly
  }
  // The nested lane's own tests are its phases; the checks it ran inside L1 count too.
  if (lane === 'nested') {
    try {
      const inner = JSON.parse(readFileSync(NESTED_TOTALS, 'utf8'));
      console.log(`nested: inside L1 ${inner.passed} passed, ${inner.failed} failed, ${inner.skipped} skipped`);
      totals.passed += inner.passed;
      totals.failed += inner.failed;
      totals.skipped += inner.skipped;
    } catch { /* no results came out of L1: the lane's own tests have failed already */ }
  }
}
rmSync(reports, { recursive: true, force: true });
// One closing line for CI to read, over all lanes.
console.log(`\ntests: ${totals.passed} passed, ${totals.failed} failed, ${totals.skipped} skipped`);
process.exit(failed || totals.failed > 0 ? 1 : 0);

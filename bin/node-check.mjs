// Which Node can run Unhalt, in one place: bin/unhalt.mjs (before anything else), `unhalt doctor`
// and .ci/node-env.sh (which scripts/setup-and-run.sh sources) all ask here. Plain JavaScript that
// any Node parses: an old one must get as far as saying it is too old, and which Node to use.
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';

/** Node's type stripping (on by default from 22.18) runs Unhalt's TypeScript sources. */
export const MIN_NODE = '22.18';

export function nodeTooOld(version = process.versions.node) {
  const [major, minor] = version.replace(/^v/, '').split('.').map(Number);
  const [wantMajor, wantMinor] = MIN_NODE.split('.').map(Number);
  return major < wantMajor || (major === wantMajor && minor < wantMinor);
}

/** The Node that set-up fetched into ROOT/.node (scripts/setup-and-run.sh), if it is there and runs. */
export function fetchedNode(root) {
  const bin = join(root, '.node', 'bin', 'node');
  if (!existsSync(bin)) return null;
  try {
    const version = execFileSync(bin, ['--version'], { encoding: 'utf8', timeout: 10_000, stdio: ['ignore', 'pipe', 'ignore'] }).trim();
    return nodeTooOld(version) ? null : { bin, dir: join(root, '.node', 'bin'), version };
  } catch {
    return null;
  }
}

/** What to tell a user whose Node is too old: which Node to use instead, and how. */
export function tooOldAdvice(root, args = [], version = process.versions.node, execPath = process.execPath) {
  const head = `Node ${version} (${execPath}) is too old; Unhalt needs Node >= ${MIN_NODE}`;
  const fetched = fetchedNode(root);
  const rest = args.length ? ` ${args.join(' ')}` : '';
  if (fetched) {
    return `${head}. Set-up fetched Node ${fetched.version} into ${fetched.dir}: put it first on PATH `
      + `(export PATH="${fetched.dir}:$PATH") or run: ${fetched.bin} ${join(root, 'bin', 'unhalt.mjs')}${rest}`;
  }
  return `${head}. Run: bash ${join(root, 'scripts', 'setup-and-run.sh')} (it fetches Node 24 into ${join(root, '.node', 'bin')} `
    + `when the system's is older), or install Node >= ${MIN_NODE} (README, "Two commands")`;
}

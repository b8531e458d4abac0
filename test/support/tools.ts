// Test support: a host program a check needs. Where it is missing the check skips with a printed
// reason — except in CI (CI set, as .ci/run sets it), which installs every such program: there a
// missing one fails the file in one line naming the Debian package, never a silent skip.
import { spawnSync } from 'node:child_process';

/** Undefined when `command` runs here; else why the checks that need it skip (outside CI). */
export function missingTool(command: string, debianPackage: string): string | undefined {
  if (spawnSync(command, ['--version'], { stdio: 'ignore' }).error === undefined) return undefined;
  const why = `${command} is not installed (Debian: apt-get install ${debianPackage})`;
  if (process.env.CI) throw new Error(`${why}: CI installs it (.ci/run), so its checks may not skip`);
  console.log(`skipped: ${why}`);
  return why;
}

// Whether a process of this PID namespace still lives, asked the one way Unhalt asks it: the lock
// files' leftovers, conversions' temporary files and experiment records all name a pid, and each
// is removed or judged stale only when that pid is gone. Here in the VMM, the lowest layer that
// asks, so the service and the VMM share it.

/** The largest pid_t: kill(2) takes a 32-bit pid (Node refuses a bigger number with a TypeError). */
const PID_MAX = 0x7fff_ffff;

/**
 * True while a process with this pid exists (any user's: kill(pid, 0) failing with EPERM means
 * it is there). A number that cannot be a pid (0 and negatives name process groups to kill(2),
 * fractions, larger than a pid_t) names no process: false.
 */
export function pidAlive(pid: number): boolean {
  if (!Number.isInteger(pid) || pid <= 0 || pid > PID_MAX) return false;
  if (pid === process.pid) return true;
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    // EPERM: alive, owned by another user; ESRCH: gone.
    return (e as NodeJS.ErrnoException).code !== 'ESRCH';
  }
}

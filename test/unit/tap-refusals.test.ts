// Taps that exist but may not be had, refused by openTap in one line that says why: another
// user's tap (its owner set with `ip tuntap add ... user`) opened without CAP_NET_ADMIN, and a
// tap another process has attached. Each case runs in network and mount namespaces of its own
// (`unshare -n -m`: gone with its process), so the host's interfaces are never touched. Needs root
// (to make the namespace and the taps), as CI is; a user's run says why it did not run these.
import { spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';

const TAP_MODULE = new URL('../../native/net/tap.ts', import.meta.url).href;
const canNamespace = process.getuid?.() === 0 && spawnSync('unshare', ['-n', '-m', 'true']).status === 0;
if (!canNamespace) console.log('tap-refusals: not run: needs root and unshare -n -m (CI runs as root)');

/**
 * Runs `setup` (shell, as root) in a new network namespace, then a Node script that opens the
 * taps named in `opens` one after another in one process (each fd kept open), prefixed by
 * `asUser` (setpriv arguments). Returns one line per open: "opened" or the TapError's message.
 */
function inNamespace(setup: string, opens: string[], asUser: string[] = []): string[] {
  const script = `import(${JSON.stringify(TAP_MODULE)}).then((t) => {
    for (const name of ${JSON.stringify(opens)}) { try { t.openTap(name); console.log('opened'); } catch (e) { console.log(e.message); } }
  })`;
  // A mount namespace too: /sys shows this network namespace's interfaces (openTap looks there),
  // and /dev/net/tun is a node of its own with the usual 0666 mode (some hosts ship it 0600:
  // the host's node is never changed). The setup's shell then runs the user's command as its
  // arguments, so nothing is quoted twice.
  const prepare = 'mount -t sysfs sysfs /sys; mount -t tmpfs tmpfs /dev/net; mknod -m 0666 /dev/net/tun c 10 200';
  const r = spawnSync('unshare', ['-n', '-m', 'sh', '-ec', `${prepare}\n${setup}\nexec "$@"`, 'sh', ...asUser, process.execPath, '-e', script], { encoding: 'utf8' });
  expect(r.status, r.stderr).toBe(0);
  return r.stdout.trim().split('\n');
}

describe.skipIf(!canNamespace)('taps that exist and may not be opened', () => {
  it('another user\'s tap, without CAP_NET_ADMIN: refused, saying whose it is and what to do', () => {
    const lines = inNamespace('ip tuntap add dev utap0 mode tap user 65534',
      ['utap0'], ['setpriv', '--inh-caps=-net_admin', '--bounding-set=-net_admin']);
    expect(lines).toEqual(['tap utap0 cannot be opened: EPERM: Operation not permitted (it belongs to another user or group: ip tuntap add ... user YOU, or run with CAP_NET_ADMIN)']);
  });

  it('a tap another VM has attached: the second open is refused as attached, the first keeps it', () => {
    const lines = inNamespace('ip tuntap add dev btap0 mode tap', ['btap0', 'btap0']);
    expect(lines).toEqual(['opened', 'tap btap0 cannot be opened: EBUSY: Device or resource busy (another process has it attached)']);
  });

  it('the owner of a tap opens it without any privilege', () => {
    const lines = inNamespace('ip tuntap add dev otap0 mode tap user 65534',
      ['otap0'], ['setpriv', '--reuid=65534', '--regid=65534', '--clear-groups', '--inh-caps=-all']);
    expect(lines).toEqual(['opened']);
  });
});

// Taps that exist but may not be had, refused by openTap in one line that says why: another
// user's tap (its owner set with `ip tuntap add ... user`) opened without CAP_NET_ADMIN, and a
// tap another process has attached. And whether a tap exists at all is decided in the caller's
// own network namespace: after a plain `unshare -n` (/sys not mounted again, so /sys/class/net
// still lists the first namespace's interfaces) a tap of the new namespace is found and one of
// the first namespace only is not. Each case runs in network, mount and PID namespaces of its
// own (`unshare -n -m -p`, and `unshare -n` inside it: gone with their processes, the taps made
// in them too), so the host's interfaces are never touched. Needs root (to make the namespaces
// and the taps), as CI is; a user's run says why it did not run these.
import { spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';

const TAP_MODULE = new URL('../../native/net/tap.ts', import.meta.url).href;
const canNamespace = process.getuid?.() === 0 && spawnSync('unshare', ['-n', '-m', '-p', '--kill-child', 'true']).status === 0;
if (!canNamespace) console.log('tap-refusals: not run: needs root and unshare -n -m -p --kill-child (CI runs as root)');

const UNPRIVILEGED_OWNER = ['setpriv', '--reuid=65534', '--regid=65534', '--clear-groups', '--inh-caps=-all'];
const ROOT_WITHOUT_NET_ADMIN = ['setpriv', '--inh-caps=-net_admin', '--bounding-set=-net_admin'];

interface Namespaces {
  /** Shell run as root in the new network namespace (with /sys mounted for it). */
  setup: string;
  /**
   * When set: shell run as root in a second network namespace made after `setup` by a plain
   * `unshare -n`, /sys left as it was (still the first namespace's); the opens run there.
   */
  inner?: string;
  /** Taps opened one after another in one process (each fd kept open). */
  opens: string[];
  /** setpriv arguments the opening process runs under. */
  asUser?: string[];
  /** Shell run by the opening process after its opens, its fds still open; its output is the last line. */
  check?: string;
}

/**
 * Runs `setup` (shell, as root) in a new network namespace, then (when `inner` is given) `inner`
 * in a second one, then a Node script that opens the taps named in `opens` there, prefixed by
 * `asUser`. Returns one line per open: "opened" or the TapError's message (and `check`'s output).
 */
function inNamespace({ setup, inner, opens, asUser = [], check }: Namespaces): string[] {
  const script = `import(${JSON.stringify(TAP_MODULE)}).then((t) => {
    for (const name of ${JSON.stringify(opens)}) { try { t.openTap(name); console.log('opened'); } catch (e) { console.log(e.message); } }
    ${check ? `console.log(require('node:child_process').execSync(${JSON.stringify(check)}, { encoding: 'utf8' }).trim());` : ''}
  })`;
  // A mount namespace too: /sys is mounted again to show the first network namespace's
  // interfaces (not the host's: the second namespace, if any, sees that one through it), and
  // /dev/net/tun is a node of its own with the usual 0666 mode (some hosts ship it 0600: the
  // host's node is never changed). Each shell then runs the next command as its arguments (the
  // second namespace's shell is the first one's `$1`), so nothing is quoted twice. A PID
  // namespace too, killed with unshare (--kill-child): a test that times out leaves no process,
  // so no namespace or tap, behind. The second `unshare -n` forks: its parent stays in the first
  // network namespace, which would otherwise go (its taps with it) when its last process left it.
  const prepare = 'mount -t sysfs sysfs /sys; mount -t tmpfs tmpfs /dev/net; mknod -m 0666 /dev/net/tun c 10 200';
  const user = [...asUser, process.execPath, '-e', script];
  const args = inner === undefined
    ? ['sh', '-ec', `${prepare}\n${setup}\nexec "$@"`, 'sh', ...user]
    : ['sh', '-ec', `${prepare}\n${setup}\ninner=$1; shift\nexec unshare -n --fork sh -ec "$inner" sh "$@"`, 'sh', `${inner}\nexec "$@"`, ...user];
  const r = spawnSync('unshare', ['-n', '-m', '-p', '--kill-child', ...args], { encoding: 'utf8', timeout: 60_000, killSignal: 'SIGKILL' });
  expect(r.status, r.stderr).toBe(0);
  return r.stdout.trim().split('\n');
}

/** Whether `ip -o link show` output lists IFF_UP among the interface's flags. */
const isUp = (line: string) => /[<,]UP[,>]/.test(line); // a flag of ip's <...> list (NO-CARRIER has a hyphen)

describe.skipIf(!canNamespace)('taps that exist and may not be opened', () => {
  it('another user\'s tap, without CAP_NET_ADMIN: refused, saying whose it is and what to do', () => {
    const lines = inNamespace({ setup: 'ip tuntap add dev utap0 mode tap user 65534', opens: ['utap0'], asUser: ROOT_WITHOUT_NET_ADMIN });
    expect(lines).toEqual(['tap utap0 cannot be opened: EPERM: Operation not permitted (it belongs to another user or group: ip tuntap add ... user YOU, or run with CAP_NET_ADMIN)']);
  });

  it('a tap another VM has attached: the second open is refused as attached, the first keeps it', () => {
    const lines = inNamespace({ setup: 'ip tuntap add dev btap0 mode tap', opens: ['btap0', 'btap0'] });
    expect(lines).toEqual(['opened', 'tap btap0 cannot be opened: EBUSY: Device or resource busy (another process has it attached)']);
  });

  it('the owner of a tap opens it without any privilege', () => {
    const lines = inNamespace({ setup: 'ip tuntap add dev otap0 mode tap user 65534', opens: ['otap0'], asUser: UNPRIVILEGED_OWNER });
    expect(lines).toEqual(['opened']);
  });
});

describe.skipIf(!canNamespace)('names that are not taps', () => {
  it('an interface that is not a tap, and a TUN device: each refused in one line naming it', () => {
    const lines = inNamespace({ setup: 'ip tuntap add dev tun0 mode tun', opens: ['lo', 'tun0'] });
    expect(lines).toEqual([
      'lo is a network interface but not a tap (no TUN/TAP flags): give the name of a tap device',
      'tun0 is a TUN (IP) device, not a tap: create a tap (ip tuntap add dev NAME mode tap)',
    ]);
  });

  it('a name longer than an interface\'s is refused, not taken for the tap its first 15 characters name', () => {
    const lines = inNamespace({ setup: 'ip tuntap add dev longtapname0123 mode tap', opens: ['longtapname01234'] });
    expect(lines).toEqual(['tap "longtapname01234" is not an interface name (at most 15 characters)']);
  });
});

// After `unshare -n` (or `nsenter --net`) /sys still shows the namespace of whoever mounted it:
// here the first namespace's. The tap asked for must be looked for in the caller's own.
describe.skipIf(!canNamespace)('a tap is looked for in the caller\'s own network namespace, not in /sys', () => {
  it('a tap made in this namespace (/sys shows another) is found and opened by its owner without privilege', () => {
    const lines = inNamespace({ setup: 'true', inner: 'ip tuntap add dev ntap0 mode tap user 65534; ip link set ntap0 up',
      opens: ['ntap0'], asUser: UNPRIVILEGED_OWNER });
    expect(lines).toEqual(['opened']);
  });

  it('a tap made in this namespace is attached and left as its user left it (down), not taken for a new one and brought up', () => {
    const lines = inNamespace({ setup: 'true', inner: 'ip tuntap add dev ntap1 mode tap', opens: ['ntap1'], check: 'ip -o link show dev ntap1' });
    expect(lines).toHaveLength(2);
    expect(lines[0]).toBe('opened');
    expect(isUp(lines[1]), lines[1]).toBe(false);
  });

  it('a tap of this namespace is opened although the other namespace has a TUN device of that name', () => {
    const lines = inNamespace({ setup: 'ip tuntap add dev ntap2 mode tun', inner: 'ip tuntap add dev ntap2 mode tap', opens: ['ntap2'] });
    expect(lines).toEqual(['opened']);
  });

  it('a tap of the other namespace only does not exist here: not opened, and a process that may not create one is told to', () => {
    const lines = inNamespace({ setup: 'ip tuntap add dev xtap0 mode tap user 65534; ip link set xtap0 up', inner: 'true',
      opens: ['xtap0'], asUser: UNPRIVILEGED_OWNER, check: 'ip -o link show dev xtap0 2>&1 || true' });
    expect(lines).toHaveLength(2);
    expect(lines[0]).toBe('tap xtap0 does not exist, and this process may not create it (creating needs CAP_NET_ADMIN): create it first (ip tuntap add dev xtap0 mode tap user $(id -un); ip link set xtap0 up)');
    expect(lines[1]).toMatch(/does not exist/); // nothing made here
  });

  it('a tap of the other namespace only, root without CAP_NET_ADMIN: does not exist here (not taken for another user\'s tap)', () => {
    const lines = inNamespace({ setup: 'ip tuntap add dev xtap1 mode tap', inner: 'true', opens: ['xtap1'], asUser: ROOT_WITHOUT_NET_ADMIN });
    expect(lines).toEqual(['tap xtap1 does not exist, and this process may not create it (creating needs CAP_NET_ADMIN): create it first (ip tuntap add dev xtap1 mode tap user $(id -un); ip link set xtap1 up)']);
  });

  it('a tap of the other namespace only, with CAP_NET_ADMIN: a new one is created here, in the caller\'s namespace, and brought up', () => {
    const lines = inNamespace({ setup: 'ip tuntap add dev xtap2 mode tap', inner: 'true', opens: ['xtap2'], check: 'ip -o link show dev xtap2' });
    expect(lines).toHaveLength(2);
    expect(lines[0]).toBe('opened');
    expect(lines[1]).toMatch(/^\d+: xtap2: /);
    expect(isUp(lines[1]), lines[1]).toBe(true);
  });
});

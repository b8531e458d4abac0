// The wizard's draft: what the fields hold (text as typed) round-trips to the stored
// configuration, and its field checks are the schema's and the host rules' own.
import { describe, expect, it } from 'vitest';
import { validateConfig } from '../../electron/vmm/config/vm-config.ts';
import { draftToConfig, initialDraft, withLateHost } from '../../renderer/src/views/wizard/draft.ts';
import { configToDraft } from '../../renderer/src/views/wizard/from-config.ts';
import { draftProblems } from '../../renderer/src/views/wizard/validate.ts';
import { configToDraftNet, draftNetToConfig, netSummary, newForward, type DraftNet } from '../../renderer/src/views/wizard/net-draft.ts';
import { checkForwardPort, checkNet, parseNetOption } from '../../electron/vmm/config/net-config.ts';
import type { HostInfo } from '../../electron/service/api.ts';

const host = { maxVcpus: 8, memoryMiB: 2048, hostCpus: [0, 1] } as unknown as HostInfo;

describe('the wizard draft', () => {
  it.each([
    { name: 'p', guest: 'probe', append: 'scenario=idle ms=500', cpus: 4, memoryMiB: 512, haltPollNs: 1000000, pin: [1, 0] },
    { name: 'e', guest: 'probe', append: 'foo=1', cpuPm: true },
    { name: 'r', guest: 'probe', append: 'scenario=virtio-rng bytes=64 rounds=4', rng: true },
    { name: 'n', guest: 'probe', append: 'scenario=net-dhcp', net: { mode: 'user', hostfwd: [{ protocol: 'tcp', hostAddress: '127.0.0.1', hostPort: 2222, guestAddress: '10.0.2.15', guestPort: 22 }] } },
    { name: 't', guest: 'probe', net: { mode: 'tap', tap: 'tap0' } },
    { name: 'u', guest: 'probe', net: parseNetOption('user,hostfwd=udp:0.0.0.0:5353-10.0.2.20:53,hostfwd=tcp::8080-:80') },
    { name: 'z', guest: 'probe', net: { mode: 'user', hostfwd: [] } },
    { name: 'k', guest: 'custom', kernel: '/boot/vmlinux', initrd: '/boot/initrd', append: 'console=ttyS0', pvmProfile: false, cpuFeatures: { 'kvm-pv-unhalt': false } },
  ])('edits %j without changing what it means', (raw) => {
    const c = validateConfig(raw);
    const again = validateConfig(draftToConfig(configToDraft(c, null, new Set())));
    expect({ ...again, append: again.append?.replace(/^scenario=echo /, '') }).toEqual(c);
  });

  it('keeps typed numbers as text and judges them by the API\'s rules', () => {
    const d = configToDraft(validateConfig({ name: 'x' }), null, new Set());
    expect(draftProblems({ ...d, cpus: '', memoryMiB: '512' }, host, [], null)).toEqual({ cpus: 'cpus is empty: give a whole number from 1 to 254' });
    expect(draftProblems({ ...d, cpus: '14', memoryMiB: '16512' }, host, [], null)).toEqual({
      cpus: "cpus=14 is more than this host's KVM allows (8)", memoryMiB: 'memory 16512 MiB is more than this host has (2048 MiB)',
    });
    expect(draftProblems({ ...d, pin: 'abc' }, host, [], null)).toEqual({ pin: 'pin: "abc" is not a host CPU number or range (e.g. 0,1 or 0-3)' });
    expect(draftProblems({ ...d, name: 'X' }, host, ['x'], null)).toEqual({ name: 'a VM named "x" already exists; choose another name' });
    expect(draftProblems({ ...d, cpus: '4', memoryMiB: '512' }, host, [], null)).toEqual({});
  });
});

describe('host info that arrives after the wizard opened (a slow host)', () => {
  const late = { ...host, maxVcpus: 1, machineTypes: [{ name: 'unhalt-9.9', newest: true }], defaultGuest: { kind: 'linux' }, guests: [{ kind: 'linux', built: true }] } as unknown as HostInfo;
  const opened = initialDraft(null, undefined, new Set());

  it('untouched, the whole draft follows the host (its default guest, machine type and vCPU limit)', () => {
    expect(withLateHost(opened, late, undefined, new Set(), new Set())).toEqual(initialDraft(late, undefined, new Set()));
    expect(initialDraft(late, undefined, new Set())).toMatchObject({ guest: 'linux', machine: 'unhalt-9.9', cpus: '1' });
  });

  it('keeps every typed field and the guest on screen; the host\'s defaults fill the rest for that guest', () => {
    const typed = { ...opened, name: 'net-1a2b', probeScenario: 'net-listen', probeArgs: 'port=7 wait_ms=60000' };
    const d = withLateHost(typed, late, undefined, new Set(), new Set(['name', 'probeScenario', 'probeArgs']));
    expect(d).toEqual({ ...initialDraft(late, 'probe', new Set()), name: 'net-1a2b', probeScenario: 'net-listen', probeArgs: 'port=7 wait_ms=60000' });
    expect(d).toMatchObject({ guest: 'probe', machine: 'unhalt-9.9', cpus: '1' });
  });
});

describe('the wizard\'s network', () => {
  const base = () => configToDraft(validateConfig({ name: 'x' }), null, new Set());
  const user = (...forwards: Partial<ReturnType<typeof newForward>>[]): DraftNet => ({ mode: 'user', tap: '', forwards: forwards.map((f) => ({ ...newForward(), ...f })) });

  it('shows a stored network as text fields, the defaults as the text syntax leaves them (empty guest address)', () => {
    expect(configToDraftNet(undefined)).toEqual({ mode: 'none', forwards: [], tap: '' });
    expect(configToDraftNet(parseNetOption('user,hostfwd=udp:0.0.0.0:5353-10.0.2.20:53,hostfwd=tcp::2222-:22'))).toEqual({
      mode: 'user', tap: '', forwards: [
        { protocol: 'udp', hostAddress: '0.0.0.0', hostPort: '5353', guestAddress: '10.0.2.20', guestPort: '53' },
        { protocol: 'tcp', hostAddress: '127.0.0.1', hostPort: '2222', guestAddress: '', guestPort: '22' },
      ],
    });
    expect(configToDraftNet({ mode: 'tap', tap: 'tap7' })).toEqual({ mode: 'tap', forwards: [], tap: 'tap7' });
  });

  it('a new forward listens on 127.0.0.1; typed ports and empty addresses become what the text syntax would give', () => {
    expect(newForward()).toMatchObject({ protocol: 'tcp', hostAddress: '127.0.0.1' });
    const d = { ...base(), net: user({ hostAddress: '', hostPort: ' 8080', guestPort: '80' }) };
    expect(validateConfig(draftToConfig(d)).net).toEqual(parseNetOption('user,hostfwd=tcp::8080-:80'));
    expect(netSummary(d.net)).toBe('user,hostfwd=tcp:127.0.0.1:8080-:80');
    expect(draftToConfig({ ...d, net: { ...d.net, mode: 'none' } }).net).toBeUndefined();
    // A tap chosen after forwards were typed: the configuration has the tap alone (the draft keeps the forwards for a switch back).
    expect(draftNetToConfig({ ...d.net, mode: 'tap', tap: ' tap0 ' })).toEqual({ mode: 'tap', tap: 'tap0' });
  });

  it('judges each field by the schema\'s field rule, in its words, at that field; the API refuses the same draft', () => {
    const rule = (v: unknown, which: 'host' | 'guest', n: number) => { try { checkForwardPort(v, which, `forward ${n}`); return ''; } catch (e) { return (e as Error).message; } };
    const d = { ...base(), net: user({ hostPort: '80x', guestPort: '80' }, { hostPort: '8081', guestPort: '70000', guestAddress: '10.0.2.2', hostAddress: '1.2.3' }) };
    expect(draftProblems(d, host, [], null)).toEqual({
      'net.0.hostPort': rule('80x', 'host', 1),
      'net.1.hostAddress': 'forward 2: the host address must be an IPv4 address such as 127.0.0.1, got "1.2.3"',
      'net.1.guestAddress': 'forward 2: the guest address must be a guest\'s address in 10.0.2.0/24 (by default 10.0.2.15), got "10.0.2.2"',
      'net.1.guestPort': rule(70000, 'guest', 2),
    });
    expect(rule('80x', 'host', 1)).toBe('forward 1: the host port must be 1 to 65535, got "80x"');
    expect(() => validateConfig(draftToConfig(d))).toThrow('a host forward: the host port must be 1 to 65535, got "80x"');
    expect(draftProblems({ ...d, net: user({ hostPort: '', guestPort: '22' }) }, host, [], null)).toEqual({ 'net.0.hostPort': 'forward 1: the host port must be 1 to 65535, got ""' });
  });

  it('a host port forwarded twice is refused at the repeat\'s host port in checkNet\'s words; another protocol or address is no repeat', () => {
    const d = { ...base(), net: user({ hostPort: '8080', guestPort: '80' }, { hostPort: '8080', guestPort: '81' }, { protocol: 'udp', hostPort: '8080', guestPort: '80' }, { hostAddress: '127.0.0.2', hostPort: '8080', guestPort: '80' }) };
    const words = (() => { try { checkNet(validateConfig(draftToConfig(d)).net); } catch (e) { return (e as Error).message; } })();
    expect(words).toBe('host port tcp 127.0.0.1:8080 is forwarded twice');
    expect(draftProblems(d, host, [], null)).toEqual({ 'net.1.hostPort': words });
  });

  it('a tap name is judged by the tap rule; no network and no forwards are no problem', () => {
    const d = base();
    expect(draftProblems({ ...d, net: { mode: 'tap', tap: '', forwards: [] } }, host, [], null)).toEqual({ 'net.tap': 'net tap needs the name of a tap interface (tap=NAME)' });
    expect(draftProblems({ ...d, net: { mode: 'tap', tap: 'a/b', forwards: [] } }, host, [], null)).toEqual({
      'net.tap': 'tap "a/b" is not an interface name (at most 15 letters, digits, dot, dash or underscore)',
    });
    // A bad forward typed before switching to a tap does not hold the tap back.
    expect(draftProblems({ ...d, net: { ...user({ hostPort: 'x' }), mode: 'tap', tap: 'tap0' } }, host, [], null)).toEqual({});
    expect(draftProblems({ ...d, net: user() }, host, [], null)).toEqual({});
  });
});

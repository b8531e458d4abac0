// The network's one syntax and rule (electron/vmm/config/net-config.ts) on every text surface:
// `--net`, config strings, saved JSON; QEMU's hostfwd syntax with its defaults, and what is
// refused (one line naming the part that is wrong).
import { afterAll, describe, expect, it } from 'vitest';
import { LibraryStore } from '../../electron/service/library-store.ts';
import { configFromOptions, optionsFromConfig } from '../../electron/vmm/config/cli-args.ts';
import { formatConfigString, parseConfigString } from '../../electron/vmm/config/config-string.ts';
import { checkNet, formatNetOption, macForVm, parseHostForward, parseNetOption } from '../../electron/vmm/config/net-config.ts';
import { ConfigError, validateConfig } from '../../electron/vmm/config/vm-config.ts';
import { removeTempHomes, tempHome } from '../support/temp-home.ts';

afterAll(removeTempHomes);

describe('hostfwd: QEMU\'s syntax', () => {
  it('takes protocol, addresses and ports, with QEMU\'s defaults (tcp, the first DHCP address) and 127.0.0.1 for an empty host address', () => {
    expect(parseHostForward('tcp:127.0.0.1:8080-:80')).toEqual({ protocol: 'tcp', hostAddress: '127.0.0.1', hostPort: 8080, guestAddress: '10.0.2.15', guestPort: 80 });
    expect(parseHostForward('udp::5353-10.0.2.20:53')).toEqual({ protocol: 'udp', hostAddress: '127.0.0.1', hostPort: 5353, guestAddress: '10.0.2.20', guestPort: 53 });
    expect(parseHostForward(':0.0.0.0:2222-:22')).toMatchObject({ protocol: 'tcp', hostAddress: '0.0.0.0', hostPort: 2222 });
    expect(parseHostForward(':127.000.0.1:1-:65535')).toMatchObject({ hostAddress: '127.0.0.1', hostPort: 1, guestPort: 65535 });
  });

  for (const [text, why] of [
    ['', /is malformed/],
    ['tcp:127.0.0.1:80', /is malformed/],
    ['tcp:127.0.0.1:80:22', /is malformed/],
    ['127.0.0.1:8080-:80', /is malformed/], // QEMU wants the protocol's field, even empty
    ['sctp::1-:2', /is malformed/],
    ['tcp::0-:22', /bad host port "0"/],
    ['tcp::65536-:22', /bad host port "65536"/],
    ['tcp::0x50-:22', /bad host port "0x50"/],
    ['tcp::22-:', /bad guest port ""/],
    ['tcp::-1-:22', /is malformed/],
    ['tcp:example.com:22-:22', /host address must be an IPv4 address/],
    ['tcp:256.0.0.1:22-:22', /host address must be an IPv4 address/],
    ['tcp::22-10.0.3.15:22', /guest address must be a guest's address in 10\.0\.2\.0\/24/],
    ['tcp::22-10.0.2.2:22', /guest address must be a guest's address/], // the gateway is libslirp's own
    ['tcp::22-10.0.2.255:22', /guest address must be a guest's address/],
  ] as const) {
    it(`refuses ${JSON.stringify(text)} in one line naming the syntax`, () => {
      let err: unknown;
      try { parseHostForward(text); } catch (e) { err = e; }
      expect(err).toBeInstanceOf(ConfigError);
      const m = (err as Error).message;
      expect(m).toMatch(why);
      expect(m).not.toContain('\n');
    });
  }
});

describe('--net and config strings: one syntax, round trips, one rule', () => {
  it('--net user with several forwards, both protocols, round-trips through VmConfig', () => {
    const c = configFromOptions({ net: 'user,hostfwd=tcp::2222-:22,hostfwd=udp:127.0.0.1:5353-:53' });
    expect(c.net).toEqual({
      mode: 'user',
      hostfwd: [
        { protocol: 'tcp', hostAddress: '127.0.0.1', hostPort: 2222, guestAddress: '10.0.2.15', guestPort: 22 },
        { protocol: 'udp', hostAddress: '127.0.0.1', hostPort: 5353, guestAddress: '10.0.2.15', guestPort: 53 },
      ],
    });
    const args = optionsFromConfig(c);
    expect(args.slice(args.indexOf('--net'), args.indexOf('--net') + 2)).toEqual(['--net', 'user,hostfwd=tcp:127.0.0.1:2222-:22,hostfwd=udp:127.0.0.1:5353-:53']);
    const values: Record<string, string> = {};
    for (let i = 0; i < args.length; i += 2) values[args[i]!.slice(2)] = args[i + 1]!;
    expect(configFromOptions(values)).toEqual(c);
  });

  it('a config string carries the same text: net=user then its hostfwd= parts; formatConfigString writes it back', () => {
    const c = parseConfigString('cpus=2,net=user,hostfwd=tcp::8080-:80,hostfwd=udp::5353-:53');
    expect(c.net).toEqual(parseNetOption('user,hostfwd=tcp::8080-:80,hostfwd=udp::5353-:53'));
    expect(formatConfigString(c)).toContain('net=user,hostfwd=tcp:127.0.0.1:8080-:80,hostfwd=udp:127.0.0.1:5353-:53');
    expect(parseConfigString(formatConfigString(c))).toEqual(c);
    expect(() => parseConfigString('cpus=1,hostfwd=tcp::1-:2')).toThrow(/hostfwd= needs net=user before it/);
    expect(parseConfigString('net=tap=tap0').net).toEqual({ mode: 'tap', tap: 'tap0' });
  });

  it('saved JSON (the library, the API) passes the same rule; formatNetOption is parseNetOption\'s inverse', () => {
    const net = parseNetOption('user,hostfwd=tcp:0.0.0.0:80-10.0.2.16:8080');
    expect(validateConfig({ net: JSON.parse(JSON.stringify(net)) }).net).toEqual(net);
    expect(parseNetOption(formatNetOption(net))).toEqual(net);
    expect(validateConfig({ net: { mode: 'user' } }).net).toEqual({ mode: 'user', hostfwd: [] });
    for (const [raw, why] of [
      [{ mode: 'bridge' }, /net mode must be user or tap/],
      [{ mode: 'user', hostfwd: 'tcp::1-:2' }, /hostfwd must be a list/],
      [{ mode: 'user', extra: 1 }, /unknown field "extra"/],
      [{ mode: 'user', hostfwd: [{ protocol: 'tcp', hostAddress: '127.0.0.1', hostPort: 1.5, guestAddress: '10.0.2.15', guestPort: 2 }] }, /host port must be 1 to 65535/],
      [{ mode: 'user', hostfwd: Array.from({ length: 65 }, (_, i) => ({ protocol: 'tcp', hostAddress: '127.0.0.1', hostPort: i + 1, guestAddress: '10.0.2.15', guestPort: 22 })) }, /at most 64/],
      [{ mode: 'tap', tap: 'a-name-that-is-too-long' }, /is not an interface name/],
      [{ mode: 'tap', tap: '../x' }, /is not an interface name/],
      [{ mode: 'tap' }, /needs the name of a tap interface/],
      ['user', /net must be an object/],
    ] as const) {
      expect(() => checkNet(raw)).toThrow(why);
      expect(() => validateConfig({ net: raw })).toThrow(ConfigError);
    }
  });

  it('refuses other --net forms and options in one line', () => {
    expect(() => parseNetOption('bridge=br0')).toThrow(/--net must be user\[,hostfwd=\.\.\.\] or tap=NAME/);
    expect(() => parseNetOption('user,dns=1.1.1.1')).toThrow(/unknown option "dns=1\.1\.1\.1"/);
    expect(() => parseNetOption('tap=tap0,hostfwd=tcp::1-:2')).toThrow(/--net tap takes no other options/);
    expect(() => parseNetOption('tap=')).toThrow(/needs the name of a tap interface/);
    expect(() => parseNetOption('user,hostfwd=tcp::2222-:22,hostfwd=tcp:127.0.0.1:2222-:23')).toThrow(/forwarded twice/);
    // The same host port for tcp and for udp is two sockets: allowed.
    expect(parseNetOption('user,hostfwd=tcp::53-:53,hostfwd=udp::53-:53').mode).toBe('user');
  });

  it('the MAC of a VM is locally administered, unicast, stable for its name and different between names', () => {
    const macs = ['vm', 'vm2', 'a', 'b', 'web server'].map(macForVm);
    for (const m of macs) {
      expect(m).toMatch(/^([0-9a-f]{2}:){5}[0-9a-f]{2}$/);
      expect(Number.parseInt(m.slice(0, 2), 16) & 3).toBe(2); // locally administered, not multicast
    }
    expect(new Set(macs).size).toBe(macs.length);
    expect(macForVm('vm')).toBe(macForVm('vm'));
  });

  it('the saved library keeps a network as it was given and reads it back through the same rule', async () => {
    const home = tempHome();
    const config = validateConfig({ name: 'web', net: parseNetOption('user,hostfwd=tcp::8080-:80,hostfwd=udp:0.0.0.0:5353-:53') });
    const a = await LibraryStore.open(home);
    await a.mutate((vms) => { vms.push({ id: 'id-web', config, createdAt: 1, updatedAt: 1 }); });
    const b = await LibraryStore.open(home);
    expect(b.list()[0]!.config.net).toEqual(config.net);
  });
});

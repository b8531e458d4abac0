// The wizard's network as typed (step 3's Network part): none, user networking with its host
// port forwards, or a tap by name. Ports stay text, as typed; each field is judged by the
// schema's own field rules (net-config.ts) and the forwards together by checkNet (a host port
// forwarded twice). Whether a host port is free is the start's check, not the wizard's.
import {
  DEFAULT_HOST_ADDRESS, USER_NET, checkForwardGuestAddress, checkForwardHostAddress, checkForwardPort, checkForwardProtocol,
  checkNet, checkTapName, formatNetOption, type HostForward, type NetConfig,
} from '../../../../electron/vmm/config/net-config.ts';
import { problem } from './rule-problem.ts';

export interface DraftNet {
  mode: 'none' | 'user' | 'tap';
  /** Kept while another mode is chosen, so switching back loses nothing. */
  forwards: DraftForward[];
  tap: string;
}

export interface DraftForward {
  protocol: 'tcp' | 'udp';
  /** Empty means 127.0.0.1, as in the hostfwd text. */
  hostAddress: string;
  hostPort: string;
  /** Empty means the guest's DHCP address (10.0.2.15), as in the hostfwd text. */
  guestAddress: string;
  guestPort: string;
}

export type ForwardPart = 'protocol' | 'hostAddress' | 'hostPort' | 'guestAddress' | 'guestPort';
/** A network field's id: `net.tap`, or `net.I.PART` for forward I (from 0). */
export type NetFieldId = 'net.tap' | `net.${number}.${ForwardPart}`;

export const NO_NET: DraftNet = Object.freeze({ mode: 'none', forwards: [], tap: '' }) as DraftNet;

export function newForward(): DraftForward {
  return { protocol: 'tcp', hostAddress: DEFAULT_HOST_ADDRESS, hostPort: '', guestAddress: '', guestPort: '' };
}

/** A port as typed: a number when it is one, otherwise the text, for the rule to refuse in its words. */
function portOrText(text: string): number | string {
  return /^\s*\d{1,16}\s*$/.test(text) ? Number(text) : text;
}

/** One forward as the schema takes it (the empty addresses given their defaults). */
function forwardConfig(f: DraftForward): Record<keyof HostForward, unknown> {
  return {
    protocol: f.protocol,
    hostAddress: f.hostAddress.trim() === '' ? DEFAULT_HOST_ADDRESS : f.hostAddress.trim(),
    hostPort: portOrText(f.hostPort),
    guestAddress: f.guestAddress.trim() === '' ? USER_NET.dhcpStart : f.guestAddress.trim(),
    guestPort: portOrText(f.guestPort),
  };
}

/** The `net` of the configuration (undefined: no network card); the service judges it again. */
export function draftNetToConfig(n: DraftNet): unknown {
  if (n.mode === 'none') return undefined;
  if (n.mode === 'tap') return { mode: 'tap', tap: n.tap.trim() };
  return { mode: 'user', hostfwd: n.forwards.map(forwardConfig) };
}

/** A stored network as the fields show it (draftNetToConfig's inverse). */
export function configToDraftNet(c: NetConfig | undefined): DraftNet {
  if (!c) return { ...NO_NET, forwards: [] };
  if (c.mode === 'tap') return { mode: 'tap', forwards: [], tap: c.tap };
  return {
    mode: 'user',
    tap: '',
    forwards: c.hostfwd.map((f) => ({
      protocol: f.protocol,
      hostAddress: f.hostAddress,
      hostPort: String(f.hostPort),
      guestAddress: f.guestAddress === USER_NET.dhcpStart ? '' : f.guestAddress,
      guestPort: String(f.guestPort),
    })),
  };
}

/** Each network field's problem, by the schema's rules and in their words. */
export function netProblems(n: DraftNet): Partial<Record<NetFieldId, string>> {
  const out: Partial<Record<NetFieldId, string>> = {};
  if (n.mode === 'tap') {
    const p = problem(() => checkTapName(n.tap.trim()));
    if (p) out['net.tap'] = p;
    return out;
  }
  if (n.mode !== 'user') return out;
  const good: unknown[] = [];
  n.forwards.forEach((f, i) => {
    const c = forwardConfig(f);
    const what = `forward ${i + 1}`;
    const parts: [ForwardPart, string | undefined][] = [
      ['protocol', problem(() => checkForwardProtocol(c.protocol, what))],
      ['hostAddress', problem(() => checkForwardHostAddress(c.hostAddress, what))],
      ['hostPort', problem(() => checkForwardPort(c.hostPort, 'host', what))],
      ['guestAddress', problem(() => checkForwardGuestAddress(c.guestAddress, what))],
      ['guestPort', problem(() => checkForwardPort(c.guestPort, 'guest', what))],
    ];
    for (const [part, p] of parts) if (p) out[`net.${i}.${part}`] = p;
    if (parts.some(([, p]) => p)) return;
    // Every field passes alone: what the whole list can still refuse is this one repeating an
    // earlier forward's host side (checkNet's words), shown at its host port.
    const repeat = problem(() => checkNet({ mode: 'user', hostfwd: [...good, c] }));
    if (repeat) out[`net.${i}.hostPort`] = repeat;
    else good.push(c);
  });
  return out;
}

/** The summary's line: the `--net` text once the network passes the rule (as the VM page shows it). */
export function netSummary(n: DraftNet): string {
  if (n.mode === 'none') return 'none';
  try {
    return formatNetOption(checkNet(draftNetToConfig(n)));
  } catch {
    return n.mode === 'tap' ? `tap ${n.tap.trim()} (not valid yet)` : 'user networking (a forward is not valid yet)';
  }
}

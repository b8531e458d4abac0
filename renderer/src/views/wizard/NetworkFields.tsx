// The wizard's Network part (step 3, "Storage & network", after Storage): the VM's virtio-net card and its back end —
// none, user networking (NAT through libslirp, with host port forwards as QEMU's hostfwd has
// them) or a tap by name (attached, or created when the VMM may). Each field is judged as it is left by the schema's own field
// rules (net-draft.ts -> net-config.ts). Whether a host port is free, libslirp installed or the tap
// there is checked when the VM starts: its one-line refusal then arrives as a notice.
import { useId, useRef } from 'react';
import { MAX_HOSTFWD, USER_NET, macForVm } from '../../../../electron/vmm/config/net-config.ts';
import type { StepProps } from './step-props.ts';
import { newForward, type DraftForward, type DraftNet, type ForwardPart } from './net-draft.ts';

const MODES: { mode: DraftNet['mode']; title: string; help: string }[] = [
  { mode: 'none', title: 'No network', help: 'The guest has no network card.' },
  {
    mode: 'user', title: 'User networking (NAT)',
    help: `Through libslirp, as QEMU's -netdev user: the guest gets ${USER_NET.dhcpStart} by DHCP, reaches the host at ${USER_NET.gateway} and the outside by NAT; no privileges needed. Forward host ports to reach the guest.`,
  },
  {
    mode: 'tap', title: 'A TAP device by name',
    help: 'Attaches the tap of that name: one you made (ip tuntap add dev NAME mode tap user $USER) and bridged or routed as you like. If no interface has the name, Unhalt creates the tap for the VM (up, no address, gone when it stops) when it may (CAP_NET_ADMIN); otherwise the start is refused with the command that makes one.',
  },
];

const PARTS: { part: ForwardPart; label: string; placeholder?: string; numeric?: boolean }[] = [
  { part: 'hostAddress', label: 'host address', placeholder: '127.0.0.1' },
  { part: 'hostPort', label: 'host port', placeholder: '8080', numeric: true },
  { part: 'guestAddress', label: 'guest address', placeholder: USER_NET.dhcpStart },
  { part: 'guestPort', label: 'guest port', placeholder: '80', numeric: true },
];

export function NetworkFields(props: StepProps) {
  const { draft, update, problem, touch, editing } = props;
  const id = useId();
  const net = draft.net;
  const setNet = (patch: Partial<DraftNet>) => update({ net: { ...net, ...patch } });
  const setForward = (i: number, patch: Partial<DraftForward>) => setNet({ forwards: net.forwards.map((f, j) => (j === i ? { ...f, ...patch } : f)) });
  const tapError = problem('net.tap');
  const box = useRef<HTMLFieldSetElement>(null);
  /** A new forward: its host port is what is left to type (the address comes filled in), so the focus goes there. */
  const addForward = () => {
    const n = net.forwards.length;
    setNet({ forwards: [...net.forwards, newForward()] });
    requestAnimationFrame(() => box.current?.querySelector<HTMLElement>(`[data-field="net.${n}.hostPort"]`)?.focus());
  };
  return (
    <fieldset className="field network" ref={box}>
      <legend>Network</legend>
      <div className="choice-list" role="radiogroup" aria-label="Network">
        {MODES.map((m) => (
          <label key={m.mode} className="choice">
            <input type="radio" name={`${id}-mode`} value={m.mode} checked={net.mode === m.mode} onChange={() => setNet({ mode: m.mode })} />
            <span>
              <strong>{m.title}</strong>
              <span className="choice-help">{m.help}</span>
            </span>
          </label>
        ))}
      </div>
      {net.mode !== 'none' && (
        <p className="hint" data-testid="net-mac">
          virtio-net card at 00:03.0, MAC <code>{macForVm(draft.name.trim())}</code>: fixed by the VM's name (the same on every start and in
          every export; a rename changes it).
        </p>
      )}
      {net.mode === 'user' && (
        <div className="forwards" role="group" aria-label="Host port forwards">
          {net.forwards.length === 0 && <p className="hint">No host port forwards: the guest can reach out, nothing on the host reaches in.</p>}
          {net.forwards.map((f, i) => {
            const base = `${id}-fwd-${i}`;
            const errors = (['protocol', ...PARTS.map((p) => p.part)] as ForwardPart[])
              .map((part) => ({ part, text: problem(`net.${i}.${part}`) }))
              .filter((e): e is { part: ForwardPart; text: string } => !!e.text);
            return (
              <div className="forward-row" key={i} data-forward={i}>
                <div className="forward-fields">
                  <span className="forward-no">Forward {i + 1}</span>
                  <label className="forward-part">
                    <span className="caption" aria-hidden="true">protocol</span>
                    <select aria-label={`Forward ${i + 1} protocol`} value={f.protocol}
                      onChange={(e) => { setForward(i, { protocol: e.target.value as DraftForward['protocol'] }); touch(`net.${i}.protocol`); }}>
                      <option value="tcp">tcp</option>
                      <option value="udp">udp</option>
                    </select>
                  </label>
                  {PARTS.map(({ part, label, placeholder, numeric }) => {
                    const text = problem(`net.${i}.${part}`);
                    return [
                      part === 'guestAddress' && <span key="arrow" className="forward-arrow" aria-hidden="true">→</span>,
                      <label key={part} className="forward-part">
                        <span className="caption" aria-hidden="true">{label}</span>
                        <input aria-label={`Forward ${i + 1} ${label}`} className={numeric ? 'num' : 'addr'} value={f[part]}
                          placeholder={placeholder} inputMode={numeric ? 'numeric' : undefined} autoComplete="off" spellCheck={false}
                          aria-invalid={text ? true : undefined} aria-describedby={text ? `${base}-${part}-error` : undefined}
                          data-field={`net.${i}.${part}`}
                          onChange={(e) => { editing(`net.${i}.${part}`); setForward(i, { [part]: e.target.value }); }}
                          onBlur={() => touch(`net.${i}.${part}`)} />
                      </label>,
                    ];
                  })}
                  <button type="button" className="btn small" data-action="remove-forward"
                    onClick={() => setNet({ forwards: net.forwards.filter((_, j) => j !== i) })}>
                    Remove forward {i + 1}
                  </button>
                </div>
                {errors.map((e) => <p key={e.part} className="field-error" id={`${base}-${e.part}-error`} role="alert">{e.text}</p>)}
                {f.hostAddress.trim() === '0.0.0.0' && (
                  <p className="warn-text">Listens on every host interface: other machines that reach this host reach the guest's port too.</p>
                )}
              </div>
            );
          })}
          <button type="button" className="btn small" data-action="add-forward" disabled={net.forwards.length >= MAX_HOSTFWD}
            onClick={addForward}>
            Add a port forward
          </button>
          <p className="hint">
            A connection to the host address and port reaches the guest's port (hostfwd=tcp:127.0.0.1:8080-:80). An empty guest
            address is the guest's DHCP address, {USER_NET.dhcpStart}. Whether the host port is free is checked when the VM starts.
          </p>
        </div>
      )}
      {net.mode === 'tap' && (
        <div className="field">
          <label htmlFor={`${id}-tap`}>TAP interface name</label>
          <input id={`${id}-tap`} value={net.tap} placeholder="tap0" autoComplete="off" spellCheck={false}
            aria-invalid={tapError ? true : undefined} aria-describedby={tapError ? `${id}-tap-error` : undefined} data-field="net.tap"
            onChange={(e) => { editing('net.tap'); setNet({ tap: e.target.value }); }} onBlur={() => touch('net.tap')} />
          {tapError && <p className="field-error" id={`${id}-tap-error`} role="alert">{tapError}</p>}
          <p className="hint">Checked when the VM starts: a tap of this name must be yours to open; a name no interface has is created then if Unhalt may (CAP_NET_ADMIN).</p>
        </div>
      )}
    </fieldset>
  );
}

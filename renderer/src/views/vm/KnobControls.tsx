// Live knobs of a running VM: halt polling and pinning (each change is marked on the charts).
// A value typed here is judged by the rules the API applies (the same words, at the field, on
// blur or Apply); an applied change lasts for this run only unless the user saves it.
import { useEffect, useId, useState } from 'react';
import type { VmRecord } from '../../../../electron/service/api.ts';
import { parseCpuList } from '../../../../electron/vmm/config/knob-syntax.ts';
import { checkPinFit } from '../../../../electron/vmm/config/rules.ts';
import { checkHaltPollNs } from '../../../../electron/vmm/config/vm-config.ts';
import { api, useApp, errorMessage, upsertVm } from '../../state/app.ts';
import { fmtNs, haltPollLabel, available, liveHaltPoll, livePin } from '../../lib/config.ts';

const PRESETS = [0, 10_000, 50_000, 200_000, 1_000_000];
const capitalized = (s: string) => s.charAt(0).toUpperCase() + s.slice(1);

/** The rule's message, or undefined when the value passes. */
function problemOf<T>(rule: () => T): { value?: T; problem?: string } {
  try {
    return { value: rule() };
  } catch (e) {
    return { problem: errorMessage(e) };
  }
}

export function KnobControls({ vm }: { vm: VmRecord }) {
  const id = useId();
  const host = useApp((s) => s.host);
  const live = vm.status.state === 'running' || vm.status.state === 'paused';
  const [ns, setNs] = useState(String(vm.config.haltPollNs ?? host?.haltPollParams.halt_poll_ns ?? 200000));
  const [pin, setPin] = useState((vm.config.pin ?? []).join(','));
  const [shown, setShown] = useState({ ns: false, pin: false });
  const [msg, setMsg] = useState<{ ok: boolean; text: string } | null>(null);
  const [busy, setBusy] = useState(false);
  useEffect(() => setPin((vm.config.pin ?? []).join(',')), [vm.config.pin?.join(',')]);
  const run = async (what: string, f: () => Promise<unknown>) => {
    setBusy(true);
    setMsg(null);
    try {
      await f();
      setMsg({ ok: true, text: `${what} applied for this run` });
    } catch (e) {
      setMsg({ ok: false, text: `${what}: ${errorMessage(e)}` });
    } finally {
      setBusy(false);
    }
  };
  const applyNs = (value: number) => run(`halt-poll-ns=${value}`, () => api.setHaltPollNs(vm.id, value));
  const pollOk = available(host, 'halt-poll-ns');
  const pinOk = available(host, 'pin');
  const nsCheck = problemOf(() => checkHaltPollNs(ns));
  // Empty = unpinned (setPin with no CPUs), as the hint says.
  const pinCheck = problemOf(() => {
    const list = pin.trim() === '' ? [] : parseCpuList(pin);
    if (host?.hostCpus.length) checkPinFit(list, host.hostCpus);
    return list;
  });
  const nsProblem = shown.ns ? nsCheck.problem : undefined;
  const pinProblem = shown.pin ? pinCheck.problem : undefined;
  const runPoll = liveHaltPoll(vm.config, vm.status);
  const runPin = livePin(vm.config, vm.status);
  const save = (what: string) => run(what, async () => {
    upsertVm(await api.keepLiveKnobs(vm.id));
  }).then(() => setMsg((m) => (m?.ok ? { ok: true, text: `${capitalized(what)} saved in ${vm.config.name}'s configuration` } : m)));
  return (
    <section className="panel knobs-panel" aria-labelledby={`${id}-knobs`}>
      <div className="panel-head">
        <h2 id={`${id}-knobs`}>Live knobs</h2>
        <span className="muted small">{live ? 'applied to the running VM, for this run only unless saved' : 'start the VM to change these live'}</span>
      </div>
      <div className="knob-form">
        <div className="field">
          <label htmlFor={`${id}-ns`}>Halt polling (max ns)</label>
          <div className="range-row">
            <input id={`${id}-ns`} type="text" inputMode="numeric" className="num wide" value={ns} autoComplete="off"
              aria-invalid={nsProblem ? true : undefined} aria-describedby={nsProblem ? `${id}-ns-error` : undefined}
              onChange={(e) => { setNs(e.target.value); setShown((s) => ({ ...s, ns: false })); }}
              onBlur={() => setShown((s) => ({ ...s, ns: true }))}
              onKeyDown={(e) => { if (e.key === 'Enter') (e.currentTarget.nextElementSibling as HTMLButtonElement | null)?.click(); }} />
            <button type="button" className="btn" disabled={!live || busy || !pollOk.ok}
              onClick={() => {
                setShown((s) => ({ ...s, ns: true }));
                if (nsCheck.value !== undefined) void applyNs(nsCheck.value);
              }}>Apply</button>
          </div>
          {nsProblem && <p className="field-error" id={`${id}-ns-error`} role="alert">{nsProblem}</p>}
          <div className="presets" role="group" aria-label="Halt polling presets">
            {PRESETS.map((p) => (
              <button key={p} type="button" className="btn small" disabled={!live || busy || !pollOk.ok}
                onClick={() => { setNs(String(p)); setShown((s) => ({ ...s, ns: false })); void applyNs(p); }}>{fmtNs(p)}</button>
            ))}
          </div>
          <p className="hint" data-testid="halt-poll-now">
            {runPoll === undefined
              ? <>Configured: {haltPollLabel(vm.config.haltPollNs, host)}</>
              : <>Now: <strong>{fmtNs(runPoll)}</strong> <span className="tag">this run only</span> · saved: {haltPollLabel(vm.config.haltPollNs, host)}</>}
            {!pollOk.ok && pollOk.reason ? ` · ${pollOk.reason}` : ''}
          </p>
        </div>
        <div className="field">
          <label htmlFor={`${id}-pin`}>Pin vCPUs to host CPUs</label>
          <div className="range-row">
            <input id={`${id}-pin`} value={pin} placeholder={`e.g. ${(host?.hostCpus ?? [0, 1]).slice(0, 2).join(',')}`} autoComplete="off"
              spellCheck={false} aria-invalid={pinProblem ? true : undefined} aria-describedby={pinProblem ? `${id}-pin-error` : `${id}-pin-hint`}
              onChange={(e) => { setPin(e.target.value); setShown((s) => ({ ...s, pin: false })); }}
              onBlur={() => setShown((s) => ({ ...s, pin: true }))} />
            <button type="button" className="btn" disabled={!live || busy || !pinOk.ok}
              onClick={() => {
                setShown((s) => ({ ...s, pin: true }));
                const list = pinCheck.value;
                // Written as the "Now:" line below writes it (0,1), not in the config string's 0+1.
                if (list) void run(`Pinning ${list.length ? list.join(',') : 'none'}`, () => api.setPin(vm.id, list));
              }}>Apply</button>
          </div>
          {pinProblem && <p className="field-error" id={`${id}-pin-error`} role="alert">{pinProblem}</p>}
          <p className="hint" id={`${id}-pin-hint`}>
            vCPU i runs on the i-th listed CPU, round-robin; empty = not pinned. Host CPUs: {host?.hostCpus.join(', ') ?? '…'}.
            {runPin !== undefined && <> Now: <strong>{runPin.length ? runPin.join(',') : 'not pinned'}</strong> <span className="tag">this run only</span></>}
          </p>
        </div>
      </div>
      {(runPoll !== undefined || runPin !== undefined) && (
        <p className="hint">
          Changed live: {[runPoll !== undefined && `halt-poll-ns=${runPoll}`, runPin !== undefined && `pin=${runPin.join(',') || 'none'}`].filter(Boolean).join(', ')}, for this run only.{' '}
          <button type="button" className="btn small" disabled={busy} onClick={() => void save('this run\'s knob changes')}>Save to the VM</button>
        </p>
      )}
      <p className={`knob-msg ${msg && !msg.ok ? 'bad' : ''}`} role="status">{msg?.text ?? '\u00a0'}</p>
    </section>
  );
}

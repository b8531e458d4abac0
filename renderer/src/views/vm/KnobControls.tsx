// Live knobs of a running VM: halt polling and pinning (each change is marked on the charts).
import { useEffect, useId, useState } from 'react';
import type { VmRecord } from '../../../../electron/service/api.ts';
import { api, useApp, errorMessage } from '../../state/app.ts';
import { fmtNs, parseCpuList, haltPollLabel, available } from '../../lib/config.ts';

const PRESETS = [0, 10_000, 50_000, 200_000, 1_000_000];

export function KnobControls({ vm }: { vm: VmRecord }) {
  const id = useId();
  const host = useApp((s) => s.host);
  const live = vm.status.state === 'running' || vm.status.state === 'paused';
  const [ns, setNs] = useState(String(vm.config.haltPollNs ?? host?.haltPollParams.halt_poll_ns ?? 200000));
  const [pin, setPin] = useState((vm.config.pin ?? []).join(','));
  const [msg, setMsg] = useState<{ ok: boolean; text: string } | null>(null);
  const [busy, setBusy] = useState(false);
  useEffect(() => setPin((vm.config.pin ?? []).join(',')), [vm.config.pin?.join(',')]);
  const run = async (what: string, f: () => Promise<unknown>) => {
    setBusy(true);
    setMsg(null);
    try {
      await f();
      setMsg({ ok: true, text: `${what} applied` });
    } catch (e) {
      setMsg({ ok: false, text: `${what}: ${errorMessage(e)}` });
    } finally {
      setBusy(false);
    }
  };
  const applyNs = (value: number) => run(`halt-poll-ns=${value}`, () => api.setHaltPollNs(vm.id, value));
  const pollOk = available(host, 'halt-poll-ns');
  const pinOk = available(host, 'pin');
  const nsNum = Number(ns);
  const nsValid = ns.trim() !== '' && Number.isSafeInteger(nsNum) && nsNum >= 0 && nsNum <= 1e9;
  const pinList = pin.trim() === '' ? null : parseCpuList(pin);
  return (
    <section className="panel knobs-panel" aria-labelledby={`${id}-knobs`}>
      <div className="panel-head">
        <h2 id={`${id}-knobs`}>Live knobs</h2>
        <span className="muted small">{live ? 'applied to the running VM' : 'start the VM to change these live'}</span>
      </div>
      <div className="knob-form">
        <div className="field">
          <label htmlFor={`${id}-ns`}>Halt polling (max ns)</label>
          <div className="range-row">
            <input id={`${id}-ns`} type="number" className="num wide" min={0} max={1e9} step={1000} value={ns}
              aria-invalid={!nsValid || undefined} onChange={(e) => setNs(e.target.value)} />
            <button type="button" className="btn" disabled={!live || !nsValid || busy || !pollOk.ok} onClick={() => void applyNs(nsNum)}>Apply</button>
          </div>
          <div className="presets" role="group" aria-label="Halt polling presets">
            {PRESETS.map((p) => (
              <button key={p} type="button" className="btn small" disabled={!live || busy || !pollOk.ok}
                onClick={() => { setNs(String(p)); void applyNs(p); }}>{fmtNs(p)}</button>
            ))}
          </div>
          <p className="hint">Configured: {haltPollLabel(vm.config.haltPollNs, host)}{!pollOk.ok && pollOk.reason ? ` · ${pollOk.reason}` : ''}</p>
        </div>
        <div className="field">
          <label htmlFor={`${id}-pin`}>Pin vCPUs to host CPUs</label>
          <div className="range-row">
            <input id={`${id}-pin`} value={pin} placeholder={`e.g. ${(host?.hostCpus ?? [0, 1]).slice(0, 2).join(',')}`} autoComplete="off"
              spellCheck={false} aria-invalid={(pin.trim() !== '' && !pinList) || undefined} onChange={(e) => setPin(e.target.value)} />
            <button type="button" className="btn" disabled={!live || busy || !pinOk.ok || !pinList?.length}
              onClick={() => void run(`pin=${pinList!.join('+')}`, () => api.setPin(vm.id, pinList!))}>Apply</button>
          </div>
          <p className="hint">vCPU i runs on the i-th listed CPU, round-robin. Host CPUs: {host?.hostCpus.join(', ') ?? '…'}.</p>
        </div>
      </div>
      <p className={`knob-msg ${msg && !msg.ok ? 'bad' : ''}`} role="status">{msg?.text ?? '\u00a0'}</p>
    </section>
  );
}

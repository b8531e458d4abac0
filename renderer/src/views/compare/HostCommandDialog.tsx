// Before a host command first runs: the command in full, and the one-time code the service showed
// where only the person at this machine sees it (the terminal of `unhalt serve`, or the app's own
// dialog). The page never learns the code itself (host-command-requests.ts), so a script holding
// the API's token cannot confirm a command; the person types it here.
import { useEffect, useId, useRef, useState } from 'react';
import { joinCommand } from '../../../../electron/experiments/argv-split.ts';
import { api, errorMessage } from '../../state/app.ts';

export function HostCommandDialog({ argv, onConfirmed, onCancel }: {
  argv: string[];
  /** The confirmed command's id, for bench.hostCmdId. */
  onConfirmed: (id: string) => void;
  onCancel: () => void;
}) {
  const id = useId();
  const ref = useRef<HTMLDialogElement>(null);
  const codeRef = useRef<HTMLInputElement>(null);
  const [requestId, setRequestId] = useState<string | null>(null);
  const [code, setCode] = useState('');
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  // One request per dialog: each makes a code on the terminal, and a second would leave the person
  // reading one code while the dialog holds another (effects may run twice for one dialog).
  const asked = useRef<Promise<{ requestId: string }> | null>(null);
  useEffect(() => {
    if (ref.current && !ref.current.open) ref.current.showModal();
    let live = true;
    asked.current ??= api.requestHostCommand(argv);
    asked.current.then((r) => {
      if (!live) return;
      setRequestId(r.requestId);
      codeRef.current?.focus();
    }, (e) => { if (live) setError(errorMessage(e)); });
    return () => { live = false; };
  }, []);
  const confirm = async () => {
    if (!requestId) return;
    setBusy(true);
    setError(null);
    try {
      const r = await api.confirmHostCommand(requestId, code);
      onConfirmed(r.id);
    } catch (e) {
      const m = errorMessage(e);
      setError(m);
      // A void request (too many wrong codes, expired) needs a new one: ask again on the next try.
      if (/request is void|no such host command request/.test(m)) {
        asked.current = api.requestHostCommand(argv);
        asked.current.then((r) => setRequestId(r.requestId), (e2) => setError(errorMessage(e2)));
      }
      setCode('');
      codeRef.current?.focus();
    } finally {
      setBusy(false);
    }
  };
  return (
    <dialog ref={ref} className="confirm-dialog host-command-dialog" data-confirm="host-command" aria-labelledby={`${id}-q`}
      onCancel={(e) => { e.preventDefault(); onCancel(); }}>
      <form onSubmit={(e) => { e.preventDefault(); e.stopPropagation(); void confirm(); }}>
        <p id={`${id}-q`}><strong>Run this command on this machine?</strong> Each run of the experiment starts it while the VM is up.</p>
        <pre className="mono host-command" data-testid="host-command-shown">{joinCommand(argv)}</pre>
        <p className="hint">Unhalt showed a 6-digit code where it runs: the terminal of <span className="mono">unhalt serve</span>, or the app&apos;s own
          dialog. Type it to allow the command; a web page that reached Unhalt could not see it.</p>
        <div className="field">
          <label htmlFor={`${id}-code`}>Code</label>
          <input id={`${id}-code`} ref={codeRef} className="mono num" inputMode="numeric" autoComplete="off" value={code}
            onChange={(e) => setCode(e.target.value)} disabled={!requestId} />
        </div>
        {error && <p className="error" role="alert" data-testid="host-command-error">{error}</p>}
        <div className="confirm-actions">
          <button type="submit" className="btn primary" data-action="confirm-host-command" disabled={!requestId || busy || code.replace(/\s/g, '').length !== 6}>Allow and run</button>
          <button type="button" className="btn" onClick={onCancel}>Cancel</button>
        </div>
      </form>
    </dialog>
  );
}

// The serial console (ttyS0): adopts the VM's terminal from the registry while on screen.
import { useEffect, useRef, useState } from 'react';
import { attachConsole, consoleFor, copySelection, pasteClipboard, focusConsole } from '../../console/terminals.ts';

export function ConsolePane({ vmId, running }: { vmId: string; running: boolean }) {
  const host = useRef<HTMLDivElement>(null);
  const [hint, setHint] = useState('');
  useEffect(() => attachConsole(vmId, host.current!), [vmId]);
  const flash = (text: string) => {
    setHint(text);
    setTimeout(() => setHint(''), 2000);
  };
  return (
    <section className="panel console-panel" aria-labelledby={`console-${vmId}`}>
      <div className="panel-head">
        <h2 id={`console-${vmId}`}>Console <span className="muted small">ttyS0</span></h2>
        <div className="panel-actions">
          <span className="muted small hint-flash" aria-live="polite">{hint}</span>
          <button type="button" className="btn small" onClick={async () => flash(await copySelection(consoleFor(vmId)) ? 'Copied' : 'Select text first')}
            title="Copy the selection (Ctrl+Shift+C)">Copy</button>
          <button type="button" className="btn small" onClick={async () => {
            if (!(await pasteClipboard(consoleFor(vmId)))) flash('Clipboard not available: use Ctrl+Shift+V');
            focusConsole(vmId);
          }} title="Paste into the guest (Ctrl+Shift+V)">Paste</button>
          <button type="button" className="btn small" onClick={() => { consoleFor(vmId).term.clear(); focusConsole(vmId); }}>Clear</button>
        </div>
      </div>
      <div className="term-host" ref={host} data-testid="console" role="group"
        aria-label="Serial console: keys go to the guest; Shift+Tab leaves the console" />
      <p className="muted small console-note">
        {running ? 'Ctrl+Shift+C / Ctrl+Shift+V copy and paste · Shift+Tab leaves the console' : 'The VM is stopped; the console shows its last output.'}
      </p>
    </section>
  );
}

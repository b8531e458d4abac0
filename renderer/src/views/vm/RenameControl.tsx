// Renaming a VM in place, running or not (the name is the library's; the guest never sees it).
// Enter saves, Escape cancels; a refused name stays in the field with the service's reason.
import { useEffect, useId, useRef, useState } from 'react';
import type { VmRecord } from '../../../../electron/service/api.ts';
import { errorMessage, renameVm } from '../../state/app.ts';

export function RenameControl({ vm }: { vm: VmRecord }) {
  const id = useId();
  const [editing, setEditing] = useState(false);
  const [text, setText] = useState(vm.config.name);
  const [error, setError] = useState<string | null>(null);
  const [saving, setSaving] = useState(false);
  const input = useRef<HTMLInputElement>(null);
  useEffect(() => { if (editing) input.current?.select(); }, [editing]);
  if (!editing) {
    return (
      <button type="button" className="btn small" data-action="rename"
        onClick={() => { setText(vm.config.name); setError(null); setEditing(true); }}>Rename…</button>
    );
  }
  const save = async () => {
    if (text.trim() === vm.config.name) {
      setEditing(false);
      return;
    }
    setSaving(true);
    setError(null);
    try {
      await renameVm(vm.id, text);
      setEditing(false);
    } catch (e) {
      setError(errorMessage(e));
      input.current?.focus();
    } finally {
      setSaving(false);
    }
  };
  return (
    <form className="rename" onSubmit={(e) => { e.preventDefault(); void save(); }}>
      <label htmlFor={`${id}-name`} className="sr-only">New name</label>
      <input id={`${id}-name`} ref={input} value={text} maxLength={64} autoComplete="off" spellCheck={false}
        aria-invalid={!!error || undefined} aria-describedby={error ? `${id}-err` : undefined}
        onChange={(e) => { setText(e.target.value); setError(null); }}
        onKeyDown={(e) => { if (e.key === 'Escape') setEditing(false); }} />
      <button type="submit" className="btn small primary" disabled={saving}>{saving ? 'Saving…' : 'Save name'}</button>
      <button type="button" className="btn small" onClick={() => setEditing(false)}>Cancel</button>
      {error && <span className="error small" id={`${id}-err`} role="alert">{error}</span>}
    </form>
  );
}

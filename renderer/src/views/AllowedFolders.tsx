// The folders custom kernels and initrds may come from (the service refuses any other file):
// the built-in ones, and the ones the user added here.
import { useEffect, useState } from 'react';
import type { AllowedFolder } from '../../../electron/service/api.ts';
import { api, errorMessage } from '../state/app.ts';

const SOURCE_LABEL: Record<AllowedFolder['source'], string> = {
  library: 'Unhalt\'s data folder', guests: 'built-in guests', home: 'your home folder', settings: 'added',
};

export function AllowedFolders() {
  const [folders, setFolders] = useState<AllowedFolder[] | null>(null);
  const [path, setPath] = useState('');
  const [error, setError] = useState<string | null>(null);
  const run = async (call: () => Promise<AllowedFolder[]>) => {
    setError(null);
    try {
      setFolders(await call());
      return true;
    } catch (e) {
      setError(errorMessage(e));
      return false;
    }
  };
  useEffect(() => { void run(() => api.listAllowedFolders()); }, []);
  return (
    <details className="allowed-folders">
      <summary>Folders for boot files</summary>
      <p className="muted small">Custom kernels and initrds must be inside one of these folders.</p>
      <ul>
        {(folders ?? []).map((f) => (
          <li key={f.path} data-refused={f.refused ? 'true' : undefined}>
            <code>{f.path}</code> <span className="muted small">({SOURCE_LABEL[f.source]})</span>
            {f.source === 'settings' && (
              <button type="button" className="btn" onClick={() => void run(() => api.removeAllowedFolder(f.path))}>Remove</button>
            )}
            {f.refused && <p className="error small" role="status">Not used now: {f.refused}.</p>}
            {f.note && <p className="warn-text small">Note: {f.note}.</p>}
          </li>
        ))}
      </ul>
      <form onSubmit={(e) => { e.preventDefault(); void run(() => api.addAllowedFolder(path)).then((ok) => { if (ok) setPath(''); }); }}>
        <label>Add a folder <input type="text" value={path} placeholder="/absolute/path" onChange={(e) => setPath(e.target.value)} /></label>
        <button type="submit" className="btn" disabled={!path.trim()}>Add</button>
      </form>
      {error && <p className="error" role="alert">{error}</p>}
    </details>
  );
}

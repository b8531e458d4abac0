// The import's file browser: the service lists folders (a browser's file input gives a file's
// contents, never its host path), only the allowed ones and what is inside them. A click opens a
// folder or picks a file; "Up" goes to the folder above while it is allowed too.
import { useEffect, useState } from 'react';
import type { FolderListing } from '../../../../electron/service/api.ts';
import { api, errorMessage } from '../../state/app.ts';

export function FileBrowser({ picked, onPick }: { picked: string; onPick: (path: string) => void }) {
  const [listing, setListing] = useState<FolderListing | null>(null);
  const [error, setError] = useState('');
  const open = async (path: string) => {
    try {
      setListing(await api.listFolder(path));
      setError('');
    } catch (e) {
      setError(errorMessage(e));
    }
  };
  useEffect(() => { void open(''); }, []);
  const size = (n?: number) => (n === undefined ? '' : n >= 2 ** 30 ? `${(n / 2 ** 30).toFixed(1)} GiB` : n >= 2 ** 20 ? `${Math.round(n / 2 ** 20)} MiB`
    : n >= 1024 ? `${Math.round(n / 1024)} KiB` : `${n} bytes`);
  return (
    <div className="file-browser" data-testid="file-browser">
      <div className="file-browser-head">
        <button type="button" className="btn small" disabled={!listing?.path} onClick={() => void open(listing?.parent ?? '')}
          aria-label={listing?.parent ? `Up to ${listing.parent}` : 'Up to the allowed folders'}>Up</button>
        <span className="file-browser-path" data-testid="file-browser-path">{listing?.path || 'Allowed folders'}</span>
      </div>
      {error && <p className="error" role="alert">{error}</p>}
      <ul className="file-list" aria-label={`Contents of ${listing?.path || 'the allowed folders'}`}>
        {listing?.entries.map((e) => (
          <li key={e.path}>
            <button type="button" className={`file-entry ${e.kind} ${picked === e.path ? 'picked' : ''}`} aria-pressed={e.kind === 'file' ? picked === e.path : undefined}
              data-kind={e.kind} onClick={() => (e.kind === 'dir' ? void open(e.path) : onPick(e.path))}>
              {e.name}{e.kind === 'dir' && <span aria-hidden="true">/</span>}
              {e.kind === 'file' && <span className="muted small"> {size(e.sizeBytes)}{e.image ? ` · ${e.image}` : ''}</span>}
            </button>
          </li>
        ))}
        {listing && listing.entries.length === 0 && <li className="muted">(empty)</li>}
      </ul>
      {listing?.truncated && <p className="hint">Only the first entries are listed: move the image into a smaller folder.</p>}
    </div>
  );
}

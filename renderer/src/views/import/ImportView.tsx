// "Import a disk image": a distribution's cloud image (qcow2 or raw) picked in the service's file
// browser becomes a library VM that boots the image's own kernel with a cloud-init seed
// (electron/service/image-import.ts; the same import as `unhalt import`). The image is not
// written by the import; its steps show as they go, and a failure is one line here.
import { useId, useState } from 'react';
import { api, errorMessage, navigate, upsertVm, useApp } from '../../state/app.ts';
import { FileBrowser } from './FileBrowser.tsx';

export function ImportView() {
  const id = useId();
  const [image, setImage] = useState('');
  const [name, setName] = useState('');
  const [cpus, setCpus] = useState('2');
  const [memory, setMemory] = useState('1024');
  const [user, setUser] = useState('');
  const [login, setLogin] = useState<'key' | 'password'>('key');
  const [keyFile, setKeyFile] = useState('');
  const [password, setPassword] = useState('');
  const [error, setError] = useState('');
  const [running, setRunning] = useState(false);
  const progress = useApp((s) => (image ? s.imports[image] : undefined));
  const run = async () => {
    setError('');
    if (!image) { setError('Pick the image to import in the list above.'); return; }
    if (login === 'password' && !password) { setError('Type the password the guest\'s user logs in with, or choose an SSH key.'); return; }
    setRunning(true);
    try {
      const rec = await api.importImage({
        image,
        ...(name.trim() ? { name: name.trim() } : {}),
        ...(/^\d+$/.test(cpus) ? { cpus: Number(cpus) } : {}),
        ...(/^\d+$/.test(memory) ? { memoryMiB: Number(memory) } : {}),
        ...(user.trim() ? { user: user.trim() } : {}),
        ...(login === 'key' && keyFile.trim() ? { sshKeyFile: keyFile.trim() } : {}),
        ...(login === 'password' ? { password } : {}),
      });
      upsertVm(rec);
      navigate({ view: 'vm', id: rec.id });
    } catch (e) {
      setError(errorMessage(e));
    } finally {
      setRunning(false);
    }
  };
  return (
    <section className="view import-view" aria-labelledby="import-title">
      <div className="view-head">
        <h1 id="import-title" tabIndex={-1}>Import a disk image</h1>
      </div>
      <p className="muted">
        A distribution's cloud image (qcow2 or raw): its own kernel, initrd and command line are read out of it, without
        booting it and without changing it; a cloud-init seed gives the guest your login, user networking forwards a host
        port to its SSH. A qcow2 is converted to a raw copy in Unhalt's folder.
      </p>
      <form className="import-form" noValidate onSubmit={(e) => { e.preventDefault(); void run(); }}>
        <fieldset className="field">
          <legend>Image</legend>
          <FileBrowser picked={image} onPick={setImage} />
          <p className="hint" data-testid="import-picked">{image ? `Picked: ${image}` : 'Nothing picked yet: open a folder and click the image.'}</p>
        </fieldset>
        <div className="field-row">
          <div className="field grow">
            <label htmlFor={`${id}-name`}>Name</label>
            <input id={`${id}-name`} value={name} autoComplete="off" placeholder="the image's file name" onChange={(e) => setName(e.target.value)} />
          </div>
          <div className="field">
            <label htmlFor={`${id}-cpus`}>vCPUs</label>
            <input id={`${id}-cpus`} value={cpus} inputMode="numeric" size={4} onChange={(e) => setCpus(e.target.value)} />
          </div>
          <div className="field">
            <label htmlFor={`${id}-mem`}>Memory (MiB)</label>
            <input id={`${id}-mem`} value={memory} inputMode="numeric" size={6} onChange={(e) => setMemory(e.target.value)} />
          </div>
        </div>
        <fieldset className="field">
          <legend>The guest's login</legend>
          <div className="field">
            <label htmlFor={`${id}-user`}>User</label>
            <input id={`${id}-user`} value={user} autoComplete="off" placeholder="your user name (unhalt for root)" onChange={(e) => setUser(e.target.value)} />
          </div>
          <label className="choice"><input type="radio" name="login" checked={login === 'key'} onChange={() => setLogin('key')} /> An SSH public key</label>
          {login === 'key' && (
            <div className="field">
              <label htmlFor={`${id}-key`}>Public key file</label>
              <input id={`${id}-key`} value={keyFile} autoComplete="off" placeholder="the first ~/.ssh/*.pub" onChange={(e) => setKeyFile(e.target.value)} />
            </div>
          )}
          <label className="choice"><input type="radio" name="login" checked={login === 'password'} onChange={() => setLogin('password')} /> A password</label>
          {login === 'password' && (
            <div className="field">
              <label htmlFor={`${id}-pw`}>Password</label>
              <input id={`${id}-pw`} type="password" value={password} autoComplete="new-password" onChange={(e) => setPassword(e.target.value)} />
              <p className="hint">Only its SHA-512 crypt hash goes into the seed.</p>
            </div>
          )}
        </fieldset>
        {error && <p className="error" role="alert" data-testid="import-error">{error}</p>}
        {running && <p role="status" data-testid="import-progress">{progress ? `${progress.step}${progress.percent !== undefined ? ` ${progress.percent}%` : ''}` : 'Starting the import…'}</p>}
        <div className="wizard-nav">
          <button type="button" className="btn" onClick={() => navigate({ view: 'library' })}>Cancel</button>
          <button type="submit" className="btn primary" data-action="import" disabled={running}>{running ? 'Importing…' : 'Import'}</button>
        </div>
      </form>
    </section>
  );
}

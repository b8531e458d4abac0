// Editing a VM: the wizard in edit mode for a stopped VM. A running VM's settings are the guest's
// hardware, fixed when it booted, so they are not offered for editing: the page says so and what
// can change instead (the live knobs, the name).
import { useRef } from 'react';
import { useApp, navigate, vmAction } from '../../state/app.ts';
import { Wizard } from '../wizard/Wizard.tsx';

export function EditVm({ id }: { id: string }) {
  const vm = useApp((s) => s.vms.find((v) => v.id === id));
  const loaded = useApp((s) => s.vmsLoaded);
  const busy = useApp((s) => s.busy[id]);
  // Decided when the page opens: a VM started by someone else meanwhile keeps the draft on screen
  // (the save then says why it cannot go through), nothing typed is lost.
  const openedRunning = useRef<boolean | null>(null);
  if (vm && openedRunning.current === null) openedRunning.current = vm.status.state !== 'stopped';
  if (!vm) {
    return (
      <section className="view">
        <h1 tabIndex={-1}>{loaded ? 'VM not found' : 'Loading…'}</h1>
        {loaded && <p>There is no VM with id {id}. <button type="button" className="link-btn" onClick={() => navigate({ view: 'library' })}>Back to the library</button></p>}
      </section>
    );
  }
  const running = vm.status.state !== 'stopped';
  if (openedRunning.current && running) {
    return (
      <section className="view" aria-labelledby="edit-title">
        <h1 id="edit-title" tabIndex={-1}>Edit {vm.config.name}</h1>
        <p className="banner" role="status" data-testid="edit-refused">
          {vm.config.name} is {vm.status.state}. Its settings (vCPUs, memory, machine type, paravirt features, overcommit, guest
          and kernel) are the guest's hardware, fixed when it booted: stop the VM to edit them. While it runs, halt polling and
          pinning change live on the VM page, and the name can change at any time.
        </p>
        <div className="toolbar">
          <button type="button" className="btn" onClick={() => navigate({ view: 'vm', id })}>Back to {vm.config.name}</button>
          <button type="button" className="btn primary" disabled={!!busy || vm.status.state === 'stopping'}
            onClick={() => void vmAction(id, 'stop')}>Stop it</button>
        </div>
      </section>
    );
  }
  return (
    <>
      {running && <p className="banner banner-error" role="alert">{vm.config.name} was started meanwhile: stop it to save these changes.</p>}
      <Wizard edit={vm} />
    </>
  );
}

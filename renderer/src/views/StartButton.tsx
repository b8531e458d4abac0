// A library row's or card's Start: disabled where it cannot work here, pointing at the one notice
// that says why (KvmNotice), so the reason is not repeated on every VM.
import type { HostInfo } from '../../../electron/service/api.ts';
import { vmAction } from '../state/app.ts';
import { KVM_NOTICE_ID, startBlocked } from './KvmNotice.tsx';

export function StartButton({ vmId, host, busy, className }: { vmId: string; host: HostInfo | null; busy: boolean; className: string }) {
  const blocked = startBlocked(host);
  return (
    <button type="button" className={className} disabled={busy || !!blocked} title={blocked}
      aria-describedby={blocked ? KVM_NOTICE_ID : undefined} onClick={() => void vmAction(vmId, 'start')}>Start</button>
  );
}

// A library row's or card's Start: disabled where it cannot work here, pointing at the one notice
// that says why (KvmNotice), so the reason is not repeated on every VM.
import type { HostInfo } from '../../../electron/service/api.ts';
import { vmAction } from '../state/app.ts';
import { startButtonProps } from './KvmNotice.tsx';

export function StartButton({ vmId, host, busy, className }: { vmId: string; host: HostInfo | null; busy: boolean; className: string }) {
  return (
    <button type="button" className={className} {...startButtonProps(host, busy)} onClick={() => void vmAction(vmId, 'start')}>Start</button>
  );
}

// Where KVM cannot be opened, the app says so once, on every view, with the service's own cause
// and fix (HostInfo.kvmProblem, from kvm-cause.ts's verdict); every button that starts VMs (a VM's
// Start, Compare's Run experiment, the advisor's Start tuning) points here instead of repeating it.
import type { HostInfo } from '../../../electron/service/api.ts';
import { useApp } from '../state/app.ts';

export const KVM_NOTICE_ID = 'kvm-notice';

/** Why a start cannot work here (for a disabled Start's title), or undefined where it can. */
export function startBlocked(host: HostInfo | null): string | undefined {
  return host?.kvmProblem ? 'Starting a VM needs KVM, which this host lacks: see the notice at the top' : undefined;
}

/**
 * The props of a button that starts VMs: disabled while `busy` or where a start cannot work
 * (startBlocked), its title saying why and its description the notice.
 */
export function startButtonProps(host: HostInfo | null, busy = false): { disabled: boolean; title?: string; 'aria-describedby'?: string } {
  const blocked = startBlocked(host);
  return blocked ? { disabled: true, title: blocked, 'aria-describedby': KVM_NOTICE_ID } : { disabled: busy };
}

export function KvmNotice() {
  const problem = useApp((s) => s.host?.kvmProblem);
  const cause = useApp((s) => s.host?.kvm.cause);
  if (!problem) return null;
  return (
    <div className="banner kvm-notice" role="note" id={KVM_NOTICE_ID} data-testid="kvm-notice" data-cause={cause}>
      <strong>No KVM here.</strong> {problem.replace(/\.$/, '')}. VMs can still be created, edited, cloned and exported, and
      comparisons planned; starting one needs KVM.
    </div>
  );
}

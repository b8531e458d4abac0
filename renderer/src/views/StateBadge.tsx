import type { VmRunState } from '../../../electron/service/api.ts';

export function StateBadge({ state, busy }: { state: VmRunState; busy?: string }) {
  const label = busy && state === 'stopped' ? busy : state;
  return <span className={`badge state-${state}`} data-testid="vm-state" aria-label={`state: ${label}`}>{label}</span>;
}

// The library as a table, sortable by any column (a click on its header; again for the other
// direction), as virt-manager's and Cockpit's lists are. The order is kept across visits.
import { useState } from 'react';
import type { HostInfo, VmRecord } from '../../../electron/service/api.ts';
import { useApp, navigate, vmAction } from '../state/app.ts';
import { guestLabel, haltPollNow } from '../lib/config.ts';
import { ago, mib } from '../lib/format.ts';
import { StateBadge } from './StateBadge.tsx';
import { StartButton } from './StartButton.tsx';

type SortKey = 'name' | 'state' | 'guest' | 'cpus' | 'memory' | 'machine' | 'haltPoll' | 'lastRun';
interface Sort { key: SortKey; dir: 1 | -1 }

const STATE_ORDER: Record<string, number> = { running: 0, paused: 1, starting: 2, stopping: 3, stopped: 4 };

const COLUMNS: { key: SortKey; label: string; numeric?: boolean; value: (v: VmRecord, host: HostInfo | null) => string | number }[] = [
  { key: 'name', label: 'Name', value: (v) => v.config.name.toLowerCase() },
  { key: 'state', label: 'State', value: (v) => STATE_ORDER[v.status.state] ?? 9 },
  { key: 'guest', label: 'Guest', value: (v, h) => guestLabel(h, v.config).toLowerCase() },
  { key: 'cpus', label: 'vCPUs', numeric: true, value: (v) => v.config.cpus },
  { key: 'memory', label: 'Memory', numeric: true, value: (v) => v.config.memoryMiB },
  { key: 'machine', label: 'Machine', value: (v) => v.config.machine },
  // The host default sorts as "more than any value" (it is the host's, not the VM's).
  { key: 'haltPoll', label: 'Halt polling', numeric: true, value: (v) => v.config.haltPollNs ?? Number.MAX_SAFE_INTEGER },
  // Never started sorts as the oldest.
  { key: 'lastRun', label: 'Last run', numeric: true, value: (v) => v.status.startedAt ?? v.lastStartedAt ?? 0 },
];

const SORT_KEY = 'unhalt.library.sort';

function loadSort(): Sort {
  try {
    const s = JSON.parse(localStorage.getItem(SORT_KEY) ?? '') as Sort;
    if (COLUMNS.some((c) => c.key === s.key) && (s.dir === 1 || s.dir === -1)) return s;
  } catch { /* none kept yet */ }
  return { key: 'name', dir: 1 };
}

export function sortVms(vms: readonly VmRecord[], host: HostInfo | null, sort: Sort): VmRecord[] {
  const col = COLUMNS.find((c) => c.key === sort.key) ?? COLUMNS[0]!;
  const byName = COLUMNS[0]!;
  return [...vms].sort((a, b) => {
    const x = col.value(a, host);
    const y = col.value(b, host);
    const d = x < y ? -1 : x > y ? 1 : 0;
    // Ties in name order, always ascending, so equal rows do not jump around.
    return d * sort.dir || (byName.value(a, host) < byName.value(b, host) ? -1 : 1);
  });
}

export function LibraryTable({ vms, host }: { vms: readonly VmRecord[]; host: HostInfo | null }) {
  const [sort, setSort] = useState<Sort>(loadSort);
  const busy = useApp((s) => s.busy);
  const choose = (key: SortKey) => {
    const next: Sort = sort.key === key ? { key, dir: sort.dir === 1 ? -1 : 1 } : { key, dir: COLUMNS.find((c) => c.key === key)?.numeric ? -1 : 1 };
    setSort(next);
    localStorage.setItem(SORT_KEY, JSON.stringify(next));
  };
  const rows = sortVms(vms, host, sort);
  return (
    // Names, guests and halt polling wrap, so nine columns fit a 1024 px window; the wrapper
    // scrolls the table, not the page, in a window narrower than that.
    <div className="table-wrap">
    <table className="vm-table" data-testid="vm-table" aria-label="VM library">
      <thead>
        <tr>
          {COLUMNS.map((c) => (
            <th key={c.key} scope="col" className={c.numeric ? 'num' : undefined}
              aria-sort={sort.key === c.key ? (sort.dir === 1 ? 'ascending' : 'descending') : 'none'}>
              <button type="button" className="sort-btn" data-sort={c.key} onClick={() => choose(c.key)}>
                {c.label}<span aria-hidden="true" className="sort-mark">{sort.key === c.key ? (sort.dir === 1 ? ' ▲' : ' ▼') : ''}</span>
              </button>
            </th>
          ))}
          <th scope="col"><span className="sr-only">Actions</span></th>
        </tr>
      </thead>
      <tbody>
        {rows.map((vm) => {
          const c = vm.config;
          const state = vm.status.state;
          const lastRun = vm.status.startedAt ?? vm.lastStartedAt;
          return (
            <tr key={vm.id} data-vm-id={vm.id} data-state={state}>
              <th scope="row" className="wrap"><button type="button" className="link-btn" onClick={() => navigate({ view: 'vm', id: vm.id })}>{c.name}</button></th>
              <td><StateBadge state={state} busy={busy[vm.id]} /></td>
              <td className="wrap">{guestLabel(host, c)}</td>
              <td className="num">{c.cpus}</td>
              <td className="num">{mib(c.memoryMiB)}</td>
              <td>{c.machine}</td>
              <td className="num wrap">{haltPollNow(c, vm.status, host)}</td>
              <td className="num" title={lastRun ? new Date(lastRun).toLocaleString() : undefined}>{lastRun ? ago(lastRun) : 'never'}</td>
              <td className="row-actions">
                {state === 'stopped'
                  ? <StartButton vmId={vm.id} host={host} busy={!!busy[vm.id]} className="btn small primary" />
                  : <button type="button" className="btn small" disabled={!!busy[vm.id] || state === 'stopping'} onClick={() => void vmAction(vm.id, 'stop')}>Stop</button>}
              </td>
            </tr>
          );
        })}
      </tbody>
    </table>
    </div>
  );
}

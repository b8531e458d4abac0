// The window's (or tab's) title for each view: what is on the page first (its heading), then the app, so
// several tabs or windows (a VM each) can be told apart in a tab strip or a window list.
import type { VmRecord } from '../../../electron/service/api.ts';
import type { Route } from '../state/app.ts';

export const APP_NAME = 'Unhalt';

export function pageTitle(route: Route, vms: readonly Pick<VmRecord, 'id' | 'config'>[], loaded = true): string {
  const vmName = (id: string) => vms.find((v) => v.id === id)?.config.name ?? (loaded ? 'VM not found' : 'Loading…');
  const what = route.view === 'library' ? 'Virtual machines'
    : route.view === 'new' ? 'New virtual machine'
      : route.view === 'vm' ? vmName(route.id)
        : route.view === 'edit' ? `Edit ${vmName(route.id)}`
          : 'Compare configurations';
  return `${what} — ${APP_NAME}`;
}

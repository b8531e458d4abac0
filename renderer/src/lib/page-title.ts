// The window's (or tab's) title for each view: what is on the page first (its heading), then the app, so
// several tabs or windows (a VM each) can be told apart in a tab strip or a window list.
// Pure, and typed by shape only (a Route and VmRecords fit), so it is tested without the app's state.

/** The parts of a route (state/app.ts Route) a title depends on. */
export type TitledRoute = { view: 'library' | 'new' | 'import' | 'compare'; guest?: string; experimentId?: string } | { view: 'vm' | 'edit'; id: string };

export const APP_NAME = 'Unhalt';

export function pageTitle(route: TitledRoute, vms: readonly { id: string; config: { name: string } }[], loaded = true): string {
  const vmName = (id: string) => vms.find((v) => v.id === id)?.config.name ?? (loaded ? 'VM not found' : 'Loading…');
  const what = route.view === 'library' ? 'Virtual machines'
    : route.view === 'new' ? 'New virtual machine'
      : route.view === 'import' ? 'Import a disk image'
      : route.view === 'vm' ? vmName(route.id)
        : route.view === 'edit' ? `Edit ${vmName(route.id)}`
          : 'Compare configurations';
  return `${what} — ${APP_NAME}`;
}

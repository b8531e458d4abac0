// Where Unhalt keeps its data (docs/cli.md, "Paths"): UNHALT_HOME, else $XDG_DATA_HOME/unhalt, else
// ~/.local/share/unhalt — the same folder for the Electron app and host mode.
import { homedir } from 'node:os';
import { isAbsolute, join } from 'node:path';

export function unhaltHome(env: NodeJS.ProcessEnv = process.env): string {
  if (env.UNHALT_HOME) return env.UNHALT_HOME;
  // The XDG spec says a relative XDG_DATA_HOME is invalid and must be ignored.
  const xdg = env.XDG_DATA_HOME && isAbsolute(env.XDG_DATA_HOME) ? env.XDG_DATA_HOME : join(homedir(), '.local', 'share');
  return join(xdg, 'unhalt');
}

export interface HomeLayout {
  home: string;
  library: string;
  lock: string;
  /** Notices about repairs of the library (library-notices.ts). */
  libraryNotices: string;
  /** User settings of the service (settings.ts). */
  settings: string;
  logs: string;
  experiments: string;
  /** What `unhalt import` made per imported VM: kernel, initrd, seed (image-import.ts). */
  imports: string;
  /** Host commands the user confirmed (host-commands.ts): the only ones the API may run. */
  hostCommands: string;
  /** The user's saved benchmarks, one NAME.json each (saved-workloads.ts). */
  workloads: string;
}

export function homeLayout(home: string): HomeLayout {
  return {
    home,
    library: join(home, 'vms.json'),
    lock: join(home, 'vms.json.lock'),
    libraryNotices: join(home, 'library-notices.json'),
    settings: join(home, 'settings.json'),
    logs: join(home, 'logs'),
    experiments: join(home, 'experiments'),
    imports: join(home, 'imports'),
    hostCommands: join(home, 'host-commands.json'),
    workloads: join(home, 'workloads'),
  };
}

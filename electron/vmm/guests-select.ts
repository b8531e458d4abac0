// Which files and command line a built-in Linux guest boots with.
import type { HostKind } from './host.ts';
import { ConfigError, type VmConfig } from './config/vm-config.ts';

export interface GuestFiles {
  kernel: string;
  initrd?: string;
  cmdline: string;
}

export function linuxGuestFiles(_c: VmConfig, _kind: HostKind): GuestFiles {
  throw new ConfigError('the Linux guest kit is not built: run "npm run build:linux"');
}

// What the service checks about a VM configuration beyond its schema (validateConfig), through
// the rules every surface shares: that it fits this host and contradicts nothing
// (vmm/config/rules.ts), and that a custom kernel and initrd are real files of the right kind
// (vmm/boot/boot-file-checks.ts) — which here must also lie inside the allowed folders
// (allowed-folders.ts). Files are only inspected; their content never goes back through the API.
import type { AllowedFolder } from './api.ts';
import { checkBootFiles as checkFiles } from '../vmm/boot/boot-file-checks.ts';
import { checkFitsThisHost } from '../vmm/config/host-fit.ts';
import { ConfigError, type VmConfig } from '../vmm/config/vm-config.ts';
import { confineToAllowedFolders } from './allowed-folders.ts';
import { ApiError, toApiError } from './errors.ts';

export async function checkBootFiles(c: VmConfig, folders: readonly AllowedFolder[]): Promise<void> {
  try {
    await checkFiles(c, (path, what) => confineToAllowedFolders(path, what, folders));
  } catch (e) {
    throw toApiError(e, 'invalid');
  }
}

/** Refuses what this host could never run (more memory than it has, CPUs it lacks) and contradictions. */
export function checkHostLimits(c: VmConfig, maxVcpus: number | undefined): void {
  try {
    checkFitsThisHost(c, maxVcpus);
  } catch (e) {
    // Even the host's limits ('host' when a start meets them) are the user's input here: 'invalid'.
    throw e instanceof ConfigError ? new ApiError('invalid', e.message) : toApiError(e);
  }
}

/** VMM start errors may describe a kernel file's first bytes: keep those on this side. */
export function sanitizeVmError(message: string): string {
  return message.replace(/\s*\(\d+ bytes, starts with [^)]*\)/g, '');
}

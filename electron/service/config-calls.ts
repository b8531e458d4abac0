// The API's calls on a configuration that is not (yet) in the library, as the wizard, the edit
// view and the export view have it: described (resolved, with the equivalent command line), its
// boot files checked as typed, exported as QEMU / libvirt / KubeVirt text. Nothing is saved.
import type { ExportedConfigDto, ResolvedDto } from './api.ts';
import { commandLine } from '../vmm/config/cli-args.ts';
import { resolveBoot, resolveMachineWithoutKvm } from '../vmm/config/resolve.ts';
import { judgedAtStart } from '../vmm/config/host-rules.ts';
import { validateConfig, type VmConfig } from '../vmm/config/vm-config.ts';
import { EXPORT_FORMATS, exportConfig, exportHostProblem, isExportFormat, isExportHost } from '../vmm/export/export.ts';
import { hostKind } from '../vmm/host.ts';
import { probeHost, type HostCapabilities } from '../vmm/machine/host-caps.ts';
import { checkBootFiles } from './config-checks.ts';
import { ApiError, toApiError } from './errors.ts';
import type { ServiceState } from './service-state.ts';
import { clip } from './validate.ts';
import { toResolvedDto } from './vm-supervisor.ts';

export class ConfigCalls {
  private readonly s: ServiceState;

  constructor(state: ServiceState) {
    this.s = state;
  }

  async describeConfig(raw: unknown): Promise<ResolvedDto> {
    const c = await this.s.validConfigWithFiles(raw);
    let host: HostCapabilities | undefined;
    try { host = probeHost(); } catch { /* no KVM: the command line needs none; a start judges the rest */ }
    if (host) return toResolvedDto(this.s.resolve(c), commandLine(c));
    try {
      const { resolution } = resolveMachineWithoutKvm(c);
      return { ...toResolvedDto({ resolution }, commandLine(c)), judgedAtStart: judgedAtStart(c, resolution.features) };
    } catch (e) {
      throw toApiError(e);
    }
  }

  async checkBootFiles(raw: unknown): Promise<void> {
    if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) throw new ApiError('invalid', 'the files to check must be an object { kernel, initrd, memoryMiB, disks }');
    const { kernel, initrd, memoryMiB, disks, ...rest } = raw as Record<string, unknown>;
    if (Object.keys(rest).length) throw new ApiError('invalid', `unknown field "${clip(Object.keys(rest)[0]!)}" (valid: kernel, initrd, memoryMiB, disks)`);
    let c: VmConfig;
    try {
      // The schema's own path and memory rules first, exactly as createVm applies them.
      c = validateConfig({ guest: kernel === undefined ? 'probe' : 'custom', kernel, initrd, memoryMiB, disks });
    } catch (e) {
      throw toApiError(e);
    }
    await checkBootFiles(c, this.s.allowedFolders());
  }

  async exportConfig(raw: unknown, rawFormat: unknown, rawForHost?: unknown): Promise<ExportedConfigDto> {
    if (!isExportFormat(rawFormat)) {
      throw new ApiError('invalid', `export format must be one of ${EXPORT_FORMATS.join(', ')}, got ${JSON.stringify(rawFormat)?.slice(0, 40)}`);
    }
    // For the kind of host asked for, else this host's (PVM needs two adjustments); nothing else about this host matters.
    const kind = rawForHost === undefined ? hostKind() : rawForHost;
    if (!isExportHost(kind)) throw new ApiError('invalid', exportHostProblem(kind, 'the export\'s host (forHost)'));
    const c = await this.s.validConfigWithFiles(raw);
    try {
      return exportConfig(rawFormat, { config: c, boot: resolveBoot(c, kind), hostKind: kind });
    } catch (e) {
      throw toApiError(e);
    }
  }
}

// An experiment's preparation: the spec checked completely before anything runs — its shape and
// limits (spec.ts), the workload, every configuration parsed and resolved against this host's
// KVM, the QEMU command lines — so that what the runner runs is what was checked.
import { existsSync } from 'node:fs';
import { parseConfigString } from '../vmm/config/config-string.ts';
import { resolveMachine } from '../vmm/config/resolve.ts';
import type { VmConfig } from '../vmm/config/vm-config.ts';
import { LINUX_HOST_BUILD_HINT, LINUX_HOST_WORKLOAD, LINUX_WORKLOADS_DISK, LINUX_WORKLOADS_DISK_HINT } from '../vmm/guests-linux.ts';
import { hostKind } from '../vmm/host.ts';
import { probeHost, type HostCapabilities } from '../vmm/machine/host-caps.ts';
import type { Prepared } from './backend.ts';
import { qemuCommand, qemuExportCommand } from './backend-qemu.ts';
import type { ExperimentSpec } from './types.ts';
import { ExperimentError, validateSpec } from './spec.ts';
import { linuxWorkloadArgs, workload, type Workload } from './workloads.ts';
import { benchWorkload } from './bench-workload.ts';
import { benchCommandOf } from './user-bench.ts';
import { configOnVm } from './vm-base.ts';

/** Why a Linux-guest experiment is refused on PVM hosts (one line). */
export const LINUX_ON_PVM = 'the Linux guest cannot run on this host: its KVM is PVM (guest ring 0 is emulated), where a stock '
  + 'Linux kernel never finishes booting; use the probe guest (--guest probe, workloads ipi, timer, spinlock, pio, idle)';

/** Checks a spec completely before anything runs (every config parsed and resolved). */
export interface PreparedExperiment {
  spec: ExperimentSpec;
  work: Workload;
  prepared: Prepared[];
  notes: string[];
  /** Linux workloads: the complete `key=value` arguments for the agent and the host build. */
  linuxArgs?: string[];
}

/**
 * The host a spec is checked against: its capabilities, or how to get them (the service's probe,
 * which refuses in the words the app shows where KVM cannot be opened); default probeHost().
 */
export type HostSource = HostCapabilities | (() => HostCapabilities);

/** The host's kind without asking KVM for it (a PVM host is known from the OS). */
export function hostKindOf(host?: HostSource): HostCapabilities['kind'] {
  return (typeof host === 'object' ? host.kind : undefined) ?? hostKind();
}

/**
 * Checks a spec completely before anything runs: its shape and limits (spec.ts, the one place),
 * then what depends on this host (the workload, every config resolved against this KVM).
 * Returns the clean spec too: what the runner runs is what was checked.
 */
export function prepareExperiment(raw: unknown, host?: HostSource): PreparedExperiment {
  // First: nothing else matters when the guest cannot boot here.
  if (typeof raw === 'object' && raw !== null && (raw as ExperimentSpec).guest === 'linux' && hostKindOf(host) === 'pvm') throw new ExperimentError(LINUX_ON_PVM);
  const spec = validateSpec(raw);
  let work: Workload;
  try {
    work = spec.bench ? benchWorkload(spec.workload, spec.bench, spec.guest) : workload(spec.guest as 'probe' | 'linux', spec.workload);
  } catch (e) {
    throw new ExperimentError((e as Error).message);
  }
  // The user's own benchmark runs against our VM (a guest command through our agent): QEMU and a bare row have no part in it yet.
  // A host command also runs against the same VM under QEMU (the export's command line); a guest
  // command would need our agent's channel under QEMU, which the export does not wire two-way.
  if (spec.bench?.guestCmd && spec.vsQemu) throw new ExperimentError('--vs-qemu is not available with a guest command: under QEMU, ttyS1 is a file, not a channel to the agent; use --host-cmd, or drop --vs-qemu');
  if (spec.bench && spec.bare) throw new ExperimentError(`--bare is not available with a ${benchCommandOf(spec.bench).where} command (there is no bare-metal row of the user's own benchmark); drop --bare`);
  const args = spec.workloadArgs ?? '';
  let linuxArgs: string[] | undefined;
  if (work.guest === 'linux') {
    try {
      linuxArgs = linuxWorkloadArgs(work, args);
    } catch (e) {
      throw new ExperimentError((e as Error).message);
    }
    if (spec.vsQemu && !spec.bench) throw new ExperimentError('--vs-qemu is not available for the Linux guest yet (QEMU would need the initramfs and a two-way ttyS1); use --bare for the host reference');
    if (work.tool && spec.bare) throw new ExperimentError(`--bare is not available for ${work.name}: it runs Debian's ${work.tool} from the workloads disk, which has no host build here; use pipe, messaging or ctx for a bare-metal reference`);
    if (work.tool && !existsSync(LINUX_WORKLOADS_DISK)) throw new ExperimentError(`${work.name} runs ${work.tool} from the workloads disk, which is not built (${LINUX_WORKLOADS_DISK}): ${LINUX_WORKLOADS_DISK_HINT}`);
    if (spec.bare && !existsSync(LINUX_HOST_WORKLOAD)) throw new ExperimentError(`--bare needs the host build of the Linux workloads (${LINUX_HOST_WORKLOAD}): ${LINUX_HOST_BUILD_HINT}`);
  }
  const notes: string[] = [];
  const configs = spec.configs.map(({ name, config }): Prepared => {
    let c: VmConfig;
    try {
      // A built-in workload sets the guest's command line (probe: its scenario); the user's own
      // benchmark runs the VM as it is.
      const append = work.cmdline && !spec.bench ? work.cmdline(args) : undefined;
      if (spec.vm) {
        c = configOnVm(spec.vm.config, String(config), append);
      } else {
        const base: Record<string, unknown> = { guest: spec.guest, name: 'bench' };
        if (append !== undefined) base.append = append; // Linux: the default kernel command line
        c = parseConfigString(String(config), base);
      }
    } catch (e) {
      throw new ExperimentError(`configuration "${name}": ${(e as Error).message}`);
    }
    // Disks are no knob: the workloads run in the guest's RAM, and an experiment's configuration
    // (API, bench) must not hand the host's files to a guest past the service's allowed folders.
    // A library VM's own disks were checked when it was saved; configOnVm made them throwaway.
    if (c.disks && !spec.vm) throw new ExperimentError(`configuration "${name}": disk= is not a bench knob (the workloads use no disk); drop it`);
    // The tool workloads' programs are on the workloads disk: attached read-only by the runner
    // itself (a file of the kit's, not the user's), so the guest's /init mounts it.
    // A guest command on our Linux guest may use them too (the agent puts them on its PATH).
    const toolsForCmd = spec.bench?.guestCmd !== undefined && !spec.vm && spec.guest === 'linux' && existsSync(LINUX_WORKLOADS_DISK);
    if (work.tool || toolsForCmd) c = { ...c, disks: [...(c.disks ?? []), { path: LINUX_WORKLOADS_DISK, readonly: true }] };
    if (c.cpus < work.minCpus) throw new ExperimentError(`configuration "${name}": workload ${work.name} needs at least ${work.minCpus} vCPUs (cpus=${work.minCpus})`);
    return { name, config: c };
  });
  // The host only once the request itself is good: a bad one is refused in its own words on
  // any host, one without a usable /dev/kvm included (where a good one gets the probe's error).
  const caps = typeof host === 'function' ? host() : host ?? probeHost();
  const prepared = configs.map((p) => {
    try {
      resolveMachine(p.config, caps); // the runnability check, before any run starts
    } catch (e) {
      throw new ExperimentError(`configuration "${p.name}": ${(e as Error).message}`);
    }
    if (spec.vsQemu) Object.assign(p, spec.bench ? qemuExportCommand(p.config, caps) : qemuCommand(p.config, caps));
    return p;
  });
  if (spec.bare && work.guest !== 'linux') notes.push(`--bare: the ${work.name} workload runs inside the probe guest only; no bare-metal reference for it`);
  for (const p of prepared) if (p.qemuCaveat) notes.push(`${p.name} (qemu): ${p.qemuCaveat}`);
  return linuxArgs ? { spec, work, prepared, notes, linuxArgs } : { spec, work, prepared, notes };
}

// What the API may put in an experiment spec, before the spec's own checks (spec.ts): the
// resolved forms `unhalt bench` builds from its user's typing — a VM's whole configuration and a
// host command's argument vector — are refused from the API. Instead the API names a library VM
// by id (`vm: "ID"`, resolved from the library: its disks were checked against the allowed
// folders when it was saved) and a host command by the id of its confirmation
// (`bench: { hostCmdId, metric, ... }`, host-commands.ts), or a saved workload by name. So the
// holder of the host-mode token cannot run a program on the host by starting an experiment. A
// guest command (`bench: { guestCmd: [...] }`) runs in the guest through its agent and is taken as it is.
import { ApiError } from './errors.ts';
import { confirmedHostCommand } from './host-commands.ts';
import type { HomeLayout } from './paths.ts';
import type { LibraryRecord } from './library-schema.ts';
import { isBuiltInWorkload, loadWorkload } from '../experiments/saved-workloads.ts';
import { vmImage } from '../experiments/vm-base.ts';
import { clip } from './validate.ts';
import type { UserBenchmark } from '../experiments/user-bench.ts';

const CONFIRM_FIRST = 'a host command from the API must be confirmed first: requestHostCommand(argv), then confirmHostCommand(requestId, code) with the code the person at this machine was shown, then give bench.hostCmdId';

/** The API's raw spec with `vm` and `bench` resolved; every other field as it came (spec.ts checks them). */
export function resolveApiSpec(raw: unknown, layout: HomeLayout, record: (id: unknown) => LibraryRecord): unknown {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) return raw; // spec.ts says what is wrong
  const r = { ...(raw as Record<string, unknown>) };
  if (r.vm !== undefined) {
    if (typeof r.vm !== 'string') throw new ApiError('invalid', 'vm must be the id of a VM of the library');
    const rec = record(r.vm);
    const image = vmImage(rec.config);
    r.vm = { name: rec.config.name, config: rec.config, ...(image ? { image } : {}) };
  }
  if (r.bench !== undefined) {
    if (typeof r.bench !== 'object' || r.bench === null || Array.isArray(r.bench)) throw new ApiError('invalid', 'bench must be an object { hostCmdId or guestCmd, metric, ready?, higherIsBetter?, unit? }');
    const b = { ...(r.bench as Record<string, unknown>) };
    if (b.hostCmd !== undefined) throw new ApiError('invalid', CONFIRM_FIRST);
    // A guest command runs inside the guest, through its agent: nothing on the host to confirm.
    if (b.guestCmd !== undefined && b.hostCmdId === undefined) return { ...r, bench: b };
    if (typeof b.hostCmdId !== 'string') throw new ApiError('invalid', `bench.hostCmdId is missing: ${CONFIRM_FIRST}`);
    const confirmed = confirmedHostCommand(layout.hostCommands, b.hostCmdId);
    if (!confirmed) throw new ApiError('invalid', `host command ${clip(b.hostCmdId, 20)} was never confirmed: ${CONFIRM_FIRST}`);
    r.bench = { ...b, hostCmd: confirmed.argv };
  } else if (typeof r.workload === 'string' && !isBuiltInWorkload(r.workload)) {
    const saved = resolveSavedWorkload(layout, r.workload);
    if (saved) r.bench = saved;
  }
  return r;
}

/**
 * A saved workload as the API may run it, or undefined when there is none of that name: its host
 * command must still be a confirmed one (the file may have been edited since it was saved).
 */
export function resolveSavedWorkload(layout: HomeLayout, name: string): UserBenchmark | undefined {
  let saved;
  try {
    saved = loadWorkload(layout.workloads, name);
  } catch (e) {
    throw new ApiError('invalid', (e as Error).message);
  }
  if (saved?.hostCmd) {
    const confirmed = saved.hostCmdId !== undefined ? confirmedHostCommand(layout.hostCommands, saved.hostCmdId) : undefined;
    if (!confirmed || JSON.stringify(confirmed.argv) !== JSON.stringify(saved.hostCmd)) throw new ApiError('invalid', `the saved workload ${name}'s host command is not a confirmed one: ${CONFIRM_FIRST}`);
  }
  return saved;
}

// The API's calls on the knobs a running VM may change (halt polling and pinning), and on keeping
// what was changed live in the VM's saved configuration. The running VM's own state is its
// VmSupervisor's; what the host can do is judged by the same rules as at start (host-rules.ts,
// rules.ts).
import type { VmRecord, VmStatus } from './api.ts';
import { haltPollUnavailable } from '../vmm/config/host-rules.ts';
import { checkPinFit } from '../vmm/config/rules.ts';
import { MAX_HALT_POLL_NS, MAX_HOST_CPU, MAX_PIN_ENTRIES } from '../vmm/config/limits.ts';
import { ApiError, toApiError } from './errors.ts';
import type { ServiceState } from './service-state.ts';
import { intArg, intListArg } from './validate.ts';

export class KnobCalls {
  private readonly s: ServiceState;

  constructor(state: ServiceState) {
    this.s = state;
  }

  setHaltPollNs(rawId: unknown, rawNs: unknown): VmStatus {
    const rec = this.s.record(rawId);
    const ns = intArg(rawNs, 'halt-poll-ns', 0, MAX_HALT_POLL_NS);
    const unavailable = haltPollUnavailable(this.s.probe());
    if (unavailable) throw new ApiError('host', unavailable);
    return this.s.supervisor(rec.id).setHaltPollNs(ns);
  }

  setPin(rawId: unknown, rawCpus: unknown): VmStatus {
    const rec = this.s.record(rawId);
    const cpus = intListArg(rawCpus, 'pin', MAX_PIN_ENTRIES, 0, MAX_HOST_CPU);
    try {
      checkPinFit(cpus, this.s.probe().hostCpus);
    } catch (e) {
      throw toApiError(e);
    }
    return this.s.supervisor(rec.id).setPin(cpus);
  }

  async keepLiveKnobs(rawId: unknown): Promise<VmRecord> {
    const id = this.s.record(rawId).id;
    const live = this.s.supervisors.get(id)?.liveKnobs() ?? {};
    if (live.haltPollNs === undefined && live.pin === undefined) {
      throw new ApiError('conflict', 'nothing to keep: halt polling and pinning were not changed while the VM runs');
    }
    const updated = await this.s.changeRecord(id, (r) => {
      // Only the knobs a running VM may change; the rest of the configuration stays as it is.
      const next: Record<string, unknown> = { ...r.config };
      if (live.haltPollNs !== undefined) next.haltPollNs = live.haltPollNs;
      if (live.pin !== undefined) {
        if (live.pin.length) next.pin = live.pin;
        else delete next.pin;
      }
      r.config = this.s.validConfig(next);
    });
    this.s.broadcastLibrary();
    return this.s.dto(updated);
  }
}

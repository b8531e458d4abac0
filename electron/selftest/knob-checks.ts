// The knobs' mechanisms checked on the user's own KVM, each as an A/B of the probe guest through the
// experiment runner (the same runs `unhalt bench` makes), judged by KVM's own counters: halt
// polling per VM, cpu-pm=on, pv-unhalt's kicks. Where the host's KVM cannot show a mechanism (PVM
// emulates the guest's hlt; its hypercalls hang a vCPU) the check says so instead of judging.
import { runExperiment } from '../experiments/runner.ts';
import type { ExperimentResult, ExperimentResultRow } from '../experiments/types.ts';
import { cpuPmUnavailable, featureUnavailable, haltPollUnavailable } from '../vmm/config/host-rules.ts';
import type { KvmBackend } from '../vmm/host.ts';
import { PV_FEATURES } from '../vmm/machine/features.ts';
import { probeHost, type HostCapabilities } from '../vmm/machine/host-caps.ts';

export type CheckVerdict = 'pass' | 'fail' | 'not judged';

export interface CheckResult {
  name: string;
  /** What a pass shows, in a sentence. */
  shows: string;
  verdict: CheckVerdict;
  /** The counters seen, or why the check was not judged here. */
  seen: string;
}

interface KnobCheck {
  name: string;
  shows: string;
  /** Why this KVM cannot show it (the rules that refuse such a config, host-rules.ts); undefined: it can. */
  notHere(kvm: KvmBackend, host: HostCapabilities): string | undefined;
  workload: string;
  workloadArgs: string;
  configs: { name: string; config: string }[];
  /** The verdict and what was seen, from the experiment's rows (one per config). */
  judge(row: (name: string) => ExperimentResultRow | undefined): { pass: boolean; seen: string };
}

const PVM_HLT = 'PVM emulates the guest kernel\'s hlt, so it exits whatever the VM asks';
const n = (v: number | null | undefined) => (v === null || v === undefined ? 'none' : String(Math.round(v)));

export const KNOB_CHECKS: readonly KnobCheck[] = [
  {
    name: 'halt polling',
    shows: 'KVM polls a halting vCPU only as this VM\'s halt-poll-ns allows (KVM_CAP_HALT_POLL): none at 0, polls at 2 ms',
    notHere: (_kvm, host) => haltPollUnavailable(host),
    // 1 ms timer ticks with hlt between: halts shorter than the 2 ms window, which KVM polls.
    workload: 'idle', workloadArgs: 'ms=600',
    configs: [{ name: 'poll-0', config: 'cpus=1,halt-poll-ns=0' }, { name: 'poll-2ms', config: 'cpus=1,halt-poll-ns=2000000' }],
    judge: (row) => {
      const off = row('poll-0'), on = row('poll-2ms');
      const pass = (off?.haltExits ?? 0) > 0 && off?.pollHitRate === null && typeof on?.pollHitRate === 'number';
      return { pass, seen: `halt-poll-ns=0: ${n(off?.haltExits)} halt exits, ${off?.pollHitRate === null ? 'no polls' : 'polls'}; 2 ms: ${n(on?.haltExits)} halt exits, poll hit rate ${typeof on?.pollHitRate === 'number' ? `${(on.pollHitRate * 100).toFixed(0)}%` : 'none (no polls)'}` };
    },
  },
  {
    name: 'cpu-pm',
    shows: 'with cpu-pm=on (KVM_CAP_X86_DISABLE_EXITS) a halted vCPU stays in the guest: no halt exits',
    notHere: (kvm, host) => (kvm === 'kvm_pvm' ? PVM_HLT : cpuPmUnavailable(host)),
    workload: 'idle', workloadArgs: 'ms=600',
    configs: [{ name: 'cpu-pm-off', config: 'cpus=1' }, { name: 'cpu-pm-on', config: 'cpus=1,cpu-pm=on' }],
    judge: (row) => {
      const off = row('cpu-pm-off'), on = row('cpu-pm-on');
      return { pass: (off?.haltExits ?? 0) > 0 && on?.haltExits === 0, seen: `cpu-pm off: ${n(off?.haltExits)} halt exits; on: ${n(on?.haltExits)}` };
    },
  },
  {
    name: 'pv-unhalt kicks',
    shows: 'a spinlock waiter halts and its releaser kicks it with a KVM hypercall only with kvm-pv-unhalt=on',
    notHere: (kvm, host) => (kvm === 'kvm_pvm' ? 'KVM hypercalls hang a vCPU on PVM' : featureUnavailable(PV_FEATURES.find((f) => f.name === 'kvm-pv-unhalt')!, host)),
    workload: 'spinlock', workloadArgs: 'ms=500 spin=16',
    configs: [{ name: 'pv-off', config: 'cpus=4,kvm-pv-unhalt=off' }, { name: 'pv-on', config: 'cpus=4,kvm-pv-unhalt=on' }],
    judge: (row) => {
      const off = row('pv-off'), on = row('pv-on');
      return { pass: off?.hypercalls === 0 && (on?.hypercalls ?? 0) > 0, seen: `kvm-pv-unhalt off: ${n(off?.hypercalls)} hypercalls; on: ${n(on?.hypercalls)}` };
    },
  },
];

/** Runs each check (one run per config); `progress` gets a line as each starts. */
export async function runKnobChecks(kvm: KvmBackend, progress: (line: string) => void, signal?: AbortSignal): Promise<CheckResult[]> {
  const results: CheckResult[] = [];
  const host = probeHost();
  for (const c of KNOB_CHECKS) {
    const why = c.notHere(kvm, host);
    if (why) {
      results.push({ name: c.name, shows: c.shows, verdict: 'not judged', seen: `not judged on this host: ${why}` });
      continue;
    }
    progress(`check: ${c.name}`);
    let r: ExperimentResult;
    try {
      r = await runExperiment({ guest: 'probe', workload: c.workload, workloadArgs: c.workloadArgs, configs: c.configs, runs: 1 }, () => {}, signal);
    } catch (e) {
      if (signal?.aborted) throw e;
      results.push({ name: c.name, shows: c.shows, verdict: 'fail', seen: `the runs could not be made: ${(e as Error).message}` });
      continue;
    }
    if (r.failures.length) {
      results.push({ name: c.name, shows: c.shows, verdict: 'fail', seen: `a run failed: ${r.failures.map((f) => `${f.config}: ${f.error}`).join('; ')}` });
      continue;
    }
    const { pass, seen } = c.judge((name) => r.rows.find((x) => x.config === name && x.runner === 'unhalt'));
    results.push({ name: c.name, shows: c.shows, verdict: pass ? 'pass' : 'fail', seen });
  }
  return results;
}

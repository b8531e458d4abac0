// The host conditions of an experiment (conditions.ts reads them) as data and as a report's
// header lines. Pure (no Node imports): the service API's types and the renderer reach it.

export const UNKNOWN = 'unknown';

export interface HostConditions {
  kernel: string;
  kvm: { haltPollNs: string; haltPollNsGrow: string; haltPollNsShrink: string };
  cpuModel: string;
  /** cpufreq governor of CPU 0 (all CPUs usually share one). */
  governor: string;
  /** Turbo / boost: on, off or unknown (cpufreq/boost, or intel_pstate/no_turbo inverted). */
  boost: string;
  /** SMT: "on", "off", or the kernel's control word (notsupported, forceoff, ...). */
  smt: string;
  /** /sys/devices/system/cpu/vulnerabilities: each file's first line, by name. */
  mitigations: Record<string, string> | typeof UNKNOWN;
  /** 1-minute load average at each run's start (a tune: each round's): min, mean, max. */
  load?: { min: number; mean: number; max: number; samples: number };
}

/** The conditions in a line or two for a report's header. */
export function conditionsLines(c: HostConditions): string[] {
  const m = c.mitigations === UNKNOWN ? UNKNOWN
    : (() => {
      const vulnerable = Object.entries(c.mitigations).filter(([, v]) => /^Vulnerable/.test(v)).map(([k]) => k);
      const n = Object.keys(c.mitigations).length;
      return vulnerable.length ? `${n} listed, vulnerable: ${vulnerable.join(', ')}` : `${n} listed, none vulnerable`;
    })();
  const load = c.load ? `load ${c.load.min}–${c.load.max} (mean ${c.load.mean}) during the runs` : `load ${UNKNOWN}`;
  return [
    `host: ${c.cpuModel}, kernel ${c.kernel}, governor ${c.governor}, boost ${c.boost}, SMT ${c.smt}, ${load}`,
    `kvm: halt_poll_ns ${c.kvm.haltPollNs}, grow ${c.kvm.haltPollNsGrow}, shrink ${c.kvm.haltPollNsShrink}; mitigations: ${m}`,
  ];
}

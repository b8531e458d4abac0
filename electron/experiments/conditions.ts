// The conditions behind a verdict: what on the host can change an experiment's figures without
// any knob of the VM changing — the kernel, KVM's module-wide halt polling, the CPU and how it is
// clocked, SMT, the speculation mitigations, and how busy the host was during the runs. Read from
// /proc and /sys as they are; what does not exist on this host is "unknown", never a guess.
// `root` lets tests read a fake /sys tree; the load is sampled by the runner (LoadSampler).
import { readFileSync, readdirSync } from 'node:fs';
import { loadavg, release } from 'node:os';
import { join } from 'node:path';
import { hostCpuModel } from '../vmm/host.ts';
import { UNKNOWN, type HostConditions } from './conditions-format.ts';

export { UNKNOWN, type HostConditions };

function read(root: string, path: string): string | undefined {
  try {
    return readFileSync(join(root, path), 'utf8').split('\n')[0]!.trim();
  } catch {
    return undefined;
  }
}

export function hostConditions(root = '/'): HostConditions {
  const kvm = (p: string) => read(root, `sys/module/kvm/parameters/${p}`) ?? UNKNOWN;
  const boost = read(root, 'sys/devices/system/cpu/cpufreq/boost');
  const noTurbo = read(root, 'sys/devices/system/cpu/intel_pstate/no_turbo');
  const smtActive = read(root, 'sys/devices/system/cpu/smt/active');
  const smtControl = read(root, 'sys/devices/system/cpu/smt/control');
  let mitigations: HostConditions['mitigations'] = UNKNOWN;
  try {
    const dir = join(root, 'sys/devices/system/cpu/vulnerabilities');
    const names: string[] = readdirSync(dir).sort();
    if (names.length) mitigations = Object.fromEntries(names.map((n) => [n, read(dir, n) ?? UNKNOWN]));
  } catch { /* no such folder: unknown */ }
  return {
    kernel: root === '/' ? release() : read(root, 'proc/sys/kernel/osrelease') ?? UNKNOWN,
    kvm: { haltPollNs: kvm('halt_poll_ns'), haltPollNsGrow: kvm('halt_poll_ns_grow'), haltPollNsShrink: kvm('halt_poll_ns_shrink') },
    cpuModel: root === '/' ? hostCpuModel() : UNKNOWN,
    governor: read(root, 'sys/devices/system/cpu/cpu0/cpufreq/scaling_governor') ?? UNKNOWN,
    boost: boost !== undefined ? (boost === '1' ? 'on' : 'off') : noTurbo !== undefined ? (noTurbo === '1' ? 'off' : 'on') : UNKNOWN,
    smt: smtActive === '1' ? 'on' : smtControl && smtControl !== 'on' ? smtControl : smtActive === '0' ? 'off' : UNKNOWN,
    mitigations,
  };
}

/** The 1-minute load average at each run's start; its summary for the record. */
export class LoadSampler {
  private readonly samples: number[] = [];

  sample(): void {
    this.samples.push(loadavg()[0]!);
  }

  summary(): HostConditions['load'] {
    const s = this.samples;
    if (!s.length) return undefined;
    const round = (x: number) => Math.round(x * 100) / 100;
    return { min: round(Math.min(...s)), mean: round(s.reduce((a, b) => a + b, 0) / s.length), max: round(Math.max(...s)), samples: s.length };
  }
}


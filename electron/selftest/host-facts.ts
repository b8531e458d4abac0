// What a selftest report says about the machine it ran on: the host conditions every experiment
// record carries (CPU, kernel, governor, boost, SMT, mitigations: experiments/conditions.ts), the
// CPU's vendor, which KVM, and every KVM module parameter that can be read (halt polling, nested,
// AVIC/APICv, ...), so two users' reports can be told apart by what matters to these knobs.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { hostConditions } from '../experiments/conditions.ts';
import type { HostConditions } from '../experiments/conditions-format.ts';
import { kvmBackend, type KvmBackend } from '../vmm/host.ts';

export interface HostFacts {
  conditions: HostConditions;
  cpuVendor: string;
  hostCpus: number;
  kvm: KvmBackend;
  /** module -> parameter -> value, for kvm and the vendor modules loaded. */
  kvmParameters: Record<string, Record<string, string>>;
}

/** `vendor_id` of the first processor in /proc/cpuinfo's text. */
export function cpuVendor(cpuinfo: string): string {
  return /^vendor_id\s*:\s*(.+)$/m.exec(cpuinfo)?.[1]?.trim() ?? 'unknown';
}

/** Every readable file of /sys/module/NAME/parameters, trimmed (some are root-only: left out). */
export function moduleParameters(dir: string): Record<string, string> {
  const out: Record<string, string> = {};
  if (!existsSync(dir)) return out;
  for (const name of readdirSync(dir).sort()) {
    try {
      out[name] = readFileSync(`${dir}/${name}`, 'utf8').trim();
    } catch {
      // unreadable (mode 0200/0400 without root): not ours to report
    }
  }
  return out;
}

export function hostFacts(sysModule = process.env.UNHALT_SYS_MODULE_DIR ?? '/sys/module'): HostFacts {
  let cpuinfo = '';
  try { cpuinfo = readFileSync('/proc/cpuinfo', 'utf8'); } catch { /* not Linux: unknown */ }
  const kvmParameters: Record<string, Record<string, string>> = {};
  for (const m of ['kvm', 'kvm_intel', 'kvm_amd', 'kvm_pvm']) {
    const p = moduleParameters(`${sysModule}/${m}/parameters`);
    if (Object.keys(p).length) kvmParameters[m] = p;
  }
  return { conditions: hostConditions(), cpuVendor: cpuVendor(cpuinfo), hostCpus: cpus().length, kvm: kvmBackend(sysModule), kvmParameters };
}

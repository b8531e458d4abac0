// What a selftest report says about the machine it ran on: the CPU, the kernel, which KVM, and
// every KVM module parameter that can be read (halt polling, nested, AVIC/APICv, ...), so two
// users' reports can be told apart by what matters to these knobs.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { cpus, release } from 'node:os';
import { kvmBackend, type KvmBackend } from '../vmm/host.ts';

export interface HostFacts {
  cpuModel: string;
  cpuVendor: string;
  hostCpus: number;
  kernel: string;
  kvm: KvmBackend;
  /** module -> parameter -> value, for kvm and the vendor module in use. */
  kvmParameters: Record<string, Record<string, string>>;
}

/** `model name` and `vendor_id` of the first processor in /proc/cpuinfo's text. */
export function cpuIdentity(cpuinfo: string): { model: string; vendor: string } {
  const field = (name: string) => new RegExp(`^${name}\\s*:\\s*(.+)$`, 'm').exec(cpuinfo)?.[1]?.trim() ?? 'unknown';
  return { model: field('model name'), vendor: field('vendor_id') };
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
  const { model, vendor } = cpuIdentity(cpuinfo);
  const kvm = kvmBackend(sysModule);
  const kvmParameters: Record<string, Record<string, string>> = {};
  for (const m of ['kvm', 'kvm_intel', 'kvm_amd', 'kvm_pvm']) {
    const p = moduleParameters(`${sysModule}/${m}/parameters`);
    if (Object.keys(p).length) kvmParameters[m] = p;
  }
  return { cpuModel: model, cpuVendor: vendor, hostCpus: cpus().length, kernel: release(), kvm, kvmParameters };
}

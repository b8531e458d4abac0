// What `unhalt doctor` checks, as data (the CLI prints it, the service API will serve it).
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { nodeTooOld, tooOldAdvice } from '../../bin/node-check.mjs';
import { CAP } from '../../native/kvm/abi.ts';
import { REQUIRED_CAPS } from './machine/required-caps.ts';
import { Kvm, kvmDevicePath } from '../../native/kvm/kvm.ts';
import { kvmAccess, type KvmAccess } from './kvm-access.ts';
import { hostCpuList, hostMemoryBytes } from './host.ts';
import { PROBE_KERNEL, probeBuilt } from './guests.ts';
import { hostHaltPollParams, hostKind, hostVirtualization, platformTimingNote, type HostVirtualization } from './host.ts';
import { LINUX_KIT_BUILD_HINT, linuxKitInfo } from './guests-linux.ts';

export interface DoctorCheck {
  name: string;
  ok: boolean;
  detail: string;
  /** What to do when !ok (or a note worth knowing). */
  fix?: string;
}

export interface DoctorReport {
  ok: boolean;
  hostKind: 'pvm' | 'hardware';
  /** What the host is underneath its KVM: bare metal, a virtual machine (nested KVM) or an emulated CPU. */
  hostVirtualization: HostVirtualization;
  kvmDevice: string;
  /** Whether KVM can be opened, and if not the cause found and its fix (kvm-access.ts). */
  kvm: KvmAccess;
  apiVersion?: number;
  maxVcpus?: number;
  capabilities: Record<string, number>;
  haltPoll: Record<string, number>;
  checks: DoctorCheck[];
  /** One line: ready, or the first problem and its fix (doctorSummary). */
  summary: string;
}

/** Capabilities the VMM uses: which are required to start at all. */
const CAPS: [keyof typeof CAP, boolean][] = [
  ...REQUIRED_CAPS.map((c): [keyof typeof CAP, boolean] => [c.cap, true]), ['MAX_VCPUS', false], ['SET_IDENTITY_MAP_ADDR', false], ['GET_TSC_KHZ', false],
  ['X86_DISABLE_EXITS', false], ['HALT_POLL', false], ['BINARY_STATS_FD', false],
  ['SIGNAL_MSI', false], ['IOEVENTFD', false], ['IOEVENTFD_ANY_LENGTH', false],
];

/** The one-line verdict `unhalt doctor` ends with, from its checks (the CLI adds the library's first). */
export function doctorSummary(checks: DoctorCheck[], kvm: KvmAccess, kind: 'pvm' | 'hardware'): string {
  const failed = checks.filter((c) => !c.ok);
  const cpus = hostCpuList().length;
  const host = `${cpus} host CPU${cpus === 1 ? '' : 's'}, ${Math.round(hostMemoryBytes() / 1073741824 * 10) / 10} GiB`;
  if (failed.length === 0) return `ready: Unhalt can run VMs here (${kind === 'pvm' ? 'PVM' : 'hardware-backed'} KVM, ${host})`;
  const first = failed[0]!;
  const more = failed.length > 1 ? ` (and ${failed.length - 1} more problem${failed.length > 2 ? 's' : ''} above)` : '';
  if (!kvm.ok) return `not ready: no KVM: ${kvm.problem}; fix: ${kvm.fix}${more}`;
  return `not ready: ${first.name}: ${first.detail}${first.fix ? `; fix: ${first.fix}` : ''}${more}`;
}

export function runDoctor(): DoctorReport {
  const checks: DoctorCheck[] = [];
  const kind = hostKind();
  const report: DoctorReport = {
    ok: true, hostKind: kind, hostVirtualization: hostVirtualization(), kvmDevice: kvmDevicePath(), kvm: kvmAccess(),
    capabilities: {}, haltPoll: hostHaltPollParams(), checks, summary: '',
  };
  const oldNode = nodeTooOld();
  checks.push({
    name: 'node', ok: !oldNode, detail: `Node ${process.versions.node} (${process.execPath})`,
    ...(oldNode ? { fix: tooOldAdvice(fileURLToPath(new URL('../../', import.meta.url)).replace(/\/$/, ''), ['doctor']) } : {}),
  });
  let kvm: Kvm | undefined;
  if (!report.kvm.ok) {
    checks.push({ name: 'kvm-device', ok: false, detail: `${report.kvm.problem} [${report.kvm.evidence.join('; ')}]`, fix: report.kvm.fix });
  } else {
    try {
      kvm = Kvm.open();
      report.apiVersion = kvm.apiVersion();
      checks.push({ name: 'kvm-device', ok: true, detail: `${report.kvmDevice} opened, KVM API version ${report.apiVersion}` });
    } catch (e) {
      checks.push({ name: 'kvm-device', ok: false, detail: (e as Error).message,
        fix: `point UNHALT_KVM_DEVICE at the KVM device (${report.kvmDevice} is not one), or unset it` });
    }
  }
  if (kvm) {
    const missing: string[] = [];
    for (const [name, required] of CAPS) {
      const value = kvm.checkExtension(CAP[name]);
      report.capabilities[name] = value;
      if (required && !value) missing.push(name);
    }
    report.maxVcpus = kvm.maxVcpus();
    checks.push({
      name: 'kvm-capabilities', ok: missing.length === 0,
      detail: missing.length ? `missing: ${missing.join(', ')}` : `all required present; up to ${report.maxVcpus} vCPUs per VM`
        + `; halt polling per VM: ${report.capabilities.HALT_POLL ? 'yes' : 'no'}`
        + `; binary stats: ${report.capabilities.BINARY_STATS_FD ? 'yes' : 'no'}`
        + `; virtio devices: ${!report.capabilities.SIGNAL_MSI ? 'no (no KVM_CAP_SIGNAL_MSI)' : report.capabilities.IOEVENTFD ? 'yes, notifications by ioeventfd' : 'yes, notifications by MMIO exits (no ioeventfd)'}`,
      fix: 'a newer host kernel (5.15 or later) provides these',
    });
    kvm.close();
  }
  checks.push(!kvm ? { name: 'host-kind', ok: true, detail: 'no KVM to tell (see kvm-device above)' } : {
    name: 'host-kind', ok: true,
    detail: kind === 'pvm'
      ? 'PVM (kvm_pvm): a software nested hypervisor. Guest user mode runs natively, but guest kernel mode and '
        + 'real mode are emulated at about 1 µs per instruction, so kernels boot very slowly (a stock Linux '
        + 'kernel does not finish booting), KVM hypercalls hang a vCPU, and cpu-pm=on does not remove halt exits'
      : 'hardware-backed KVM (VMX or SVM)',
    ...(kind === 'pvm' ? { fix: 'use the probe guest here; compare timings only side by side with QEMU on this host' } : {}),
  });
  const virt = report.hostVirtualization;
  checks.push({
    name: 'host-platform', ok: true,
    detail: (virt.platform === 'bare-metal' ? 'bare metal'
      : `${virt.platform === 'emulated' ? 'emulated CPU' : 'virtual machine'}${virt.hypervisor ? ` (${virt.hypervisor})` : ''}`)
      + `: ${virt.evidence.join('; ')}`,
    fix: platformTimingNote(virt),
  });
  const hp = report.haltPoll;
  checks.push({
    name: 'halt-polling', ok: true,
    detail: hp.halt_poll_ns === undefined ? 'host halt-polling parameters not readable'
      : `host default halt_poll_ns=${hp.halt_poll_ns} (grow ${hp.halt_poll_ns_grow}, grow_start ${hp.halt_poll_ns_grow_start}, shrink ${hp.halt_poll_ns_shrink})`,
  });
  let gcc = false;
  try { execFileSync('gcc', ['--version'], { stdio: 'ignore' }); gcc = true; } catch { /* absent */ }
  checks.push({
    name: 'probe-guest', ok: probeBuilt(), detail: probeBuilt() ? `built: ${PROBE_KERNEL}` : `not built (gcc ${gcc ? 'present' : 'missing'})`,
    fix: gcc ? 'run: npm run build:guests' : 'install gcc (apt-get install gcc), then run: npm run build:guests',
  });
  const kit = linuxKitInfo();
  checks.push({
    name: 'linux-guest', ok: true,
    detail: kit ? `built: kernel ${kit.kernel.package} ${kit.kernel.version}, busybox ${kit.busybox.version}` : 'not built (optional)',
    ...(kit ? {} : { fix: LINUX_KIT_BUILD_HINT }),
  });
  report.ok = checks.every((c) => c.ok);
  report.summary = doctorSummary(checks, report.kvm, kind);
  return report;
}

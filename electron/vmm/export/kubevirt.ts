// A VM as a KubeVirt VirtualMachine (kubevirt.io/v1), for `kubectl apply -f`. KubeVirt names
// fewer knobs than libvirt: features.pvspinlock, features.apic.endOfInterrupt, the kvm clock
// timer, cpu.model host-passthrough (every other paravirt feature the node offers),
// cpu.dedicatedCpuPlacement. The rest (cpu-pm, mem-lock, halt polling, pinning to named host
// CPUs, turning off a feature KubeVirt has no field for) is listed in the header with what to do
// instead. The kernel must come from a container image (firmware.kernelBoot.container).
import {
  describePins, type ExportPlan, featureValue, haltPollAdvice, machineTypeNote, madeForLine, passthroughDefault,
} from './plan.ts';
import { toYaml, type YamlValue } from './yaml.ts';
import { diskMode } from '../config/vm-config.ts';
import { macForVm } from '../config/net-config.ts';
import { qemuDeviceOption } from '../config/device-config.ts';

/** Features KubeVirt has a field for. */
const KUBEVIRT_FIELD = new Set(['kvmclock', 'kvm-pv-eoi', 'kvm-pv-unhalt']);
/** Where the kernel sits in the image the header tells the user to build. */
const IMAGE_DIR = '/boot';

export function kubevirtYaml(plan: ExportPlan): string {
  const c = plan.config;
  const kernelFile = baseName(plan.boot.kernelPath);
  const initrdFile = plan.boot.initrdPath ? baseName(plan.boot.initrdPath) : undefined;
  const image = `registry.example/${plan.slug}-kernel:latest`;
  const withoutField = plan.features.filter((f) => !KUBEVIRT_FIELD.has(f.name));
  // What host-passthrough gives already (on, or left off as this VM has it), and what KubeVirt cannot set.
  const passedThrough = withoutField.filter((f) => f.value && passthroughDefault(f.name));
  const leftOff = withoutField.filter((f) => !f.value && !passthroughDefault(f.name));
  const unreachable = withoutField.filter((f) => f.value !== passthroughDefault(f.name));

  const gaps: string[] = [];
  if (c.cpuPm) {
    gaps.push('cpu-pm=on: KubeVirt has no -overcommit cpu-pm option (HLT, PAUSE and C-state exits stay on). Nearest:',
      '  dedicatedCpuPlacement with isolateEmulatorThread on nodes reserved for it; or a hook sidecar that adds',
      '  <qemu:commandline> -overcommit cpu-pm=on to the domain (see the libvirt export).');
  }
  if (c.memLock) {
    gaps.push('mem-lock=on: KubeVirt cannot lock guest memory. Nearest: memory.hugepages (hugepage-backed memory is never swapped).');
  }
  if (c.haltPollNs !== undefined) {
    gaps.push(...haltPollAdvice(c.haltPollNs),
      '  On Kubernetes set it on the nodes that run these VMs (node tuning, a privileged DaemonSet or the node image).');
  }
  if (plan.pins) {
    gaps.push(`pin (${describePins(plan.pins)}): KubeVirt cannot pin to named host CPUs. dedicatedCpuPlacement is set:`,
      '  the kubelet\'s CPU manager (static policy) gives each vCPU a host CPU of its own and pins it there.');
  }
  if (c.net?.mode === 'tap') {
    gaps.push(`tap=${c.net.tap}: KubeVirt has no tap back end; attach a bridge network through Multus (interfaces[].bridge) instead.`);
  }
  if (c.net?.mode === 'user' && c.net.hostfwd.length) {
    gaps.push('hostfwd: the masquerade interface forwards the listed guest ports from the pod; reach them from the host with a Service:',
      ...c.net.hostfwd.map((f) => `  virtctl expose vm ${plan.slug} --name ${plan.slug}-${f.protocol}-${f.hostPort} --type NodePort --port ${f.hostPort} --target-port ${f.guestPort} --protocol ${f.protocol.toUpperCase()}`),
      '  (KubeVirt\'s masquerade network gives the guest 10.0.2.2, gateway 10.0.2.1, not 10.0.2.15.)');
  }
  for (const d of c.devices ?? []) {
    const why = d.type === 'pc-testdev'
      ? [`device ${qemuDeviceOption(d)}: not exported; KubeVirt has no field for QEMU's test devices. Nearest: a hook sidecar`]
      : [`device ${qemuDeviceOption(d)}: not exported; KubeVirt has no field for QEMU's isa-debug-exit and passes no`,
        '  QEMU exit status on. Nearest: read the guest\'s verdict on its serial console (virtctl console), or a hook sidecar'];
    gaps.push(...why,
      '  that adds <qemu:commandline> -device with it (see the libvirt export).');
  }
  if (unreachable.length) {
    gaps.push(`${unreachable.map((f) => `${f.name}=${f.value ? 'on' : 'off'}`).join(', ')}: KubeVirt has no field for ${unreachable.length > 1 ? 'these' : 'this'}`,
      '  (cpu.features are CPUID features, not KVM\'s), and host-passthrough sets it otherwise. Use a hook sidecar that',
      '  adds <qemu:commandline> -global host-x86_64-cpu.FEATURE=on|off (the libvirt export has the lines).');
  }
  if (c.disks?.some((d) => diskMode(d) !== 'snapshot')) {
    gaps.push('disks: the images are hostDisk volumes (the HostDisk feature gate must be on, and each path must exist on the',
      '  node that runs the VM); a PersistentVolumeClaim or DataVolume is the usual way to carry them instead.');
  }
  const snapshots = (c.disks ?? []).flatMap((d, i) => (diskMode(d) === 'snapshot' ? [`${snapshotClaim(plan, i)} (${d.path})`] : []));
  if (snapshots.length) {
    gaps.push(`snapshot=on disks are ephemeral volumes (the guest's writes vanish with the VM, the image is never written), which`,
      `  KubeVirt offers over a PersistentVolumeClaim only: create ${snapshots.length > 1 ? 'these claims' : 'this claim'} holding the raw image first: ${snapshots.join(', ')}.`);
  }
  const comments = [
    `VM "${c.name}" exported by Unhalt for KubeVirt: kubectl apply -f FILE, then virtctl start ${plan.slug}.`,
    ...machineTypeNote(plan, 'q35, KubeVirt\'s default x86 machine (name a versioned pc-q35-X.Y your nodes have to freeze the board too)'),
    ...plan.notes.map((n) => `Note: ${n}.`),
    `Paravirt features set by field: kvmclock, kvm-pv-eoi, kvm-pv-unhalt; on through host-passthrough: ${passedThrough.map((f) => f.name).join(', ') || 'none'}${leftOff.length ? `; off as host-passthrough leaves them: ${leftOff.map((f) => f.name).join(', ')}` : ''}.`,
    `The kernel boots from a container image: build ${image} holding ${IMAGE_DIR}/${kernelFile}${initrdFile ? ` and ${IMAGE_DIR}/${initrdFile}` : ''}`,
    `  (FROM scratch, COPY the files from ${plan.boot.kernelPath}${plan.boot.initrdPath ? ` and ${plan.boot.initrdPath}` : ''}), push it, and put its name below.`,
    madeForLine(plan),
    'ttyS0 is the serial console (virtctl console); KubeVirt gives a VM one serial port, so ttyS1 (the agent channel) has no equivalent.',
    ...(gaps.length ? ['', 'Knobs KubeVirt has no field for, and what to do instead:', ...gaps.map((g) => `  ${g}`)] : ['Every knob of this VM has a KubeVirt field.']),
  ];

  const memory = `${c.memoryMiB}Mi`;
  const cpu: Record<string, YamlValue> = { sockets: c.cpus, cores: 1, threads: 1, model: 'host-passthrough' };
  if (plan.hostKind === 'pvm') cpu.features = [{ name: 'arch-capabilities', policy: 'disable' }];
  if (plan.pins) cpu.dedicatedCpuPlacement = true;
  const kernelBoot: Record<string, YamlValue> = {
    container: {
      image,
      kernelPath: `${IMAGE_DIR}/${kernelFile}`,
      ...(initrdFile ? { initrdPath: `${IMAGE_DIR}/${initrdFile}` } : {}),
    },
  };
  if (plan.boot.cmdline) kernelBoot.kernelArgs = plan.boot.cmdline;
  const manifest: YamlValue = {
    apiVersion: 'kubevirt.io/v1',
    kind: 'VirtualMachine',
    metadata: { name: plan.slug, labels: { 'kubevirt.io/vm': plan.slug } },
    spec: {
      // Created stopped and started by hand, as a VM in Unhalt's library is.
      runStrategy: 'Manual',
      template: {
        metadata: { labels: { 'kubevirt.io/vm': plan.slug } },
        spec: {
          domain: {
            machine: { type: 'q35' },
            cpu,
            memory: { guest: memory },
            // Dedicated CPUs need the Guaranteed QoS class: requests equal to limits.
            resources: plan.pins ? { requests: { memory }, limits: { memory } } : { requests: { memory } },
            features: {
              acpi: {},
              apic: { enabled: true, endOfInterrupt: featureValue(plan, 'kvm-pv-eoi') },
              pvspinlock: { enabled: featureValue(plan, 'kvm-pv-unhalt') },
            },
            clock: { utc: {}, timer: { kvm: { present: featureValue(plan, 'kvmclock') } } },
            firmware: { kernelBoot },
            devices: {
              // Unhalt's board: no network, display or balloon (disks only as configured); one serial console.
              autoattachGraphicsDevice: false,
              autoattachMemBalloon: false,
              ...(c.net?.mode === 'user' ? {
                interfaces: [{
                  name: 'default', masquerade: {}, macAddress: macForVm(c.name), model: 'virtio',
                  ...(c.net.hostfwd.length ? { ports: c.net.hostfwd.map((f) => ({ port: f.guestPort, protocol: f.protocol.toUpperCase() })) } : {}),
                }],
              } : { autoattachPodInterface: false }),
              autoattachSerialConsole: true,
              ...(c.rng ? { rng: {} } : {}),
              ...(c.disks?.length ? { disks: c.disks.map((d, i) => ({ name: `disk${i}`, disk: { bus: 'virtio', ...(diskMode(d) === 'read-only' ? { readonly: true } : {}) } })) } : {}),
            },
          },
          ...(c.net?.mode === 'user' ? { networks: [{ name: 'default', pod: {} }] } : {}),
          // A snapshot disk is an ephemeral volume: KubeVirt's throwaway overlay exists only over a claim, not a hostDisk.
          ...(c.disks?.length ? {
            volumes: c.disks.map((d, i): YamlValue => (diskMode(d) === 'snapshot'
              ? { name: `disk${i}`, ephemeral: { persistentVolumeClaim: { claimName: snapshotClaim(plan, i), readOnly: true } } }
              : { name: `disk${i}`, hostDisk: { path: d.path, type: 'Disk' } })),
          } : {}),
        },
      },
    },
  };
  return toYaml(manifest, comments);
}

/** The claim a snapshot disk's ephemeral volume reads: named after the VM and the disk. */
function snapshotClaim(plan: ExportPlan, i: number): string {
  return `${plan.slug}-disk${i}`;
}

function baseName(path: string): string {
  return path.slice(path.lastIndexOf('/') + 1);
}

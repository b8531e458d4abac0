// Why a host's KVM device can or cannot be opened, and what to do about it: the one rule that
// `unhalt doctor`, every start (probeHost, via kvm-access.ts) and the app's host banner use.
// Pure (no Node): it classifies a facts object, so every cause is unit-tested from facts, and the
// renderer may share its types.

/** The causes, from "fine" to each way of not getting a KVM. */
export type KvmCause =
  | 'ok'
  | 'override-missing' // UNHALT_KVM_DEVICE names a path that does not exist
  | 'not-a-device' // the path is a directory, a regular file or something else that is not KVM
  | 'permission' // the node exists; this user may not open it
  | 'no-virtualization' // the CPU offers no VMX/SVM (off in firmware, or a VM without nested virtualization)
  | 'no-module' // the CPU could, but no kvm_intel / kvm_amd is loaded
  | 'pvm-guest' // this machine is itself a PVM guest: its kvm_pvm registers no device
  | 'container-no-device' // KVM is there, but this container was started without the device
  | 'no-device-node' // KVM registered its device, but /dev has no node for it
  | 'other';

export interface KvmFacts {
  /** The path tried (UNHALT_KVM_DEVICE or /dev/kvm). */
  device: string;
  /** The path came from UNHALT_KVM_DEVICE. */
  override: boolean;
  /** Where KVM's device normally is (/dev/kvm). */
  defaultDevice: string;
  /** 'ok' when the device opened for reading and writing, else the error code (ENOENT, EACCES…). */
  open: string;
  /** What is at the path: a character device, a directory, another kind of file, or nothing. */
  nodeKind: 'char' | 'dir' | 'file' | 'missing';
  /** The node's group name (or gid as text) and permission bits, when it exists. */
  nodeGroup?: string;
  /** The user is listed in that group (/etc/group) but this process does not have it: added since logging in. */
  groupNotActive?: boolean;
  nodeMode?: number;
  /** Who is asking: user name and uid. */
  user: string;
  uid: number;
  /** KVM modules the kernel has (loaded or built in: /sys/module/NAME). */
  modules: string[];
  /** KVM registered its misc device ("10:232" from /sys/class/misc/kvm/dev), if it did. */
  registered?: string;
  /** CPU flags that matter: vmx / svm (hardware virtualization), hypervisor (this is a VM). */
  cpuFlags: { vmx: boolean; svm: boolean; hypervisor: boolean };
  /** The kernel says it runs under PVM (its log, when readable): true, false, or unknown. */
  pvmGuest?: boolean;
  /** The container runtime this process runs in, if any (docker, podman, lxc, kubernetes…). */
  container?: string;
}

export interface KvmAccess {
  ok: boolean;
  cause: KvmCause;
  device: string;
  /** What is wrong, as found (empty when ok). */
  problem: string;
  /** What to do about it (empty when ok). */
  fix: string;
  /** The facts the verdict rests on, one short phrase each. */
  evidence: string[];
}

export const KVM_MODULES = ['kvm', 'kvm_intel', 'kvm_amd', 'kvm_pvm'] as const;

/** Pure: the verdict from the facts. */
export function classifyKvmAccess(f: KvmFacts): KvmAccess {
  const evidence: string[] = [];
  const dev = f.device;
  const stdDevice = f.defaultDevice;
  const verdict = (cause: KvmCause, problem: string, fix: string): KvmAccess => ({ ok: cause === 'ok', cause, device: dev, problem, fix, evidence });
  if (f.open === 'ok') return verdict('ok', '', '');
  evidence.push(`open ${dev}: ${f.open}`);
  if (f.override) evidence.push('the path comes from UNHALT_KVM_DEVICE');

  if (f.override && f.nodeKind === 'missing') {
    return verdict('override-missing', `UNHALT_KVM_DEVICE names ${dev}, a path that does not exist`,
      `unset UNHALT_KVM_DEVICE to use ${stdDevice}, or set it to the KVM device's path`);
  }
  if (f.nodeKind === 'dir' || f.open === 'EISDIR' || f.open === 'ENOTDIR') {
    return verdict('not-a-device', `${f.override ? 'UNHALT_KVM_DEVICE names ' : ''}${dev}, a directory, not a KVM device`,
      f.override ? `set UNHALT_KVM_DEVICE to the KVM device (${stdDevice}), or unset it` : `remove what is at ${dev}; the kvm module creates the device`);
  }
  if (f.open === 'EACCES' || f.open === 'EPERM') {
    const group = f.nodeGroup;
    const groupCanOpen = f.nodeMode !== undefined && (f.nodeMode & 0o060) === 0o060;
    if (group !== undefined) evidence.push(`${dev} belongs to group "${group}", mode ${(f.nodeMode ?? 0).toString(8).padStart(4, '0')}`);
    const usable = group !== undefined && group !== 'root' && groupCanOpen;
    if (usable && f.groupNotActive) {
      return verdict('permission', `user "${f.user}" was added to the group "${group}" that may open ${dev}, but this session started before that`,
        `log out and in again (or run: newgrp ${group}), then start Unhalt again`);
    }
    return verdict('permission', `user "${f.user}" may not open ${dev}${usable ? ` (it is open to the group "${group}", which "${f.user}" is not in)` : ''}`,
      usable
        ? `join the group: sudo usermod -aG ${group} ${f.user}, then log out and in again (or run: newgrp ${group})`
        : `let the "kvm" group open it: sudo groupadd -f kvm && sudo chgrp kvm ${dev} && sudo chmod 660 ${dev} && sudo usermod -aG kvm ${f.user}, then log in again (a udev rule keeps it so: KERNEL=="kvm", GROUP="kvm", MODE="0660")`);
  }
  if (f.nodeKind === 'file') {
    return verdict('not-a-device', `${dev} is a regular file, not a KVM device`,
      f.override ? 'set UNHALT_KVM_DEVICE to the KVM device, or unset it' : `remove ${dev}; the kvm module creates the device`);
  }
  if (f.open !== 'ENOENT' && f.open !== 'ENXIO' && f.open !== 'ENODEV') {
    return verdict('other', `${dev} cannot be opened (${f.open})`, 'check the device and the kernel log (dmesg | grep -i kvm)');
  }

  // No device behind the path: why?
  const vendor = f.modules.filter((m) => m !== 'kvm');
  evidence.push(f.modules.length ? `KVM modules in the kernel: ${f.modules.join(', ')}` : 'no KVM module in the kernel (/sys/module)');
  evidence.push(f.registered ? `KVM registered its device (${f.registered})` : 'no KVM device registered (/sys/class/misc/kvm)');
  const hw = f.cpuFlags.vmx ? 'vmx' : f.cpuFlags.svm ? 'svm' : undefined;
  evidence.push(hw ? `the CPU offers ${hw.toUpperCase()}` : `the CPU offers neither VMX nor SVM${f.cpuFlags.hypervisor ? ' (and says it runs under a hypervisor)' : ''}`);
  if (f.pvmGuest) evidence.push('the kernel log says it runs under PVM');
  if (f.container) evidence.push(`this process runs in a container (${f.container})`);

  if (f.registered) {
    if (f.container) {
      return verdict('container-no-device', `KVM is loaded on the host, but this ${f.container} container was started without ${stdDevice}`,
        `start the container with the device: docker run --device /dev/kvm … (podman run --device /dev/kvm …; LXC: lxc.cgroup2.devices.allow = c ${f.registered} rwm plus a mount entry)`);
    }
    return verdict('no-device-node', `KVM is loaded and registered its device (${f.registered}), but ${dev} does not exist`,
      `create it: sudo mknod ${stdDevice} c ${f.registered.replace(':', ' ')} && sudo chgrp kvm ${stdDevice} && sudo chmod 660 ${stdDevice} (udev normally does this: sudo udevadm trigger)`);
  }
  if (f.pvmGuest || (f.modules.includes('kvm_pvm') && !hw)) {
    return verdict('pvm-guest', 'this machine is itself a PVM guest: its kvm_pvm module is loaded but provides no KVM device (PVM does not run inside PVM), and its CPU offers no VMX/SVM',
      'run Unhalt on a host whose KVM works: bare metal, a cloud VM with nested virtualization, or the PVM host itself (a VM inside QEMU on this machine also works, slowly: see docs/nested.md)');
  }
  if (!hw) {
    return f.cpuFlags.hypervisor
      ? verdict('no-virtualization', 'this machine is a virtual machine whose CPU offers no VMX/SVM: its hypervisor does not pass virtualization through (no nested virtualization)',
        'turn nested virtualization on for this VM (on a cloud, an instance type or setting that allows it), or run Unhalt on bare metal')
      : verdict('no-virtualization', 'the CPU offers no VMX/SVM: virtualization is turned off in the firmware (or the CPU has none)',
        'turn on Intel VT-x or AMD-V (SVM) in the BIOS/UEFI settings, reboot, then load the module: sudo modprobe kvm');
  }
  const module = hw === 'vmx' ? 'kvm_intel' : 'kvm_amd';
  if (f.container) {
    return verdict('container-no-device', `this ${f.container} container has no ${stdDevice}, and its host has not loaded ${module}`,
      `on the host: sudo modprobe ${module}; then start the container with: docker run --device /dev/kvm … (podman: --device /dev/kvm)`);
  }
  return verdict('no-module', vendor.length
    ? `the KVM modules loaded (${f.modules.join(', ')}) registered no device: ${module} failed to start or is not loaded`
    : `KVM is not loaded: the CPU offers ${hw.toUpperCase()}, but ${module} is not in the kernel`,
  `load it: sudo modprobe ${module} (if it fails, dmesg says why: often virtualization is turned off in the firmware)`);
}

/** "problem: fix" in one line (what errors and banners say). */
export function describeKvmAccess(a: KvmAccess): string {
  return a.ok ? `${a.device} opens` : `${a.problem}. To fix: ${a.fix}`;
}

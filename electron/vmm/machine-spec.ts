// What a machine is, as the builder takes it (builder/build-machine.ts): a configuration already
// validated and resolved (config/resolve.ts). The runtime (vm.ts) never changes it: live knob
// changes are the runtime's own state (LiveKnobs), not edits of the spec it was built from.
import type { Vcpu } from '../../native/kvm/kvm.ts';
import type { GuestMemory } from './memory/guest-memory.ts';
import type { NetBackEndSpec, VersionedDevices, VirtioDeviceName } from './devices/board.ts';
import type { DiskSpec } from './devices/virtio/disk-image.ts';

/** Everything needed to start a machine, already validated and resolved (see config/). */
export interface MachineSpec {
  name: string;
  cpus: number;
  memoryMiB: number;
  kernelPath: string;
  initrdPath?: string;
  cmdline: string;
  /** CPUID 0x40000001 EAX / EDX; by default what the host's KVM supports. */
  kvmFeatures?: number;
  kvmHints?: number;
  /** Host CPU per vCPU (round-robin already applied), or none. */
  pin?: number[];
  haltPollNs?: number;
  memLock?: boolean;
  /** KVM_X86_DISABLE_EXITS mask (cpu-pm=on), enabled before any vCPU is created. */
  disableExits?: number;
  /** Advertise MONITOR/MWAIT (only when MWAIT exits are disabled). */
  mwait?: boolean;
  /** virtio-pci devices on the PCI bus (devices/board.ts VIRTIO_DEVICES); the host bridge is always there. */
  virtio?: VirtioDeviceName[];
  /** The virtio-net device's MAC and back end (with 'net' in `virtio`). */
  net?: NetBackEndSpec;
  /** virtio-blk disks, in order (the first is the guest's vda), each in its own PCI slot (board.ts). */
  disks?: DiskSpec[];
  /** The isa-debug-exit the VM asked for (BoardConfig.debugExit); absent: the board's own at 0xf4. */
  debugExit?: { iobase: number; iosize: number };
  /** QEMU's pc-testdev (BoardConfig.pcTestdev), which the VM asked for. */
  pcTestdev?: boolean;
  /** The devices its machine type version adds to the board (MachineType.board); absent: none (unhalt-1.0/1.1). */
  board?: VersionedDevices;
  /** Tests only (never set from a config): ways to make a guest fail on purpose. */
  testHooks?: VmTestHooks;
}

/**
 * Test seam for guest faults (test/kvm/faults.test.ts): the host then produces the fault for real
 * and it goes through the real exit handling, the VM's teardown and its exit record. Exits no
 * host can be made to produce are unit-tested at the dispatch instead (exit-dispatch.test.ts).
 */
export interface VmTestHooks {
  /**
   * Main thread, after the machine is built and before any vCPU first enters KVM_RUN: put a
   * vCPU into a state the boot code never would (invalid KVM_SET_SREGS, code the host's
   * instruction emulator lacks) so that the host produces the fault for real. `virtioEventFds`:
   * each virtio device's notification eventfd (what KVM's ioeventfd signals), so a test can make a
   * notification arrive at a moment of its choosing (test/kvm/virtio-pause.test.ts).
   */
  beforeFirstRun?(ctx: { vcpus: readonly Vcpu[]; memory: GuestMemory; virtioEventFds: Readonly<Record<string, number>> }): void;
  /** Serve virtio notifications as MMIO exits even where KVM has ioeventfds (the fallback path, for real). */
  noIoeventfd?: boolean;
}

/** The knobs that can change while a VM runs; the runtime holds their current values. */
export interface LiveKnobs {
  /** KVM_CAP_HALT_POLL maximum (ns); undefined: the host's default. */
  haltPollNs?: number;
  /** Host CPU per vCPU; undefined: unpinned. */
  pin?: readonly number[];
}

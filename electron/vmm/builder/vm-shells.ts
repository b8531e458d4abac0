// KVM VMs set up ahead of need. Creating a VM's irqchip, PIT, TSS and memory slots waits in the
// kernel for SRCU grace periods (Vm.setUpOffThread): ~10 ms of a warm start here, the largest
// piece the host controls. A long-lived service (the app, `unhalt serve`) keeps one such shell
// ready for the next start (keepVmShellWarm): a KVM VM with exactly what every machine gets before
// its first vCPU, and guest RAM of the last size started, registered and untouched. Nothing
// specific to a VM is in it: each start takes a fresh shell (never one that has run), applies its
// own capabilities, creates its vCPUs and loads its image; a shell is replaced a while after it
// is taken, so the replacement does not compete with the start that took it.
import { Kvm, type Vm } from '../../../native/kvm/kvm.ts';
import { installKickHandler } from '../../../native/kvm/kick.ts';
import { LAYOUT } from '../boot/layout.ts';
import { GuestMemory, MiB } from '../memory/guest-memory.ts';
import { missingCapability } from '../machine/required-caps.ts';

/** A KVM VM with its irqchip, PIT, TSS, identity map and guest RAM, and no vCPU yet. */
export interface VmShell {
  /** Which shell this is (counts up per process): tells a taken spare from its replacement. */
  readonly serial: number;
  readonly kvm: Kvm;
  readonly vm: Vm;
  /** Guest RAM as allocated (all zero), registered with the VM. */
  readonly memory: GuestMemory;
}

/** How long after a shell is taken its replacement is made: past the started guest's first output. */
const REFILL_DELAY_MS = 250;

let keepWarm = false;
let spare: VmShell | undefined;
/** The spare being made (at most one at a time). */
let making: Promise<void> | undefined;
let refillTimer: ReturnType<typeof setTimeout> | undefined;
/** Guest RAM size of the last start: the size the spare is made for. */
let lastMemoryMiB: number | undefined;
let shellsMade = 0;

/**
 * Opens KVM, checks what every machine needs, creates the VM and sets it up with `memoryMiB` of
 * guest RAM. Whatever fails, what was opened is closed before the error is thrown.
 */
export async function createVmShell(memoryMiB: number): Promise<VmShell> {
  const memory = new GuestMemory(memoryMiB * MiB);
  const kvm = Kvm.open();
  let vm: Vm | undefined;
  try {
    // Required capabilities are listed once (required-caps.ts, also the doctor's).
    const missing = missingCapability((cap) => kvm.checkExtension(cap));
    if (missing) throw new Error(missing);
    installKickHandler();
    vm = kvm.createVm();
    // TSS, identity map, irqchip, PIT and memory slots, on the thread pool (Vm.setUpOffThread).
    await vm.setUpOffThread({
      tssAddr: LAYOUT.tssAddr,
      identityMapAddr: LAYOUT.identityMap,
      regions: memory.regions.map((r) => ({ slot: r.slot, guestPhysAddr: r.guestPhysAddr, memorySize: r.size, userspaceAddr: r.hostAddress })),
    });
    return { serial: ++shellsMade, kvm, vm, memory };
  } catch (e) {
    if (vm) await vm.closeInBackground();
    kvm.close();
    throw e;
  }
}

/** Closes a shell that will not be used (the VM fd off this thread: its close destroys the VM). */
export async function closeVmShell(shell: VmShell): Promise<void> {
  shell.kvm.close();
  await shell.vm.closeInBackground();
}

/**
 * The spare shell if it has `memoryMiB` of RAM (each spare is given out once), else undefined:
 * the builder then makes its own. While shells are kept warm, each take schedules the next
 * spare, of this size.
 */
export function takeVmShell(memoryMiB: number): VmShell | undefined {
  lastMemoryMiB = memoryMiB;
  let taken: VmShell | undefined;
  if (spare?.memory.size === memoryMiB * MiB) {
    taken = spare;
    spare = undefined;
  }
  if (keepWarm && refillTimer === undefined) {
    refillTimer = setTimeout(refill, REFILL_DELAY_MS);
    refillTimer.unref();
  }
  return taken;
}

function refill(): void {
  refillTimer = undefined;
  if (!keepWarm || making || lastMemoryMiB === undefined) return;
  const size = lastMemoryMiB;
  if (spare?.memory.size === size * MiB) return;
  const old = spare;
  spare = undefined;
  making = (async () => {
    if (old) await closeVmShell(old);
    const shell = await createVmShell(size);
    // Released or resized meanwhile: this one is not wanted.
    if (!keepWarm || spare) await closeVmShell(shell);
    else spare = shell;
  })().catch(() => { /* no spare: the next start makes its own shell and says what is wrong */ }).finally(() => { making = undefined; });
}

/** Keeps a spare shell from the next start on (the app, `unhalt serve`). */
export function keepVmShellWarm(): void {
  keepWarm = true;
}

/** Stops keeping a spare and closes the one there is (service shutdown). */
export async function releaseVmShells(): Promise<void> {
  keepWarm = false;
  clearTimeout(refillTimer);
  refillTimer = undefined;
  await making;
  const s = spare;
  spare = undefined;
  if (s) await closeVmShell(s);
}

/** The spare shell ready now (which one, and its RAM size), if any: for diagnostics and tests. */
export function spareVmShell(): { serial: number; memoryMiB: number } | undefined {
  return spare ? { serial: spare.serial, memoryMiB: spare.memory.size / MiB } : undefined;
}

// Versioned machine types, like QEMU's pc-q35-X.Y: each version is a table of default property
// values (its compat props). A saved VM pins its version, so the guest ABI it was created with
// (CPUID 0x40000000/0x40000001, topology) never changes under it. New defaults go into a NEW
// version; old tables are never edited (golden tests in test/unit/machine-types.test.ts).

export interface MachineType {
  name: string;
  summary: string;
  /** What this version changes relative to the previous one (shown in the wizard and `unhalt machines`). */
  changes: string;
  /** Default value of every paravirt feature (by QEMU property name). */
  defaults: Readonly<Record<string, boolean>>;
}

const BASE_1_0: Record<string, boolean> = {
  kvmclock: true,
  'kvm-nopiodelay': true,
  'kvm-asyncpf': true,
  'kvm-asyncpf-int': true,
  'kvm-steal-time': true,
  'kvm-pv-eoi': true,
  // Off in 1.0: a guest with PV spinlocks halts in lock waits and needs the host's kick; on
  // hosts without PV_UNHALT such a VM could not run. QEMU's 2017 discussion of this default
  // asked for exactly this: a new machine type turns it on, old ones keep their ABI.
  'kvm-pv-unhalt': false,
  'kvm-pv-tlb-flush': true,
  'kvm-pv-ipi': true,
  'kvm-poll-control': true,
  'kvm-pv-sched-yield': true,
  'kvm-msi-ext-dest-id': false,
  'kvm-hint-dedicated': false,
};

export const MACHINE_TYPES: readonly MachineType[] = [
  {
    name: 'unhalt-1.0',
    summary: 'the first Unhalt machine: paravirt features on, except PV spinlocks (kvm-pv-unhalt)',
    changes: 'initial version',
    defaults: Object.freeze({ ...BASE_1_0 }),
  },
  {
    name: 'unhalt-1.1',
    summary: 'as unhalt-1.0, with PV spinlocks on (kvm-pv-unhalt=on)',
    changes: 'kvm-pv-unhalt defaults to on',
    defaults: Object.freeze({ ...BASE_1_0, 'kvm-pv-unhalt': true }),
  },
];

/** The alias that always means the newest version (never stored in a saved VM). */
export const MACHINE_ALIAS = 'unhalt';
export const NEWEST_MACHINE = MACHINE_TYPES[MACHINE_TYPES.length - 1]!.name;

export function machineType(name: string): MachineType | undefined {
  const resolved = name === MACHINE_ALIAS ? NEWEST_MACHINE : name;
  return MACHINE_TYPES.find((m) => m.name === resolved);
}

/** Resolves an alias to a concrete version; throws with the list of valid names otherwise. */
export function resolveMachineName(name: string): string {
  const m = machineType(name);
  if (!m) {
    throw new Error(`unknown machine type "${name.slice(0, 40)}"; valid: ${[MACHINE_ALIAS, ...MACHINE_TYPES.map((t) => t.name)].join(', ')}`);
  }
  return m.name;
}

// Versioned machine types, like QEMU's pc-q35-X.Y: each version is a table of default property
// values (its compat props) and the board devices it has. A saved VM pins its version, so the
// guest ABI it was created with (CPUID 0x40000000/0x40000001, topology, the ports and ACPI tables
// of its board) never changes under it. New defaults and new devices go into a NEW version; old
// tables are never edited (golden tests in test/unit/machine-types.test.ts and test/unit/acpi.test.ts).

export interface MachineType {
  name: string;
  summary: string;
  /** What this version changes relative to the previous one (shown in the wizard and `unhalt machines`). */
  changes: string;
  /** Default value of every paravirt feature (by QEMU property name). */
  defaults: Readonly<Record<string, boolean>>;
  /** Board devices a guest sees only from the version that added them (docs/guest-contract.md). */
  board: Readonly<BoardProperties>;
}

export interface BoardProperties {
  /** QEMU's fw_cfg, legacy I/O interface at 0x510/0x511 (vCPU count, RAM size; no files, no DMA). */
  fwCfg: boolean;
  /** The ACPI PM timer at 0x608, in the FADT's PM_TMR_BLK. */
  pmTimer: boolean;
}

const BOARD_1_0: BoardProperties = { fwCfg: false, pmTimer: false };

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
    board: Object.freeze({ ...BOARD_1_0 }),
  },
  {
    name: 'unhalt-1.1',
    summary: 'as unhalt-1.0, with PV spinlocks on (kvm-pv-unhalt=on)',
    changes: 'kvm-pv-unhalt defaults to on',
    defaults: Object.freeze({ ...BASE_1_0, 'kvm-pv-unhalt': true }),
    board: Object.freeze({ ...BOARD_1_0 }),
  },
  {
    name: 'unhalt-1.2',
    summary: 'as unhalt-1.1, with QEMU\'s fw_cfg and an ACPI PM timer on the board',
    changes: 'adds fw_cfg (ports 0x510-0x511: signature, ID, RAM size, CPU counts, an empty file directory) and the ACPI PM timer (port 0x608, in the FADT)',
    defaults: Object.freeze({ ...BASE_1_0, 'kvm-pv-unhalt': true }),
    board: Object.freeze({ fwCfg: true, pmTimer: true }),
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

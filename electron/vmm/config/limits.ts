// Every limit of a VM configuration, in one place and as plain data: the schema (vm-config.ts)
// judges fields by them, the board sizes its device state by MAX_DISKS, the wizard reads them.
// Nothing here imports anything, so the device layer and the renderer take them without the schema.

/** APIC IDs of xAPIC MADT entries stop at 254; the I/O APIC takes the next ID. */
export const MAX_CPUS = 254;
export const MIN_MEMORY_MIB = 16;
export const MAX_MEMORY_MIB = 1024 * 1024;
export const MAX_NAME_LENGTH = 64;
export const MAX_APPEND_LENGTH = 4095;
export const MAX_PATH_LENGTH = 4096;
export const MAX_HALT_POLL_NS = 1_000_000_000;
export const MAX_PIN_ENTRIES = 1024;
export const MAX_HOST_CPU = 4095;
/** virtio-blk disks one VM may carry (each takes a PCI slot and its state in the device SAB). */
export const MAX_DISKS = 8;

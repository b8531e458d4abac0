// Limits shared by the configuration and the VMM.
export const MIN_MEMORY_MIB = 16;
/** virtio-blk disks one VM may carry (each takes a PCI slot and its state in the device SAB). */
export const MAX_DISKS = 8;

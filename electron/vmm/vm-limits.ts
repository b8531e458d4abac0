// Limits shared by the configuration and the VMM.
export const MIN_MEMORY_MIB = 16;

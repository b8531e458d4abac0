// What a kernel loader tells the vCPU setup: the mode the boot CPU starts in and its registers.
export interface BootPlan {
  protocol: 'pvh' | 'linux' | 'multiboot';
  /** protected32: PVH and multiboot (paging off, flat segments); long64: Linux 64-bit boot protocol. */
  mode: 'protected32' | 'long64';
  entry: number;
  /** Multiboot's magic; 0 when absent. */
  rax?: number;
  rbx: number;
  rsi: number;
}

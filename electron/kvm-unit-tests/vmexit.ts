// kvm-unit-tests' `vmexit.flat`, the suite's exit-cost benchmark: one VM per exit (an exit that
// hangs a vCPU, a hypercall on PVM, costs only itself), the guest's own TSC count per exit read
// from its `NAME CYCLES` lines. Shared by bench/vmexit.ts and `unhalt selftest`.
import type { UnitTest } from './suite.ts';

/** The exits timed by default: cheap in-kernel ones, round trips to the VMM, IPIs, timers. */
export const VMEXIT_EXITS = ['cpuid', 'vmcall', 'mov_to_cr8', 'inl_from_pmtimer', 'inl_from_qemu', 'inl_from_kernel', 'outl_to_kernel', 'ipi', 'ipi_halt', 'tscdeadline_immed', 'tscdeadline'] as const;
/** Every exit vmexit.flat can time alone, in the order it runs them (its x86/vmexit.c table, ple_round_robin aside). */
export const VMEXIT_ALL = [
  'cpuid', 'vmcall', 'wbinvd', 'invd', 'mov_from_cr8', 'mov_to_cr8', 'inl_from_pmtimer', 'inl_from_qemu', 'inl_from_kernel',
  'outl_to_kernel', 'mov_dr', 'tscdeadline_immed', 'tscdeadline', 'self_ipi_sti_nop', 'self_ipi_sti_hlt', 'self_ipi_tpr',
  'self_ipi_tpr_sti_nop', 'self_ipi_tpr_sti_hlt', 'x2apic_self_ipi_sti_nop', 'x2apic_self_ipi_sti_hlt', 'x2apic_self_ipi_tpr',
  'x2apic_self_ipi_tpr_sti_nop', 'x2apic_self_ipi_tpr_sti_hlt', 'ipi', 'ipi_halt', 'wr_kernel_gs_base', 'wr_tsx_ctrl_msr',
  'wr_ibrs_msr', 'wr_ibpb_msr', 'wr_tsc_adjust_msr', 'rd_tsc_adjust_msr', 'toggle_cr0_wp', 'toggle_cr4_pge',
] as const;

/**
 * The exits a warm run times first (vmexit.flat runs the named exits in its table's order): `cpuid`
 * lets the VMM's start-up work end (on a one-CPU host it competes with the guest for the CPU),
 * `inl_from_pmtimer` warms the VMM's port path. Each is timed for ~2^30 TSC cycles.
 */
const WARM_UP = ['cpuid', 'inl_from_pmtimer'] as const;

/** The warm-up exits run before `exit` in a warm run: those of WARM_UP the table puts before it. */
export function warmUpFor(exit: string): string[] {
  const at = (VMEXIT_ALL as readonly string[]).indexOf(exit);
  return at < 0 ? [] : WARM_UP.filter((w) => VMEXIT_ALL.indexOf(w) < at);
}

/**
 * The test that times `exit` alone (IPIs need a second vCPU); `warm`: after warmUpFor(exit), so
 * the figure is a running VMM's, not one still starting (`cpuid`, the table's first, has none).
 */
export function vmexitTest(exit: string, warm = false): UnitTest {
  const args = [...(warm ? warmUpFor(exit) : []), exit].join(' ');
  return { name: `vmexit_${exit}`, file: 'vmexit.flat', smp: /ipi/.test(exit) ? 2 : 1, args, qemuParams: '', timeoutS: 60, groups: ['vmexit'] };
}

/** The TSC cycles per exit a run printed, by exit name. */
export function exitCycles(output: string): Map<string, number> {
  const m = new Map<string, number>();
  for (const line of output.split('\n')) {
    const f = /^(\w+) (\d+)\r?$/.exec(line);
    if (f) m.set(f[1]!, Number(f[2]));
  }
  return m;
}

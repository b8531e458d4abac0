/*
 * Unhalt probe guest: C entry on the bootstrap processor.
 * boot.S got us into long mode with a stack and a zeroed BSS.
 */
#include "probe.h"

bool host_pvm;
extern u64 smp_us;

void probe_main(void);
void probe_main(void)
{
	u64 t_start = rdtsc();
	const struct hvm_start_info *si = (const struct hvm_start_info *)(u64)boot_start_info;
	if (!si || si->magic != HVM_START_MAGIC)
		si = NULL;

	serial_init();
	cmdline_init(si);
	host_pvm = cmdline_u64("unhalt.pvm", 0) != 0;

	cpus[0].index = 0;
	percpu_install(&cpus[0]);
	idt_init();
	idt_load();
	pic_disable();
	acpi_init(si);
	lapic_init();
	cpus[0].apic_id = lapic_id();
	cpus[0].up = 1;
	timer_calibrate();
	smp_boot(si);
	acpi_power_button_init();

	u64 boot_us = (rdtsc() - t_start) * 1000 / tsc_khz;
	event("boot cpus_found=%u cpus_up=%u tsc_khz=%lu boot_us=%lu smp_us=%lu exit_ns=%lu slowness=%u", ncpus_found,
	      ncpus_up, tsc_khz, boot_us, smp_us, exit_ns, host_slowness);
	con_printf("Unhalt probe guest: %u of %u CPUs up\n", ncpus_up, ncpus_found);
	con_printf("tsc %lu kHz (%s), lapic timer %lu kHz%s, acpi %s, pm1a_cnt 0x%x%s, slp_typ %u%s%s\n", tsc_khz,
	           tsc_source, lapic_khz, tsc_deadline_timer ? " (tsc-deadline)" : "", acpi.found ? "yes" : "no",
	           acpi.pm1a_cnt, acpi.hw_reduced ? " (hw-reduced)" : "", acpi.slp_typ,
	           acpi.power_button ? ", power button" : "", host_pvm ? ", PVM host" : "");
	con_printf("host: a VM exit costs %lu ns, waits stretched %ux\n", exit_ns, host_slowness);

	char scenario[32] = "echo";
	cmdline_get("scenario", scenario, sizeof scenario);
	run_scenario(scenario);
}

/*
 * Unhalt probe guest: power off, in the contract's order
 * (docs/guest-contract.md): ACPI S5 through PM1a_CNT, or the HW-reduced
 * sleep control register; i8042 reset; isa-debug-exit (port 0xf4, value 0);
 * then cli;hlt forever.
 */
#include "probe.h"

NORETURN void power_off(void)
{
	cli();
	serial_panic_write(COM2, "@u1 poweroff\n");
	u8 slp = acpi.slp_typ & 7;
	if (acpi.found && acpi.pm1a_cnt) {
		outw(acpi.pm1a_cnt, (u16)(slp << 10 | 1u << 13));
	} else if (acpi.found && acpi.hw_reduced && acpi.sleep_ctl.address) {
		u8 v = (u8)(slp << 2 | 1u << 5);
		if (acpi.sleep_ctl.space_id == 1 && acpi.sleep_ctl.address < 0x10000)
			outb((u16)acpi.sleep_ctl.address, v);
		else if (acpi.sleep_ctl.space_id == 0 && acpi.sleep_ctl.address < 0x100000000ull)
			*(volatile u8 *)acpi.sleep_ctl.address = v;
	}
	outb(0x64, 0xFE);
	outl(0xF4, 0);
	halt_forever();
}

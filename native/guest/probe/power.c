/*
 * Unhalt probe guest: power off (docs/guest-contract.md):
 *   1. ACPI S5 through PM1a_CNT (a 16-bit out of SLP_TYP<<10 | SLP_EN);
 *   2. HW-reduced FADT (QEMU microvm): first isa-debug-exit, so that QEMU
 *      exits with status 1, its "success" code; then the sleep control
 *      register (SLP_TYP<<2 | SLP_EN, I/O or memory per its address space);
 *   3. i8042 reset (out 0x64, 0xFE);
 *   4. isa-debug-exit (out 0xf4, 32-bit value 0);
 *   5. cli; hlt forever.
 * After a reported exception the value written to port 0xf4 is 1 instead of 0
 * (QEMU then exits with status 3).
 */
#include "probe.h"

NORETURN void power_off_status(u32 status)
{
	cli();
	serial_panic_write(COM2, "@u1 poweroff\n");
	u8 slp = acpi.slp_typ & 7;
	if (acpi.found && acpi.pm1a_cnt) {
		outw(acpi.pm1a_cnt, (u16)(slp << 10 | 1u << 13));
	} else if (acpi.found && acpi.hw_reduced && acpi.sleep_ctl.address) {
		outl(0xF4, status);
		u8 v = (u8)(slp << 2 | 1u << 5);
		if (acpi.sleep_ctl.space_id == 1 && acpi.sleep_ctl.address < 0x10000)
			outb((u16)acpi.sleep_ctl.address, v);
		else if (acpi.sleep_ctl.space_id == 0 && acpi.sleep_ctl.address < 0x100000000ull)
			*(volatile u8 *)acpi.sleep_ctl.address = v;
	}
	outb(0x64, 0xFE);
	outl(0xF4, status);
	halt_forever();
}

NORETURN void power_off(void) { power_off_status(0); }

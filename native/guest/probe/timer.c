/*
 * Unhalt probe guest: TSC and LAPIC timer frequencies.
 *   TSC:   CPUID 0x40000010 EAX (hypervisor timing leaf), else CPUID 0x15
 *          (when it names the crystal), else 10 ms of PIT channel 2.
 *   LAPIC: CPUID 0x40000010 EBX, else counted in the PIT window, else
 *          counted against the TSC for 5 ms.
 */
#include "probe.h"

u64 tsc_khz;
u64 lapic_khz;
const char *tsc_source = "none";

#define PIT_HZ 1193182u
#define PIT_MS 10u

/* Returns TSC cycles over PIT_MS, or 0 if the PIT does not seem to count. */
static u64 pit_window(u64 *lapic_counts)
{
	const u32 latch = PIT_HZ * PIT_MS / 1000;
	u8 v = inb(0x61);
	outb(0x61, (u8)((v & ~0x02) | 0x01));  /* gate 2 high, speaker off */
	outb(0x43, 0xB0);                      /* ch 2, lo/hi byte, mode 0 */
	outb(0x42, latch & 0xFF);
	outb(0x42, latch >> 8);
	lapic_timer_start_count();
	u64 t0 = rdtsc();
	u32 l0 = lapic_timer_current();
	u32 polls = 0;
	while (!(inb(0x61) & 0x20)) {
		if (++polls > 5000000)
			return 0;
	}
	u64 t1 = rdtsc();
	u32 l1 = lapic_timer_current();
	if (polls < 2)   /* no PIT: 0x61 reads all ones */
		return 0;
	*lapic_counts = l0 - l1;
	return t1 - t0;
}

void timer_calibrate(void)
{
	u32 r[4];
	cpuid(0x40000000, 0, r);
	u32 hv_max = r[0];
	if (hv_max >= 0x40000010 && hv_max < 0x40000100) {
		cpuid(0x40000010, 0, r);
		if (r[0]) {
			tsc_khz = r[0];
			tsc_source = "cpuid-0x40000010";
		}
		if (r[1])
			lapic_khz = r[1];
	}
	if (!tsc_khz) {
		cpuid(0, 0, r);
		if (r[0] >= 0x15) {
			cpuid(0x15, 0, r);   /* eax denominator, ebx numerator, ecx crystal Hz */
			if (r[0] && r[1] && r[2]) {
				tsc_khz = (u64)r[2] * r[1] / r[0] / 1000;
				tsc_source = "cpuid-0x15";
			}
		}
	}
	if (!tsc_khz || !lapic_khz) {
		u64 lapic_counts = 0;
		u64 cycles = pit_window(&lapic_counts);
		if (cycles) {
			if (!tsc_khz) {
				tsc_khz = cycles / PIT_MS;
				tsc_source = "pit";
			}
			if (!lapic_khz)
				lapic_khz = lapic_counts / PIT_MS;
		}
	}
	if (!tsc_khz) {
		tsc_khz = 1000000;   /* guess 1 GHz rather than divide by zero */
		tsc_source = "guess";
	}
	if (!lapic_khz) {
		lapic_timer_start_count();
		u64 end = tsc_deadline_us(5000);
		u32 l0 = lapic_timer_current();
		while (rdtsc() < end)
			cpu_relax();
		u32 l1 = lapic_timer_current();
		lapic_khz = (l0 - l1) / 5;
	}
	lapic_timer_stop();
	if (!lapic_khz)
		lapic_khz = 1000000;   /* KVM's LAPIC runs at 1 GHz */
}

u64 tsc_deadline_us(u64 us) { return rdtsc() + us * tsc_khz / 1000; }

void tsc_delay_us(u64 us)
{
	u64 end = tsc_deadline_us(us);
	while (rdtsc() < end)
		cpu_relax();
}

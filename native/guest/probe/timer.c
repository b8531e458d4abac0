/*
 * Unhalt probe guest: TSC and LAPIC timer frequencies.
 *   TSC, first that answers:
 *     CPUID 0x40000010 EAX (hypervisor timing leaf),
 *     kvmclock's tsc_to_system_mul/tsc_shift (KVM_FEATURE_CLOCKSOURCE2;
 *       enabled just long enough to read, then disabled again),
 *     CPUID 0x15 (when it names the crystal frequency),
 *     about 10 ms of PIT channel 0 (latched reads; no port 0x61 needed).
 *   LAPIC timer clock: CPUID 0x40000010 EBX, else counted over the PIT
 *     window, else counted against the TSC for 2 ms.
 * Each end of a window is the tightest of five TSC-bracketed readings.
 * "tsc=pit" on the command line forces the PIT method (for testing it).
 *
 * Slow hosts are normal (a KVM nested in QEMU TCG is 10-50x slower than
 * hardware), so no wait in the probe counts loop iterations: every bound is
 * TSC time, and bounds on waiting for the host or another vCPU are stretched
 * by host_slowness, the measured cost of a VM exit over its cost on hardware.
 * On a slow host the TSC rate is also checked against the PIT (which counts
 * real time in the VMM's kernel), since an emulated TSC may not track it.
 */
#include "probe.h"

u64 tsc_khz;
u64 lapic_khz;
const char *tsc_source = "none";
u64 exit_ns;
u32 host_slowness = 1;

/* Before the TSC rate is known, deadlines assume the fastest TSC we expect, so they are never shorter than asked. */
#define ASSUMED_MAX_TSC_KHZ 10000000ull
/* Plausible TSC rates; a source that says otherwise is not believed. */
#define MIN_TSC_KHZ 50000ull
#define MAX_TSC_KHZ 20000000ull
/*
 * A userspace I/O exit round trip on hardware-backed KVM (this VMM or QEMU):
 * a few µs.  Measured: 11-18 µs by this probe on PVM (slowness 3-4), ~47 µs
 * in a KVM nested in QEMU TCG (docs/nested.md: ~10).
 */
#define HARDWARE_EXIT_NS 4500ull
#define MAX_SLOWNESS 100u
/* Above PVM (~4 here), at a KVM nested in an emulator (~10): check the TSC against the PIT. */
#define SLOW_ENOUGH_TO_DOUBT_TSC 8u

static bool plausible(u64 khz) { return khz >= MIN_TSC_KHZ && khz <= MAX_TSC_KHZ; }
static void measure_host_speed(void);
static void check_tsc_against_pit(void);

#define PIT_HZ 1193182u
#define PIT_TICKS 11932u            /* 10 ms */
static struct pvclock kvmclock __attribute__((aligned(64)));

static u64 kvmclock_tsc_khz(void)
{
	u32 r[4];
	cpuid(0x40000000, 0, r);
	if (r[1] != 0x4b4d564b || r[0] < 0x40000001)     /* "KVMK" */
		return 0;
	cpuid(0x40000001, 0, r);
	if (!(r[0] & (1u << 3)))                          /* KVM_FEATURE_CLOCKSOURCE2 */
		return 0;
	kvmclock.version = 0;
	wrmsr(MSR_KVM_SYSTEM_TIME_NEW, (u64)&kvmclock | 1);
	u64 khz = 0;
	/* KVM fills the page before this vCPU re-enters the guest; the bound only guards a broken host. */
	for (u64 end = tsc_deadline_us(10000); rdtsc() < end;) {
		u32 v = kvmclock.version;
		barrier();
		u32 mul = kvmclock.tsc_to_system_mul;
		int shift = kvmclock.tsc_shift;
		barrier();
		if (v && !(v & 1) && v == kvmclock.version && mul) {
			khz = (1000000ull << 32) / mul;
			khz = shift < 0 ? khz << -shift : khz >> shift;
			break;
		}
		cpu_relax();
	}
	wrmsr(MSR_KVM_SYSTEM_TIME_NEW, 0);
	return khz;
}

static u16 pit_read0(void)
{
	outb(0x43, 0x00);                     /* latch channel 0 */
	u8 lo = inb(0x40);
	u8 hi = inb(0x40);
	return (u16)(lo | hi << 8);
}

/*
 * One reading of the counters, bracketed by two TSC reads.  A vCPU that is
 * preempted inside the bracket (a loaded host) shows a wide bracket, so each
 * end of a window takes the tightest of a few readings.
 */
struct sample {
	u64 mid, width;
	u32 lapic;
	u16 pit;
};

static void take(struct sample *s, bool pit)
{
	u64 a = rdtsc();
	if (pit)
		s->pit = pit_read0();
	s->lapic = lapic_timer_current();
	u64 b = rdtsc();
	s->mid = a + (b - a) / 2;
	s->width = b - a;
}

static void tightest(struct sample *best, bool pit)
{
	struct sample s;
	for (int i = 0; i < 5; i++) {
		take(&s, pit);
		if (i == 0 || s.width < best->width)
			*best = s;
	}
}

/*
 * PIT channel 0 as a rate generator from 0xFFFF (55 ms per wrap), about
 * 10 ms of it.  Returns TSC cycles per PIT_TICKS, or 0 without a counting PIT.
 */
static u64 pit_window(u64 *lapic_counts)
{
	outb(0x43, 0x34);                     /* ch 0, lo/hi, mode 2, binary */
	outb(0x40, 0xFF);
	outb(0x40, 0xFF);
	lapic_timer_start_count();
	struct sample s0, s;
	tightest(&s0, true);
	/* tsc_khz may be unknown here: these bounds assume the fastest TSC (tsc_deadline_us). */
	u64 stuck = tsc_deadline_us(2000), give_up = tsc_deadline_us(500000);
	do {
		take(&s, true);
		if (s.pit == s0.pit && rdtsc() > stuck)
			return 0;                     /* not counting: it ticks every 0.84 µs */
		if (rdtsc() > give_up)
			return 0;
	} while ((u16)(s0.pit - s.pit) < PIT_TICKS);
	tightest(&s, true);
	u16 elapsed = (u16)(s0.pit - s.pit);
	/* Park channel 0: mode 0 (one shot), so it does not keep firing. */
	outb(0x43, 0x30);
	outb(0x40, 0x01);
	outb(0x40, 0x00);
	*lapic_counts = (u64)(s0.lapic - s.lapic) * PIT_TICKS / elapsed;
	return (s.mid - s0.mid) * PIT_TICKS / elapsed;
}

void timer_calibrate(void)
{
	u32 r[4];
	char how[8] = "";
	cmdline_get("tsc", how, sizeof how);
	bool force_pit = !memcmp(how, "pit", 4);
	cpuid(0x40000000, 0, r);
	u32 hv_max = r[0];
	if (!force_pit && hv_max >= 0x40000010 && hv_max < 0x40000100) {
		cpuid(0x40000010, 0, r);
		if (r[0]) {
			tsc_khz = r[0];
			tsc_source = "cpuid-0x40000010";
		}
		if (r[1])
			lapic_khz = r[1];
	}
	if (!plausible(tsc_khz))
		tsc_khz = 0;
	if (!force_pit && !tsc_khz && plausible(tsc_khz = kvmclock_tsc_khz()))
		tsc_source = "kvmclock";
	else if (!plausible(tsc_khz))
		tsc_khz = 0;
	if (!force_pit && !tsc_khz) {
		cpuid(0, 0, r);
		if (r[0] >= 0x15) {
			cpuid(0x15, 0, r);   /* eax denominator, ebx numerator, ecx crystal Hz */
			if (r[0] && r[1] && r[2] && plausible((u64)r[2] * r[1] / r[0] / 1000)) {
				tsc_khz = (u64)r[2] * r[1] / r[0] / 1000;
				tsc_source = "cpuid-0x15";
			}
		}
	}
	if (!tsc_khz) {
		u64 lapic_counts = 0;
		u64 cycles = pit_window(&lapic_counts);
		if (cycles && plausible(cycles * PIT_HZ / PIT_TICKS / 1000)) {
			tsc_khz = cycles * PIT_HZ / PIT_TICKS / 1000;
			tsc_source = "pit";
			if (!lapic_khz)
				lapic_khz = lapic_counts * PIT_HZ / PIT_TICKS / 1000;
		}
	}
	if (!tsc_khz) {
		tsc_khz = 1000000;   /* guess 1 GHz rather than divide by zero */
		tsc_source = "guess";
	}
	if (!lapic_khz) {
		struct sample s0, s1;
		lapic_timer_start_count();
		tightest(&s0, false);
		u64 end = s0.mid + 2 * tsc_khz;
		while (rdtsc() < end)
			cpu_relax();
		tightest(&s1, false);
		lapic_khz = (u64)(s0.lapic - s1.lapic) * tsc_khz / (s1.mid - s0.mid);
	}
	lapic_timer_stop();
	if (!lapic_khz)
		lapic_khz = 1000000;   /* KVM's LAPIC runs at 1 GHz */
	measure_host_speed();
	if (host_slowness >= SLOW_ENOUGH_TO_DOUBT_TSC && memcmp(tsc_source, "pit", 4) != 0)
		check_tsc_against_pit();
}

/* TSC cycles of one userspace I/O exit (port 0x80, the POST port: a no-op in every VMM), best of 4 x 8. */
static u64 exit_cycles(void)
{
	u64 best = ~0ull;
	for (int round = 0; round < 4; round++) {
		u64 t0 = rdtsc();
		for (int i = 0; i < 8; i++)
			outb(0x80, 0);
		u64 c = (rdtsc() - t0) / 8;
		if (c < best)
			best = c;
	}
	return best;
}

/*
 * host_slowness: how many times slower than hardware this host serves a VM
 * exit (1 on hardware, 3-4 on PVM, ~10 nested in QEMU TCG).  The best of
 * several rounds, so one preemption does not count; a slow host only makes
 * waits longer, never shorter.
 */
static void measure_host_speed(void)
{
	exit_ns = exit_cycles() * 1000000 / tsc_khz;
	u64 x = (exit_ns + HARDWARE_EXIT_NS / 2) / HARDWARE_EXIT_NS;
	host_slowness = x < 1 ? 1 : x > MAX_SLOWNESS ? MAX_SLOWNESS : (u32)x;
}

/*
 * On a slow (likely emulated) host the TSC rate a hypervisor reports may not
 * be the rate at which the TSC advances in real time.  The PIT counts real
 * time; if the two disagree by more than a quarter, trust the PIT.  Skipped
 * on fast hosts: it costs 10 ms of boot.
 */
static void check_tsc_against_pit(void)
{
	u64 lapic_counts = 0;
	u64 cycles = pit_window(&lapic_counts);
	lapic_timer_stop();
	u64 pit_khz = cycles * PIT_HZ / PIT_TICKS / 1000;
	if (!plausible(pit_khz) || (pit_khz * 4 > tsc_khz * 3 && pit_khz * 4 < tsc_khz * 5))
		return;
	con_printf("probe: %s says the TSC runs at %lu kHz, the PIT measures %lu kHz: using the PIT's\n", tsc_source,
	           tsc_khz, pit_khz);
	tsc_khz = pit_khz;
	tsc_source = "pit (checked)";
	/* The LAPIC clock counted over the same real-time window, not against the doubtful TSC. */
	if (lapic_counts)
		lapic_khz = lapic_counts * PIT_HZ / PIT_TICKS / 1000;
	measure_host_speed();
}

u64 tsc_deadline_us(u64 us) { return rdtsc() + us * (tsc_khz ? tsc_khz : ASSUMED_MAX_TSC_KHZ) / 1000; }

u64 slow_host_deadline_us(u64 us) { return tsc_deadline_us(us * host_slowness); }

void tsc_delay_us(u64 us)
{
	u64 end = tsc_deadline_us(us);
	while (rdtsc() < end)
		cpu_relax();
}

/*
 * Call with IF=0.  HLT until the TSC passes tsc, woken by one-shot LAPIC
 * timers (other interrupts, e.g. the power button, are handled meanwhile).
 */
void sleep_until(u64 tsc)
{
	struct cpu *c = this_cpu();
	while (rdtsc() < tsc) {
		c->timer_tsc = 0;
		lapic_timer_oneshot(tsc);
		while (!c->timer_tsc)
			cpu_wait();
	}
	lapic_timer_stop();
}

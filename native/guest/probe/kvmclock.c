/*
 * Unhalt probe guest: scenario=kvmclock reads this vCPU's kvm-clock (the pvclock page of
 * KVM_FEATURE_CLOCKSOURCE2, as Linux's kvm-clock does) next to the TSC, every period_ms for ms,
 * one ttyS1 line each:
 *   @u1 kvmclock ns=N tsc_ns=N      (ns: kvm-clock; tsc_ns: TSC time since the scenario began)
 * so the host can see what a pause of the VM stops: a VMM that stops the guest's clock with its
 * vCPUs (as QEMU's stop/cont does) makes ns skip the pause while tsc_ns does not.
 * Without kvm-clock: "@u1 kvmclock_missing", then power-off.
 */
#include "probe.h"

static struct pvclock clk __attribute__((aligned(64)));

/* pvclock: system_time + (TSC delta scaled by mul and shift), read between two equal even versions. */
static u64 kvmclock_ns(void)
{
	u32 v;
	u64 ns;
	do {
		v = clk.version;
		barrier();
		u64 delta = rdtsc() - clk.tsc_timestamp;
		int shift = clk.tsc_shift;
		delta = shift < 0 ? delta >> -shift : delta << shift;
		ns = clk.system_time + (u64)(((unsigned __int128)delta * clk.tsc_to_system_mul) >> 32);
		barrier();
	} while ((v & 1) || v != clk.version);
	return ns;
}

NORETURN void scenario_kvmclock(void)
{
	u64 ms = cmdline_u64("ms", 3000);
	u64 period = cmdline_u64("period_ms", 50);
	u32 r[4];
	cpuid(0x40000000, 0, r);
	bool kvm = r[1] == 0x4b4d564b && r[0] >= 0x40000001;   /* "KVMK" */
	if (kvm)
		cpuid(0x40000001, 0, r);
	if (!kvm || !(r[0] & (1u << 3))) {                      /* KVM_FEATURE_CLOCKSOURCE2 */
		event("kvmclock_missing");
		power_off();
	}
	clk.version = 0;
	wrmsr(MSR_KVM_SYSTEM_TIME_NEW, (u64)&clk | 1);
	/* KVM fills the page before this vCPU re-enters the guest; the bound only guards a broken host. */
	for (u64 end = rdtsc() + 10 * tsc_khz; !clk.version && rdtsc() < end;)
		cpu_relax();
	u64 t0 = rdtsc();
	u64 end = t0 + ms * tsc_khz;
	for (u64 now = t0; now < end; now = rdtsc()) {
		event("kvmclock ns=%lu tsc_ns=%lu", kvmclock_ns(), tsc_to_ns(now - t0));
		for (u64 next = now + period * tsc_khz; rdtsc() < next;)
			cpu_relax();
	}
	wrmsr(MSR_KVM_SYSTEM_TIME_NEW, 0);
	power_off();
}

/*
 * Unhalt probe guest: wake-up latency scenarios (docs/guest-contract.md).
 *
 *   ipi:   CPU 0 and CPU 1 ping-pong with fixed IPIs, each waiting in HLT
 *          with interrupts on; a round trip is two wake-ups of a halted vCPU.
 *   timer: one-shot LAPIC timers, HLT until each fires; lateness = TSC in the
 *          handler minus the programmed deadline.
 *
 * Both are what halt polling and cpu-pm change: KVM either polls for the
 * wake-up event or puts the vCPU thread to sleep and wakes it later.
 * live=1 repeats a burst of `burst` measurements every `interval_ms`, HLTing
 * in between (low duty cycle, interrupts on: the power button works), one
 * event per burst, until the host stops the VM.
 */
#include "probe.h"

#define MAX_SAMPLES 8192
static u32 sample_buf[MAX_SAMPLES];

struct live {
	bool on;
	u64 burst, interval_ms;
};

static void live_params(struct live *l)
{
	l->on = cmdline_u64("live", 0) != 0;
	l->burst = cmdline_u64("burst", 50);
	l->interval_ms = cmdline_u64("interval_ms", 1000);
	if (!l->burst)
		l->burst = 1;
}

/* ---- ipi ---- */

/* ping: the round CPU 0 started; pong: the round CPU 1 answered. */
static volatile u32 ping, pong;

/* On CPU 1 (through its mailbox, interrupts off): answer every ping, forever. */
static void ipi_ponger(void *arg)
{
	u32 peer = (u32)(u64)arg;
	u32 seen = 0;
	for (;;) {
		u32 p;
		while ((p = __atomic_load_n(&ping, __ATOMIC_ACQUIRE)) == seen)
			cpu_wait();   /* interrupts off at the check: the ping IPI cannot be lost */
		seen = p;
		__atomic_store_n(&pong, p, __ATOMIC_RELEASE);
		lapic_send_ipi(peer, 0x4000 | VEC_WAKE);
	}
}

/* One round trip from CPU 0, in TSC cycles. */
static u64 ipi_round(u32 peer)
{
	u32 seq = ping + 1;
	u64 t0 = rdtsc();
	__atomic_store_n(&ping, seq, __ATOMIC_RELEASE);
	lapic_send_ipi(peer, 0x4000 | VEC_WAKE);
	while (__atomic_load_n(&pong, __ATOMIC_ACQUIRE) != seq)
		cpu_wait();
	return rdtsc() - t0;
}

static void ipi_report(u64 rounds, struct samples *s)
{
	struct summary m;
	samples_summarize(s, &m);
	event("ipi rounds=%lu p50_ns=%lu p99_ns=%lu max_ns=%lu min_ns=%lu mean_ns=%lu", rounds, m.p50_ns, m.p99_ns,
	      m.max_ns, m.min_ns, m.mean_ns);
	con_printf("ipi: %lu round trips, p50 %lu ns, p99 %lu ns, max %lu ns, min %lu ns, mean %lu ns\n", rounds, m.p50_ns,
	           m.p99_ns, m.max_ns, m.min_ns, m.mean_ns);
}

NORETURN void scenario_ipi(void)
{
	u64 rounds = cmdline_u64("rounds", 1000);
	u64 gap_us = cmdline_u64("gap_us", 0);
	struct live l;
	live_params(&l);
	if (ncpus_up < 2 || !cpus[1].up) {
		con_printf("ipi: needs 2 CPUs\n");
		event("ipi rounds=0");
		power_off();
	}
	u32 peer = cpus[1].apic_id;
	ping = pong = 0;
	smp_call(1, ipi_ponger, (void *)(u64)cpus[0].apic_id);
	struct samples s;
	if (!l.on) {
		samples_init(&s, sample_buf, MAX_SAMPLES);
		for (u64 i = 0; i < rounds; i++) {
			if (gap_us)
				tsc_delay_us(gap_us);
			samples_add(&s, ipi_round(peer));
		}
		ipi_report(rounds, &s);
		power_off();
	}
	for (u64 next = rdtsc();;) {
		samples_init(&s, sample_buf, MAX_SAMPLES);
		for (u64 i = 0; i < l.burst; i++) {
			if (gap_us && i)
				tsc_delay_us(gap_us);
			samples_add(&s, ipi_round(peer));
		}
		ipi_report(l.burst, &s);
		next += l.interval_ms * tsc_khz;
		if (next < rdtsc())
			next = rdtsc();   /* a burst outlasted the interval: do not try to catch up */
		sleep_until(next);
	}
}

/* ---- timer ---- */

/* One one-shot timer period_cycles from now; returns how late it fired. */
static u64 timer_shot(u64 period_cycles)
{
	struct cpu *c = this_cpu();
	c->timer_tsc = 0;
	u64 deadline = rdtsc() + period_cycles;
	lapic_timer_oneshot(deadline);
	while (!c->timer_tsc)
		cpu_wait();
	return c->timer_tsc > deadline ? c->timer_tsc - deadline : 0;   /* never early in practice */
}

static void timer_report(u64 count, u64 period_us, struct samples *s)
{
	struct summary m;
	samples_summarize(s, &m);
	event("timer count=%lu period_us=%lu p50_ns=%lu p99_ns=%lu max_ns=%lu", count, period_us, m.p50_ns, m.p99_ns,
	      m.max_ns);
	con_printf("timer (%s): %lu one-shots of %lu us, late by p50 %lu ns, p99 %lu ns, max %lu ns\n",
	           tsc_deadline_timer ? "tsc-deadline" : "one-shot count", count, period_us, m.p50_ns, m.p99_ns, m.max_ns);
}

NORETURN void scenario_timer(void)
{
	u64 count = cmdline_u64("count", 500);
	u64 period_us = cmdline_u64("period_us", 1000);
	struct live l;
	live_params(&l);
	u64 period = period_us * tsc_khz / 1000;
	struct samples s;
	if (!l.on) {
		samples_init(&s, sample_buf, MAX_SAMPLES);
		for (u64 i = 0; i < count; i++)
			samples_add(&s, timer_shot(period));
		lapic_timer_stop();
		timer_report(count, period_us, &s);
		power_off();
	}
	for (u64 next = rdtsc();;) {
		samples_init(&s, sample_buf, MAX_SAMPLES);
		for (u64 i = 0; i < l.burst; i++)
			samples_add(&s, timer_shot(period));
		timer_report(l.burst, period_us, &s);
		next += l.interval_ms * tsc_khz;
		if (next < rdtsc())
			next = rdtsc();   /* a burst outlasted the interval: do not try to catch up */
		sleep_until(next);
	}
}

/*
 * Unhalt probe guest: the spinlock scenario (docs/guest-contract.md).
 *
 * All CPUs contend one ticket lock (lock xadd hands out tickets; the owner
 * field says whose turn it is) for `ms`, holding it `hold_us` each time.
 * A ticket lock is strictly FIFO, which is what makes it suffer under vCPU
 * overcommit: when the next waiter's vCPU is not running, nobody can take
 * the lock, however many others spin.
 *
 * With KVM_FEATURE_PV_UNHALT (CPUID 0x40000001 EAX bit 7) a waiter spins
 * `spin` PAUSEs, then publishes itself in the lock's waiter slot for its
 * ticket and HLTs, giving its host CPU away; the releaser kicks the next
 * ticket's waiter if it halted.  The kick is KVM_HC_KICK_CPU (it makes the
 * target's HLT return even if the kick arrives before the HLT) or, on PVM
 * (unhalt.pvm=1), where hypercalls hang the vCPU, a fixed IPI.
 *
 * The lost-wake-up race is closed as in Linux's pvqspinlock:
 *   waiter:   slot.state = HALTED (xchg, a full barrier); re-check owner;
 *             HLT only while state is still HALTED and the lock is not ours
 *   releaser: owner = next (xchg, a full barrier); read the slot; if HALTED,
 *             xchg it to KICKED and, only if that returned HALTED, kick.
 * Either the waiter sees the new owner, or the releaser sees HALTED (or
 * both: then the kick is spurious, and kicks may exceed halts).  The
 * waiter checks with interrupts off and HLTs through cpu_wait (sti;hlt), so
 * a kick IPI that lands in between stays pending and ends the HLT at once.
 */
#include "probe.h"

enum { SLOT_NONE, SLOT_HALTED, SLOT_KICKED };

struct waiter_slot {
	volatile u32 state;
	volatile u32 apic_id;
};

static struct {
	volatile u32 next;              /* next ticket to hand out */
	u32 pad0[15];                   /* waiters spin on owner: keep it apart */
	volatile u32 owner;             /* the ticket that holds the lock */
	volatile u32 last_cpu;          /* who released it last (written by the holder) */
	volatile u64 release_tsc;       /* when (0: never released yet) */
	/* Indexed by ticket % MAX_CPUS: at most one waiter per CPU, so no two
	 * outstanding tickets share a slot. */
	struct waiter_slot slots[MAX_CPUS];
} lock __attribute__((aligned(64)));

/* Parameters, set by CPU 0 before the APs start. */
static bool pv;
static u64 spin, hold_cycles, end_tsc;

/* Updated by the lock holder only (the lock serializes them). */
#define MAX_SAMPLES 8192
static u32 sample_buf[MAX_SAMPLES];
static struct samples handoff;
static u64 handoffs, acquisitions;

/* Summed at the end. */
static volatile u64 total_halts, total_kicks;
static volatile u32 finished;

static void kick(u32 apic_id)
{
	if (host_pvm)
		lapic_send_ipi(apic_id, 0x4000 | VEC_WAKE);   /* fixed IPI: wakes the HLT */
	else
		kvm_hypercall2(5, 0, apic_id);                  /* KVM_HC_KICK_CPU(flags 0, APIC ID) */
}

/* Returns the ticket now holding the lock; counts HLTs in *halts. */
static u32 ticket_lock(u32 apic_id, u64 *halts)
{
	u32 t = __atomic_fetch_add(&lock.next, 1, __ATOMIC_ACQUIRE);   /* lock xadd */
	if (!pv) {
		while (__atomic_load_n(&lock.owner, __ATOMIC_ACQUIRE) != t)
			cpu_relax();
		return t;
	}
	struct waiter_slot *w = &lock.slots[t % MAX_CPUS];
	for (;;) {
		for (u64 i = 0; i < spin; i++) {
			if (__atomic_load_n(&lock.owner, __ATOMIC_ACQUIRE) == t)
				return t;
			cpu_relax();
		}
		w->apic_id = apic_id;
		__atomic_exchange_n(&w->state, SLOT_HALTED, __ATOMIC_SEQ_CST);
		/* Re-check after publishing: the releaser may have passed already. */
		while (__atomic_load_n(&w->state, __ATOMIC_ACQUIRE) == SLOT_HALTED &&
		       __atomic_load_n(&lock.owner, __ATOMIC_ACQUIRE) != t) {
			(*halts)++;
			cpu_wait();
		}
		/* A late KICKED left behind is harmless: the next waiter on this slot overwrites it. */
		__atomic_store_n(&w->state, SLOT_NONE, __ATOMIC_RELEASE);
		if (__atomic_load_n(&lock.owner, __ATOMIC_ACQUIRE) == t)
			return t;
	}
}

static void ticket_unlock(u32 t, u64 *kicks)
{
	u32 n = t + 1;
	lock.release_tsc = rdtsc();
	__atomic_exchange_n(&lock.owner, n, __ATOMIC_SEQ_CST);   /* xchg: release + full barrier */
	if (!pv)
		return;
	struct waiter_slot *w = &lock.slots[n % MAX_CPUS];
	if (__atomic_load_n(&w->state, __ATOMIC_ACQUIRE) == SLOT_HALTED &&
	    __atomic_exchange_n(&w->state, SLOT_KICKED, __ATOMIC_SEQ_CST) == SLOT_HALTED) {
		kick(w->apic_id);
		(*kicks)++;
	}
}

/* Every CPU (CPU 0 directly, the APs through their mailboxes, interrupts off). */
static void contend(void *arg)
{
	(void)arg;
	struct cpu *c = this_cpu();
	u64 halts = 0, kicks = 0;
	while (rdtsc() < end_tsc) {
		u32 t = ticket_lock(c->apic_id, &halts);
		u64 now = rdtsc();
		acquisitions++;
		if (lock.release_tsc && lock.last_cpu != c->index) {
			handoffs++;
			samples_add(&handoff, now > lock.release_tsc ? now - lock.release_tsc : 0);
		}
		lock.last_cpu = c->index;
		u64 until = now + hold_cycles;
		while (rdtsc() < until)
			cpu_relax();
		ticket_unlock(t, &kicks);
	}
	__atomic_add_fetch(&total_halts, halts, __ATOMIC_RELAXED);
	__atomic_add_fetch(&total_kicks, kicks, __ATOMIC_RELAXED);
	__atomic_add_fetch(&finished, 1, __ATOMIC_RELEASE);
}

NORETURN void scenario_spinlock(void)
{
	u64 ms = cmdline_u64("ms", 1000);
	u64 hold_us = cmdline_u64("hold_us", 2);
	spin = cmdline_u64("spin", 1024);
	u32 r[4];
	cpuid(0x40000000, 0, r);
	bool kvm = r[1] == 0x4b4d564b && r[2] == 0x564b4d56 && r[3] == 0x4d && r[0] >= 0x40000001;   /* KVMKVMKVM */
	cpuid(0x40000001, 0, r);
	pv = kvm && ((r[0] >> 7) & 1);   /* KVM_FEATURE_PV_UNHALT */
	hold_cycles = hold_us * tsc_khz / 1000;
	samples_init(&handoff, sample_buf, MAX_SAMPLES);
	u64 t0 = rdtsc();
	end_tsc = t0 + ms * tsc_khz;
	u32 cpus_in = 1 + start_on_aps(contend, NULL);
	contend(NULL);
	while (__atomic_load_n(&finished, __ATOMIC_ACQUIRE) < cpus_in)
		cpu_relax();
	u64 elapsed_us = (rdtsc() - t0) * 1000 / tsc_khz;
	struct summary m;
	samples_summarize(&handoff, &m);
	u64 per_s = elapsed_us ? handoffs * 1000000 / elapsed_us : 0;
	event("spinlock ms=%lu cpus=%u pv=%u handoffs=%lu handoffs_per_s=%lu handoff_p50_ns=%lu handoff_p99_ns=%lu "
	      "halts=%lu kicks=%lu",
	      ms, cpus_in, pv, handoffs, per_s, m.p50_ns, m.p99_ns, total_halts, total_kicks);
	con_printf("spinlock: %u CPUs, pv %s (kick by %s), %lu handoffs (%lu/s) of %lu acquisitions, hand-off p50 %lu ns, "
	           "p99 %lu ns, %lu halts, %lu kicks\n",
	           cpus_in, pv ? "on" : "off", host_pvm ? "IPI" : "hypercall", handoffs, per_s, acquisitions, m.p50_ns,
	           m.p99_ns, total_halts, total_kicks);
	power_off();
}

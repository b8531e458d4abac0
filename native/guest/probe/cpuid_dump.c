/*
 * Unhalt probe guest: scenario=cpuid dumps the CPUID this vCPU sees, one ttyS1 line per leaf and
 * sub-leaf, so a host can compare Unhalt's guest CPUID with QEMU's (docs/guest-contract.md).
 * `cpu=N` runs the CPUID instructions on CPU N (an AP through its mailbox); CPU 0 prints.
 * Which sub-leaves exist is read from the leaves themselves, as a guest kernel would.
 */
#include "probe.h"

#define MAX_ENTRIES 512
#define MAX_SUB 64

struct cpuid_entry {
	u32 leaf, sub, r[4];
};
struct cpuid_dump {
	struct cpuid_entry e[MAX_ENTRIES];
	u32 n;
	volatile u32 done;
};
static struct cpuid_dump dump;

static void add(struct cpuid_dump *d, u32 leaf, u32 sub, const u32 r[4])
{
	if (d->n >= MAX_ENTRIES)
		return;
	struct cpuid_entry *e = &d->e[d->n++];
	e->leaf = leaf;
	e->sub = sub;
	memcpy(e->r, r, sizeof e->r);
}

static bool nonzero(const u32 r[4]) { return r[0] | r[1] | r[2] | r[3]; }

/* How one leaf enumerates its sub-leaves. */
enum subleaves {
	ONE,            /* sub-leaf 0 only */
	UNTIL_TYPE0,    /* until EAX[4:0] (cache type) is 0, that one included: 04H, 8000001DH */
	UNTIL_LEVEL0,   /* until ECX[15:8] (level type) is 0, that one included: 0BH, 1FH, 80000026H */
	COUNT_IN_EAX,   /* 0 .. sub-leaf 0's EAX: 07H, 14H, 17H, 18H, 1DH, 20H */
	NONZERO,        /* 0 and 1 always, then every non-zero one: 0DH, 0FH, 10H, 12H, 23H, 24H, 80000020H */
};

static enum subleaves kind(u32 leaf)
{
	switch (leaf) {
	case 0x4: case 0x8000001D:
		return UNTIL_TYPE0;
	case 0xB: case 0x1F: case 0x80000026:
		return UNTIL_LEVEL0;
	case 0x7: case 0x14: case 0x17: case 0x18: case 0x1D: case 0x20:
		return COUNT_IN_EAX;
	case 0xD: case 0xF: case 0x10: case 0x12: case 0x23: case 0x24: case 0x80000020:
		return NONZERO;
	default:
		return ONE;
	}
}

static void dump_leaf(struct cpuid_dump *d, u32 leaf)
{
	u32 r[4];
	cpuid(leaf, 0, r);
	add(d, leaf, 0, r);
	enum subleaves k = kind(leaf);
	u32 last = k == COUNT_IN_EAX ? (r[0] < MAX_SUB ? r[0] : MAX_SUB - 1) : MAX_SUB - 1;
	bool more = k == UNTIL_TYPE0 ? (r[0] & 0x1f) != 0 : k == UNTIL_LEVEL0 ? ((r[2] >> 8) & 0xff) != 0 : k != ONE;
	for (u32 sub = 1; more && sub <= last; sub++) {
		cpuid(leaf, sub, r);
		if (k == NONZERO && sub > 1 && !nonzero(r))
			continue;
		add(d, leaf, sub, r);
		if (k == UNTIL_TYPE0)
			more = (r[0] & 0x1f) != 0;
		else if (k == UNTIL_LEVEL0)
			more = ((r[2] >> 8) & 0xff) != 0;
	}
}

/* Basic, hypervisor (0x40000000-0x400000FF) and extended (0x80000000-0x800000FF) ranges. */
static void dump_all(void *arg)
{
	struct cpuid_dump *d = arg;
	u32 r[4];
	static const u32 base[] = { 0, 0x40000000, 0x80000000 };
	d->n = 0;
	for (u32 b = 0; b < 3; b++) {
		cpuid(base[b], 0, r);
		u32 max = r[0];
		if (max < base[b] || max > base[b] + 0xFF)
			continue;   /* the range does not exist (its first leaf is not a maximum) */
		for (u32 leaf = base[b]; leaf <= max; leaf++)
			dump_leaf(d, leaf);
	}
	__atomic_store_n(&d->done, 1, __ATOMIC_RELEASE);
}

NORETURN void scenario_cpuid(void)
{
	u32 cpu = (u32)cmdline_u64("cpu", 0);
	dump.done = 0;
	if (cpu == 0) {
		dump_all(&dump);
	} else if (smp_call(cpu, dump_all, &dump)) {
		u64 end = tsc_deadline_us(host_pvm ? 5000000 : 2000000);
		while (!__atomic_load_n(&dump.done, __ATOMIC_ACQUIRE) && rdtsc() < end)
			cpu_relax();
	}
	u32 n = __atomic_load_n(&dump.done, __ATOMIC_ACQUIRE) ? dump.n : 0;
	for (u32 i = 0; i < n; i++) {
		const struct cpuid_entry *e = &dump.e[i];
		event("cpuid cpu=%u leaf=%u sub=%u eax=%u ebx=%u ecx=%u edx=%u", cpu, e->leaf, e->sub, e->r[0], e->r[1],
		      e->r[2], e->r[3]);
	}
	event("cpuid_done cpu=%u leaves=%u", cpu, n);
	con_printf("cpuid: %u leaves and sub-leaves from CPU %u\n", n, cpu);
	power_off();
}

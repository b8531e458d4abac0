/*
 * Unhalt probe guest: SMP bring-up and the per-CPU mailbox.
 *
 * The real-mode trampoline (boot.S) is copied to a free RAM page below
 * 1 MiB; each AP named by the MADT gets INIT, SIPI (and a second SIPI if it
 * has not arrived after 10 ms), one at a time, with a generous timeout.
 * Both bounds are hardware figures stretched by the measured host slowness
 * (timer.c): a KVM nested in QEMU TCG takes ten times as long for the same
 * bring-up.  While it waits, the BSP halts rather than spins, so that on a
 * host with fewer CPUs than vCPUs the AP's thread gets the CPU; the AP's
 * arrival IPI wakes it at once.
 * An AP finds its stack in ap_stack_tops[initial APIC ID], enters ap_main,
 * reports itself and parks: cpu_wait() until a VEC_WAKE IPI, then runs
 * whatever its mailbox holds.
 */
#include "probe.h"

struct cpu cpus[MAX_CPUS];
u32 ncpus_found = 1;
volatile u32 ncpus_up = 1;
u64 smp_us;
extern u8 stacks[];

#define MSR_GS_BASE 0xC0000101

void percpu_install(struct cpu *c)
{
	c->self = c;
	wrmsr(MSR_GS_BASE, (u64)c);
}

static bool overlaps(u64 a, u64 alen, u64 b, u64 blen) { return blen && a < b + blen && b < a + alen; }

/* A 4 KiB page in 0x8000-0x9F000 that is RAM and holds no boot data. */
static u64 trampoline_page(const struct hvm_start_info *si)
{
	for (u64 p = 0x8000; p < 0xA0000; p += 0x1000) {
		if (!si)
			return p;
		if (overlaps(p, 0x1000, (u64)si, sizeof *si) || overlaps(p, 0x1000, si->cmdline_paddr, 4096) ||
		    overlaps(p, 0x1000, si->modlist_paddr, si->nr_modules * 32ull))
			continue;
		if (si->version < 1 || !si->memmap_paddr || !si->memmap_entries)
			return p;
		const struct hvm_memmap_entry *m = (const struct hvm_memmap_entry *)si->memmap_paddr;
		if (overlaps(p, 0x1000, si->memmap_paddr, si->memmap_entries * sizeof *m))
			continue;
		for (u32 i = 0; i < si->memmap_entries; i++)
			if (m[i].type == 1 && m[i].addr <= p && p + 0x1000 <= m[i].addr + m[i].size)
				return p;
	}
	return 0;
}

/* Spin this long (at hardware speed) before halting: on hardware an AP is usually up by then. */
#define SPIN_BEFORE_HALT_US 200
#define HALT_SLICE_US 1000

/* Set while the BSP halts in wait_up: only then does an arriving AP send it a wake IPI (scenarios get no stray ones). */
static volatile u32 bsp_halting;

/* Call with IF=0.  Wakes on the AP's arrival IPI (VEC_WAKE) or a timer slice. */
static bool wait_up(struct cpu *c, u64 us)
{
	u64 end = slow_host_deadline_us(us);
	u64 spin_end = slow_host_deadline_us(SPIN_BEFORE_HALT_US);
	while (!c->up && rdtsc() < spin_end)
		cpu_relax();
	__atomic_store_n(&bsp_halting, 1, __ATOMIC_SEQ_CST);
	while (!c->up) {
		u64 now = rdtsc();
		if (now > end)
			break;
		u64 slice = now + HALT_SLICE_US * tsc_khz / 1000;
		lapic_timer_oneshot(slice < end ? slice : end);
		cpu_wait();   /* an IPI sent after the check above stays pending and ends the hlt at once */
	}
	__atomic_store_n(&bsp_halting, 0, __ATOMIC_SEQ_CST);
	lapic_timer_stop();
	return c->up;
}

void smp_boot(const struct hvm_start_info *si)
{
	u32 bsp = cpus[0].apic_id;
	ncpus_found = acpi.found && acpi.ncpus ? acpi.ncpus : 1;
	if (ncpus_found < 2)
		return;
	u64 page = trampoline_page(si);
	if (!page) {
		con_printf("probe: no page below 1 MiB for the AP trampoline\n");
		return;
	}
	memcpy((void *)page, trampoline_start, (size_t)(trampoline_end - trampoline_start));
	u32 sipi = 0x4600 | (u32)(page >> 12);   /* start-up, assert, vector = page */
	u64 timeout_us = 1000000;   /* at hardware speed; wait_up stretches it */
	u64 t0 = rdtsc();
	u32 idx = 1;
	for (u32 i = 0; i < acpi.ncpus && idx < MAX_CPUS; i++) {
		u32 id = acpi.apic_ids[i];
		if (id == bsp)
			continue;
		struct cpu *c = &cpus[idx];
		c->index = idx;
		c->apic_id = id;
		c->self = c;
		c->stack_top = (u64)stacks + (u64)(idx + 1) * STACK_SIZE;
		ap_stack_tops[id] = c->stack_top;
		barrier();
		lapic_send_ipi(id, 0x4500);          /* INIT, assert, level */
		lapic_send_ipi(id, 0x8500);          /* INIT, de-assert, level */
		lapic_send_ipi(id, sipi);
		if (!wait_up(c, 10000)) {
			lapic_send_ipi(id, sipi);
			if (!wait_up(c, timeout_us))
				con_printf("probe: CPU with APIC ID %u did not come up\n", id);
		}
		idx++;   /* never reuse a slot: a late AP may still arrive */
	}
	smp_us = (rdtsc() - t0) * 1000 / tsc_khz;
}

void ap_main(void)
{
	u32 r[4];
	cpuid(1, 0, r);
	u32 id = r[1] >> 24;
	struct cpu *c = NULL;
	for (u32 i = 1; i < MAX_CPUS; i++)
		if (cpus[i].self && cpus[i].apic_id == id)
			c = &cpus[i];
	if (!c)
		halt_forever();
	percpu_install(c);
	idt_load();
	lapic_init();
	__atomic_add_fetch(&ncpus_up, 1, __ATOMIC_SEQ_CST);
	__atomic_store_n(&c->up, 1, __ATOMIC_RELEASE);
	/* A wake missed in the race with the BSP's flag costs it one halt slice, no more. */
	if (__atomic_load_n(&bsp_halting, __ATOMIC_SEQ_CST))
		lapic_send_ipi(cpus[0].apic_id, 0x4000 | VEC_WAKE);
	for (;;) {
		/* Interrupts are off here: a wake IPI sent after this check stays
		 * pending and ends the sti;hlt in cpu_wait at once. */
		void (*fn)(void *) = __atomic_exchange_n(&c->mbox_fn, NULL, __ATOMIC_ACQUIRE);
		if (fn) {
			fn(c->mbox_arg);
			__atomic_add_fetch(&c->mbox_done, 1, __ATOMIC_RELEASE);
			continue;
		}
		cpu_wait();
	}
}

/* Run fn(arg) on CPU cpu_index (an AP that is up).  Does not wait for it. */
bool smp_call(u32 cpu_index, void (*fn)(void *), void *arg)
{
	if (cpu_index == 0 || cpu_index >= MAX_CPUS || !cpus[cpu_index].up)
		return false;
	struct cpu *c = &cpus[cpu_index];
	while (__atomic_load_n(&c->mbox_fn, __ATOMIC_ACQUIRE))
		cpu_relax();
	c->mbox_arg = arg;
	__atomic_store_n(&c->mbox_fn, fn, __ATOMIC_RELEASE);
	lapic_send_ipi(c->apic_id, 0x4000 | VEC_WAKE);   /* fixed, assert */
	return true;
}

/* smp_call(fn, arg) on every AP that is up; returns how many were asked. */
u32 start_on_aps(void (*fn)(void *), void *arg)
{
	u32 n = 0;
	for (u32 i = 1; i < MAX_CPUS; i++)
		if (smp_call(i, fn, arg))
			n++;
	return n;
}

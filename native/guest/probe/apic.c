/*
 * Unhalt probe guest: local APIC (xAPIC MMIO), I/O APIC, legacy PIC mask.
 */
#include "probe.h"

#define LAPIC_ID 0x020
#define LAPIC_TPR 0x080
#define LAPIC_EOI 0x0B0
#define LAPIC_SVR 0x0F0
#define LAPIC_ESR 0x280
#define LAPIC_ICR_LO 0x300
#define LAPIC_ICR_HI 0x310
#define LAPIC_LVT_TIMER 0x320
#define LAPIC_TIMER_INIT 0x380
#define LAPIC_TIMER_CUR 0x390
#define LAPIC_TIMER_DIV 0x3E0

#define ICR_PENDING (1u << 12)
#define LVT_MASKED (1u << 16)
#define LVT_PERIODIC (1u << 17)
#define LVT_TSC_DEADLINE (2u << 17)
#define MSR_TSC_DEADLINE 0x6E0

bool tsc_deadline_timer;

static u32 lapic_read(u32 reg) { return mmio_read32(acpi.lapic_base + reg); }
static void lapic_write(u32 reg, u32 v) { mmio_write32(acpi.lapic_base + reg, v); }

/* Per CPU: software-enable, accept all priorities, timer masked. */
void lapic_init(void)
{
	u32 r[4];
	cpuid(1, 0, r);
	tsc_deadline_timer = (r[2] >> 24) & 1;
	lapic_write(LAPIC_SVR, 0x100 | VEC_SPURIOUS);
	lapic_write(LAPIC_TPR, 0);
	lapic_write(LAPIC_LVT_TIMER, LVT_MASKED | VEC_TIMER);
	lapic_write(LAPIC_ESR, 0);
}

u32 lapic_id(void) { return lapic_read(LAPIC_ID) >> 24; }
void lapic_eoi(void) { lapic_write(LAPIC_EOI, 0); }

void lapic_send_ipi(u32 apic_id, u32 icr_low)
{
	lapic_write(LAPIC_ICR_HI, apic_id << 24);
	lapic_write(LAPIC_ICR_LO, icr_low);
	if (!(lapic_read(LAPIC_ICR_LO) & ICR_PENDING))
		return;   /* KVM delivers at once: the usual case */
	for (u64 end = slow_host_deadline_us(1000); (lapic_read(LAPIC_ICR_LO) & ICR_PENDING) && rdtsc() < end;)
		cpu_relax();
}

/* Divide by 16; lapic_khz is the undivided timer clock. */
void lapic_timer_periodic(u32 vector, u32 period_us)
{
	u64 count = (u64)period_us * lapic_khz / 1000 / 16;
	if (count == 0)
		count = 1;
	if (count > 0xFFFFFFFFu)
		count = 0xFFFFFFFFu;
	lapic_write(LAPIC_TIMER_DIV, 0x3);
	lapic_write(LAPIC_LVT_TIMER, LVT_PERIODIC | vector);
	lapic_write(LAPIC_TIMER_INIT, (u32)count);
}

/* Masks the timer; leaving TSC-deadline mode also disarms a pending deadline. */
void lapic_timer_stop(void)
{
	lapic_write(LAPIC_LVT_TIMER, LVT_MASKED | VEC_TIMER);
	lapic_write(LAPIC_TIMER_INIT, 0);
}

/*
 * One interrupt (VEC_TIMER) once the TSC reaches deadline_tsc: TSC-deadline
 * mode when CPUID offers it (exact), else a one-shot count at divide-by-1
 * started now (the count is converted from TSC cycles; the MMIO write's own
 * cost makes it fire that much later).  The LVT is rewritten every time: the
 * mode may have been changed by lapic_timer_periodic or lapic_timer_stop, and
 * rewriting the same mode does not disarm anything.
 */
void lapic_timer_oneshot(u64 deadline_tsc)
{
	if (tsc_deadline_timer) {
		lapic_write(LAPIC_LVT_TIMER, LVT_TSC_DEADLINE | VEC_TIMER);
		wrmsr(MSR_TSC_DEADLINE, deadline_tsc ? deadline_tsc : 1);   /* 0 would disarm */
		return;
	}
	u64 now = rdtsc();
	u64 count = deadline_tsc > now ? (deadline_tsc - now) * lapic_khz / tsc_khz : 1;
	if (count == 0)
		count = 1;
	if (count > 0xFFFFFFFFu)
		count = 0xFFFFFFFFu;   /* fires early; sleep_until re-arms */
	lapic_write(LAPIC_TIMER_DIV, 0xB);   /* divide by 1 */
	lapic_write(LAPIC_LVT_TIMER, VEC_TIMER);
	lapic_write(LAPIC_TIMER_INIT, (u32)count);
}

/* One-shot countdown for calibration (timer.c). */
void lapic_timer_start_count(void)
{
	lapic_write(LAPIC_TIMER_DIV, 0xB);   /* divide by 1 */
	lapic_write(LAPIC_LVT_TIMER, LVT_MASKED | VEC_TIMER);
	lapic_write(LAPIC_TIMER_INIT, 0xFFFFFFFFu);
}
u32 lapic_timer_current(void) { return lapic_read(LAPIC_TIMER_CUR); }

void pic_disable(void)
{
	outb(0x21, 0xFF);
	outb(0xA1, 0xFF);
}

static void ioapic_write(u32 reg, u32 v)
{
	mmio_write32(acpi.ioapic_base, reg);
	mmio_write32(acpi.ioapic_base + 0x10, v);
}

/* An IOAPIC pin: fixed delivery, physical destination, unmasked. */
void ioapic_route_gsi(u32 gsi, u32 vector, u32 dest_apic_id, bool level, bool active_low)
{
	if (gsi < acpi.ioapic_gsi_base)
		return;
	u32 pin = gsi - acpi.ioapic_gsi_base;
	u32 lo = vector;
	if (active_low)
		lo |= 1u << 13;
	if (level)
		lo |= 1u << 15;
	ioapic_write(0x11 + 2 * pin, dest_apic_id << 24);
	ioapic_write(0x10 + 2 * pin, lo);
}

/*
 * Route an ISA IRQ through the MADT's interrupt source overrides to its
 * IOAPIC pin.  ISA default is edge, active high; an override's flags may say
 * otherwise.
 */
void ioapic_route_isa_irq(u32 irq, u32 vector, u32 dest_apic_id)
{
	u16 fl = acpi.irq_flags[irq];
	ioapic_route_gsi(acpi.irq_gsi[irq], vector, dest_apic_id, ((fl >> 2) & 3) == 3, (fl & 3) == 3);
}

/* ---- KVM hypercalls: vmcall on Intel, vmmcall on AMD (each faults on the other's CPUs). ---- */
bool cpu_is_amd(void)
{
	u32 r[4];
	cpuid(0, 0, r);
	return (r[1] == 0x68747541 && r[3] == 0x69746e65 && r[2] == 0x444d4163) ||   /* AuthenticAMD */
	       (r[1] == 0x6f677948 && r[3] == 0x6e65476e && r[2] == 0x656e6975);     /* HygonGenuine */
}

/* rax = nr, rbx = a0, rcx = a1; the result in rax.  Hangs the vCPU on PVM. */
i64 kvm_hypercall2(u64 nr, u64 a0, u64 a1)
{
	static int amd = -1;
	if (amd < 0)
		amd = cpu_is_amd();
	i64 ret;
	if (amd)
		__asm__ volatile("vmmcall" : "=a"(ret) : "a"(nr), "b"(a0), "c"(a1) : "memory");
	else
		__asm__ volatile("vmcall" : "=a"(ret) : "a"(nr), "b"(a0), "c"(a1) : "memory");
	return ret;
}

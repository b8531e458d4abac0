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

static u32 lapic_read(u32 reg) { return mmio_read32(acpi.lapic_base + reg); }
static void lapic_write(u32 reg, u32 v) { mmio_write32(acpi.lapic_base + reg, v); }

/* Per CPU: software-enable, accept all priorities, timer masked. */
void lapic_init(void)
{
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
	for (int i = 0; i < 100000 && (lapic_read(LAPIC_ICR_LO) & ICR_PENDING); i++)
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

void lapic_timer_stop(void)
{
	lapic_write(LAPIC_LVT_TIMER, LVT_MASKED | VEC_TIMER);
	lapic_write(LAPIC_TIMER_INIT, 0);
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

/*
 * Route an ISA IRQ through the MADT's interrupt source overrides to its
 * IOAPIC pin: fixed delivery, physical destination.  ISA default is edge,
 * active high; an override's flags may say otherwise.
 */
void ioapic_route_isa_irq(u32 irq, u32 vector, u32 dest_apic_id)
{
	u32 gsi = acpi.irq_gsi[irq];
	u16 fl = acpi.irq_flags[irq];
	if (gsi < acpi.ioapic_gsi_base)
		return;
	u32 pin = gsi - acpi.ioapic_gsi_base;
	u32 lo = vector;
	if ((fl & 3) == 3)
		lo |= 1u << 13;      /* active low */
	if (((fl >> 2) & 3) == 3)
		lo |= 1u << 15;      /* level triggered */
	ioapic_write(0x11 + 2 * pin, dest_apic_id << 24);
	ioapic_write(0x10 + 2 * pin, lo);
}

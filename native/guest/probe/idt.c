/*
 * Unhalt probe guest: IDT, interrupt dispatch, exception reports.
 * Only the vectors in use get gates; anything else raises #NP -> a report.
 */
#include "probe.h"

struct gate {
	u16 off0, sel;
	u8 ist, type;
	u16 off1;
	u32 off2, rsvd;
} __attribute__((packed));

static struct gate idt[256] __attribute__((aligned(16)));

static struct {
	u16 limit;
	u64 base;
} __attribute__((packed)) idtr = { sizeof idt - 1, (u64)idt };

static void set_gate(u32 vec, void (*fn)(void))
{
	u64 a = (u64)fn;
	idt[vec] = (struct gate){
		.off0 = (u16)a, .sel = 0x18, .ist = 0, .type = 0x8E, /* present, ring 0, interrupt gate */
		.off1 = (u16)(a >> 16), .off2 = (u32)(a >> 32), .rsvd = 0,
	};
}

void idt_init(void)
{
	for (u32 v = 0; v < 32; v++)
		set_gate(v, (void (*)(void))exc_stubs[v]);
	set_gate(VEC_UART0, irq_stub_uart0);
	set_gate(VEC_SCI, irq_stub_sci);
	set_gate(VEC_TIMER, irq_stub_timer);
	set_gate(VEC_WAKE, irq_stub_wake);
	set_gate(VEC_SPURIOUS, irq_stub_spurious);
	set_gate(VEC_VIRTQ, irq_stub_virtq);
	set_gate(VEC_VIRTCFG, irq_stub_virtcfg);
}

void idt_load(void) { __asm__ volatile("lidt %0" ::"m"(idtr)); }

void irq_dispatch(u64 vector)
{
	struct cpu *c = this_cpu();
	switch (vector) {
	case VEC_TIMER:
		/* First thing: the timer scenario measures lateness against this. */
		c->timer_tsc = rdtsc();
		c->ticks++;
		break;
	case VEC_UART0:
		serial_rx_irq();
		break;
	case VEC_SCI:
		acpi_sci();   /* powers off on the power button; else acks and returns */
		break;
	case VEC_WAKE:
		c->wakes++;
		break;
	case VEC_VIRTQ:
	case VEC_VIRTCFG:
		virtio_irq(vector);
		break;
	case VEC_SPURIOUS:
		return;   /* no EOI for spurious interrupts */
	}
	lapic_eoi();
}

struct exc_frame {
	u64 r15, r14, r13, r12, r11, r10, r9, r8, rbp, rdi, rsi, rdx, rcx, rbx, rax;
	u64 vector, error, rip, cs, rflags, rsp, ss;
};

static volatile u32 faulting;

NORETURN void exception_handler(struct exc_frame *f);
NORETURN void exception_handler(struct exc_frame *f)
{
	char buf[200];
	/* A fault while reporting a fault: give up at once. */
	if (__atomic_exchange_n(&faulting, 1, __ATOMIC_ACQUIRE))
		triple_fault();
	u32 cpu = 0;
	u32 id = lapic_id();
	for (u32 i = 0; i < MAX_CPUS; i++)
		if (cpus[i].up && cpus[i].apic_id == id)
			cpu = i;
	u64 cr2;
	__asm__ volatile("mov %%cr2, %0" : "=r"(cr2));
	fmt(buf, sizeof buf, "\nprobe: CPU %u: exception %u, error 0x%lx, rip 0x%lx, rsp 0x%lx, cr2 0x%lx\n", cpu,
	    (u32)f->vector, f->error, f->rip, f->rsp, cr2);
	serial_panic_write(COM1, buf);
	fmt(buf, sizeof buf, "@u1 fault vector=%u error_code=%lu rip=%lu cpu=%u\n", (u32)f->vector, f->error,
	    f->rip, cpu);
	serial_panic_write(COM2, buf);
	power_off_status(1);
}

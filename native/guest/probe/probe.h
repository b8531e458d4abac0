/*
 * Unhalt probe guest: shared declarations.
 *
 * Freestanding x86-64, no libc. All ring-0 code must stay within what the
 * PVM emulator handles (README, "Where it runs"): no SSE (built -mgeneral-regs-only),
 * no cmpxchg16b, no xsave, no int3, no 32-bit iret.  vmcall/vmmcall hang the
 * vCPU there: only the hypercall scenario, and spinlock kicks when the command
 * line lacks unhalt.pvm=1, execute them.
 */
#ifndef PROBE_H
#define PROBE_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef uint8_t u8;
typedef uint16_t u16;
typedef uint32_t u32;
typedef uint64_t u64;
typedef int64_t i64;

#include "config.h"

#define NORETURN __attribute__((noreturn))
#define PRINTF(a, b) __attribute__((format(printf, a, b)))

/* ---- port and MMIO access ---- */
static inline void outb(u16 port, u8 v) { __asm__ volatile("outb %0, %1" ::"a"(v), "Nd"(port)); }
static inline void outw(u16 port, u16 v) { __asm__ volatile("outw %0, %1" ::"a"(v), "Nd"(port)); }
static inline void outl(u16 port, u32 v) { __asm__ volatile("outl %0, %1" ::"a"(v), "Nd"(port)); }
static inline u8 inb(u16 port)
{
	u8 v;
	__asm__ volatile("inb %1, %0" : "=a"(v) : "Nd"(port));
	return v;
}
static inline u16 inw(u16 port)
{
	u16 v;
	__asm__ volatile("inw %1, %0" : "=a"(v) : "Nd"(port));
	return v;
}
static inline u32 inl(u16 port)
{
	u32 v;
	__asm__ volatile("inl %1, %0" : "=a"(v) : "Nd"(port));
	return v;
}
static inline u32 mmio_read32(u64 addr) { return *(volatile u32 *)addr; }
static inline void mmio_write32(u64 addr, u32 v) { *(volatile u32 *)addr = v; }

/* ---- CPU helpers ---- */
static inline u64 rdtsc(void)
{
	u32 lo, hi;
	__asm__ volatile("rdtsc" : "=a"(lo), "=d"(hi));
	return ((u64)hi << 32) | lo;
}
static inline void cpuid(u32 leaf, u32 sub, u32 r[4])
{
	__asm__ volatile("cpuid" : "=a"(r[0]), "=b"(r[1]), "=c"(r[2]), "=d"(r[3]) : "a"(leaf), "c"(sub));
}
static inline void wrmsr(u32 msr, u64 v)
{
	__asm__ volatile("wrmsr" ::"c"(msr), "a"((u32)v), "d"((u32)(v >> 32)) : "memory");
}
static inline void cpu_relax(void) { __asm__ volatile("pause" ::: "memory"); }
static inline void cli(void) { __asm__ volatile("cli" ::: "memory"); }
static inline void barrier(void) { __asm__ volatile("" ::: "memory"); }

/* ---- simple xchg spinlock (no cmpxchg16b) ---- */
typedef struct { volatile u32 v; } spinlock_t;
static inline void spin_lock(spinlock_t *l)
{
	while (__atomic_exchange_n(&l->v, 1, __ATOMIC_ACQUIRE))
		while (l->v)
			cpu_relax();
}
static inline bool spin_trylock(spinlock_t *l) { return !__atomic_exchange_n(&l->v, 1, __ATOMIC_ACQUIRE); }
static inline void spin_unlock(spinlock_t *l) { __atomic_store_n(&l->v, 0, __ATOMIC_RELEASE); }

/* ---- per-CPU state, reached through GS base ---- */
struct cpu {
	struct cpu *self;            /* %gs:0 */
	u32 index;                   /* 0 = BSP */
	u32 apic_id;
	volatile u32 up;             /* set by the CPU itself once running in C */
	volatile u64 ticks;          /* LAPIC timer interrupts taken */
	volatile u64 wakes;          /* VEC_WAKE interrupts taken */
	volatile u64 timer_tsc;      /* TSC read by the last LAPIC timer interrupt */
	/* Mailbox: the owner sets arg, then fn, then sends VEC_WAKE.  The CPU
	 * takes fn with xchg after every wake-up, runs fn(arg), bumps done. */
	void (*volatile mbox_fn)(void *);
	void *volatile mbox_arg;
	volatile u64 mbox_done;
	u64 stack_top;
};
extern struct cpu cpus[MAX_CPUS];
extern u32 ncpus_found;          /* enabled LAPICs in the MADT (1 without ACPI) */
extern volatile u32 ncpus_up;    /* CPUs running, BSP included */
static inline struct cpu *this_cpu(void)
{
	struct cpu *c;
	__asm__ volatile("mov %%gs:0, %0" : "=r"(c));
	return c;
}
void percpu_install(struct cpu *c);

/* ---- boot.S ---- */
struct hvm_start_info {
	u32 magic;        /* 0x336ec578 */
	u32 version;
	u32 flags;
	u32 nr_modules;
	u64 modlist_paddr;
	u64 cmdline_paddr;
	u64 rsdp_paddr;
	u64 memmap_paddr; /* version >= 1 */
	u32 memmap_entries;
	u32 reserved;
};
struct hvm_memmap_entry {
	u64 addr;
	u64 size;
	u32 type;
	u32 reserved;
};
#define HVM_START_MAGIC 0x336ec578
extern u32 boot_start_info;      /* ebx at the PVH entry */
extern u64 ap_stack_tops[256];   /* indexed by initial APIC ID */
extern const u8 trampoline_start[], trampoline_end[];
extern void *const exc_stubs[32];
extern void irq_stub_uart0(void), irq_stub_sci(void), irq_stub_timer(void), irq_stub_wake(void),
	irq_stub_spurious(void), irq_stub_virtq(void), irq_stub_virtcfg(void);
/* Call with interrupts disabled: sti;hlt, returns (interrupts disabled
 * again) after an interrupt was handled.  Check your condition with
 * interrupts disabled before calling, so no wake-up can be lost. */
void cpu_wait(void);
NORETURN void triple_fault(void);
NORETURN void halt_forever(void);

/* ---- virtio_pci.c (the rest of the virtio transport: virtio.h) ---- */
void virtio_irq(u64 vector);

/* ---- virtio.c ---- */
NORETURN void scenario_virtio_rng(void);

/* ---- virtio_net.c ---- */
NORETURN void scenario_net(const char *name);   /* net-dhcp, net-connect, net-listen, net-udp-rr, net-tcp-rr */

/* ---- virtio_blk.c ---- */
NORETURN void scenario_virtio_blk(void);

/* ---- lib.c ---- */
void *memset(void *d, int c, size_t n);
void *memcpy(void *d, const void *s, size_t n);
int memcmp(const void *a, const void *b, size_t n);
size_t strlen(const char *s);
int vfmt(char *buf, size_t size, const char *fmt, va_list ap);
int fmt(char *buf, size_t size, const char *fmt, ...) PRINTF(3, 4);

/* ---- serial.c ---- */
#define COM1 0x3F8
#define COM2 0x2F8
void serial_init(void);
void con_printf(const char *fmt, ...) PRINTF(1, 2);   /* ttyS0, human text */
void con_write(const char *s, size_t n);               /* ttyS0, raw (no lock held by caller) */
void event(const char *fmt, ...) PRINTF(1, 2);        /* ttyS1: "@u1 " + line + "\n" */
void serial_panic_write(u16 base, const char *s);      /* lock-free, for faults */
void serial_write_raw(u16 base, const char *s, size_t n);  /* bytes as is, under the lock */
void serial_rx_enable(void);                           /* ttyS0 RX interrupt on */
void serial_rx_irq(void);
int serial_getc(void);                                 /* -1 when nothing buffered */

/* ---- cmdline.c ---- */
void cmdline_init(const struct hvm_start_info *si);
const char *cmdline_raw(void);
bool cmdline_get(const char *key, char *out, size_t outsize);
u64 cmdline_u64(const char *key, u64 dflt);

/* ---- acpi.c ---- */
struct gas {      /* ACPI generic address structure */
	u8 space_id;  /* 0 = memory, 1 = I/O */
	u8 bit_width;
	u8 bit_offset;
	u8 access_size;
	u64 address;
} __attribute__((packed));
struct acpi_info {
	bool found;
	u64 rsdp;
	u64 lapic_base;
	u32 ncpus;
	u8 apic_ids[MAX_CPUS];
	bool has_ioapic;
	u8 ioapic_id;
	u64 ioapic_base;
	u32 ioapic_gsi_base;
	u32 irq_gsi[16];        /* ISA IRQ -> GSI after overrides */
	u16 irq_flags[16];      /* MPS INTI flags from the override, 0 = bus default */
	u16 pm1a_cnt;           /* 0 = none */
	u16 pm1a_evt;           /* PM1a event block: STS, then EN at + pm1_evt_len/2; 0 = none */
	u8 pm1_evt_len;
	u8 acpi_enable;         /* value for smi_cmd that switches the firmware to ACPI mode */
	u16 sci_irq;            /* FADT SCI_INT (an ISA IRQ) */
	u32 smi_cmd;            /* 0: the machine is always in ACPI mode */
	bool power_button;      /* PWRBTN_EN set and the SCI routed (acpi_power_button_init) */
	bool hw_reduced;
	struct gas sleep_ctl;   /* HW-reduced sleep control register */
	u8 slp_typ;             /* from DSDT \_S5, default 5 */
	bool s5_found;
};
extern struct acpi_info acpi;
void acpi_init(const struct hvm_start_info *si);
void acpi_power_button_init(void);   /* BSP, after lapic_init */
void acpi_sci(void);                 /* the SCI handler: power button -> power_off() */

/* ---- apic.c ---- */
void lapic_init(void);
u32 lapic_id(void);
void lapic_eoi(void);
void lapic_send_ipi(u32 apic_id, u32 icr_low);
void lapic_timer_periodic(u32 vector, u32 period_us);
void lapic_timer_stop(void);
void lapic_timer_start_count(void);
u32 lapic_timer_current(void);
void pic_disable(void);
void ioapic_route_isa_irq(u32 irq, u32 vector, u32 dest_apic_id);
void ioapic_route_gsi(u32 gsi, u32 vector, u32 dest_apic_id, bool level, bool active_low);
extern bool tsc_deadline_timer;      /* CPUID.1:ECX[24]: LAPIC TSC-deadline mode */
void lapic_timer_oneshot(u64 deadline_tsc);
bool cpu_is_amd(void);               /* AMD/Hygon: vmmcall; else vmcall */
i64 kvm_hypercall2(u64 nr, u64 a0, u64 a1);

/* ---- timer.c ---- */
extern u64 tsc_khz;
extern u64 lapic_khz;       /* LAPIC timer input clock (divide by 1) */
extern const char *tsc_source;
void timer_calibrate(void);
void tsc_delay_us(u64 us);
u64 tsc_deadline_us(u64 us);          /* TSC value `us` from now (TSC rate not known yet: assumes a fast TSC) */
/* A bound on waiting for the host or another vCPU: `us` at hardware speed, times host_slowness. */
u64 slow_host_deadline_us(u64 us);
extern u32 host_slowness;             /* measured VM exit cost / its cost on hardware, 1..100 */
extern u64 exit_ns;                   /* measured cost of one userspace I/O exit */
void sleep_until(u64 tsc);   /* IF=0: HLT with one-shot LAPIC timers until the TSC passes tsc */
static inline u64 tsc_to_ns(u64 cycles) { return cycles * 1000000 / tsc_khz; }

/* ---- stats.c: latency samples ---- */
/* count/sum/min/max see every value; percentiles come from at most cap kept
 * values (every stride-th; the stride doubles whenever the buffer fills). */
struct samples {
	u32 *buf;
	u32 cap, n, stride, skip;
	u64 count, sum, min, max;   /* TSC cycles */
};
struct summary {
	u64 count, p50_ns, p99_ns, max_ns, min_ns, mean_ns;
};
void samples_init(struct samples *s, u32 *buf, u32 cap);
void samples_add(struct samples *s, u64 cycles);
void samples_summarize(struct samples *s, struct summary *out);   /* sorts s->buf */

/* ---- idt.c ---- */
void idt_init(void);
void idt_load(void);
void irq_dispatch(u64 vector);

/* ---- smp.c ---- */
void smp_boot(const struct hvm_start_info *si);
void ap_main(void);
bool smp_call(u32 cpu_index, void (*fn)(void *), void *arg);

/* ---- power.c ---- */
NORETURN void power_off(void);
NORETURN void power_off_status(u32 status);   /* value for port 0xf4: 0 ok, 1 after a fault */

/* ---- scenarios.c ---- */
NORETURN void run_scenario(const char *name);
NORETURN void scenario_ipi(void);        /* latency.c */
NORETURN void scenario_timer(void);      /* latency.c */
NORETURN void scenario_spinlock(void);   /* spinlock.c */
NORETURN void scenario_flood(void);      /* flood.c */
NORETURN void scenario_cpuid(void);      /* cpuid_dump.c */
NORETURN void scenario_kvmclock(void);   /* kvmclock.c */

/* kvm-clock (KVM_FEATURE_CLOCKSOURCE2): the per-vCPU time page KVM fills (pvclock ABI). */
#define MSR_KVM_SYSTEM_TIME_NEW 0x4b564d01
struct pvclock {
	volatile u32 version;
	u32 pad0;
	u64 tsc_timestamp, system_time;
	u32 tsc_to_system_mul;
	int8_t tsc_shift;
	u8 flags, pad[2];
} __attribute__((packed));
u32 start_on_aps(void (*fn)(void *), void *arg);   /* smp_call on every AP that is up; returns how many */

/* ---- main.c ---- */
extern bool host_pvm;

#endif

/*
 * Unhalt probe guest: scenarios (docs/guest-contract.md lists their events).
 * Every scenario but echo ends with power_off(), which prints "@u1 poweroff".
 */
#include "probe.h"

/* ---- hello: the paravirt CPUID leaves, and a mailbox round trip to every AP ---- */
static volatile u32 answered;
static void ap_answer(void *arg)
{
	(void)arg;
	__atomic_add_fetch(&answered, 1, __ATOMIC_SEQ_CST);
}

static NORETURN void scenario_hello(void)
{
	u32 r[4];
	char sig[13];
	cpuid(0x40000000, 0, r);
	memcpy(sig, &r[1], 4);
	memcpy(sig + 4, &r[2], 4);
	memcpy(sig + 8, &r[3], 4);
	sig[12] = 0;
	for (int i = 0; i < 12; i++)
		if (sig[i] && (sig[i] < 0x20 || sig[i] > 0x7E))
			sig[i] = '?';
	event("cpuid leaf=%u eax=%u ebx=%u ecx=%u edx=%u", 0x40000000u, r[0], r[1], r[2], r[3]);
	cpuid(0x40000001, 0, r);
	event("cpuid leaf=%u eax=%u ebx=%u ecx=%u edx=%u", 0x40000001u, r[0], r[1], r[2], r[3]);
	con_printf("hypervisor \"%s\", CPUID 0x40000001 eax 0x%x (pv-unhalt %s) edx 0x%x (realtime hint %s)\n", sig,
	           r[0], (r[0] >> 7) & 1 ? "on" : "off", r[3], r[3] & 1 ? "on" : "off");

	answered = 0;
	u32 asked = 0;
	for (u32 i = 1; i < MAX_CPUS; i++)
		if (smp_call(i, ap_answer, NULL))
			asked++;
	u64 end = slow_host_deadline_us(1000000);
	while (answered < asked && rdtsc() < end)
		cpu_relax();
	event("hello cpus_up=%u cpus_answered=%u", ncpus_up, answered + 1);
	con_printf("hello from %u CPUs (%u answered)\n", ncpus_up, answered + 1);
	power_off();
}

/* ---- echo: a line shell on ttyS0, woken by the UART interrupt ---- */
static void shell_exec(char *line)
{
	while (*line == ' ')
		line++;
	size_t n = strlen(line);
	while (n && line[n - 1] == ' ')
		line[--n] = 0;
	if (!n)
		return;
	if (!memcmp(line, "help", 5))
		con_printf("commands: help, cpus, poweroff\n");
	else if (!memcmp(line, "cpus", 5))
		con_printf("cpus up: %u\n", ncpus_up);
	else if (!memcmp(line, "poweroff", 9))
		power_off();
	else
		con_printf("unknown command: %s\n", line);
}

static NORETURN void scenario_echo(void)
{
	char line[128];
	size_t len = 0;
	bool prev_cr = false;
	ioapic_route_isa_irq(4, VEC_UART0, cpus[0].apic_id);
	serial_rx_enable();
	event("echo ready=1");
	con_printf("Type 'help' for commands.\n");
	con_write("probe> ", 7);
	for (;;) {
		int c;
		cli();
		while ((c = serial_getc()) < 0) {
			/* One LSR read before sleeping: a lost edge cannot stall the shell. */
			serial_rx_irq();
			if ((c = serial_getc()) >= 0)
				break;
			cpu_wait();
		}
		if (c == '\r' || c == '\n') {
			bool skip = c == '\n' && prev_cr;   /* CR LF is one line end */
			prev_cr = c == '\r';
			if (skip)
				continue;
			con_write("\n", 1);
			line[len] = 0;
			len = 0;
			shell_exec(line);
			con_write("probe> ", 7);
			continue;
		}
		prev_cr = false;
		if (c == 0x08 || c == 0x7F) {
			if (len) {
				len--;
				con_write("\b \b", 3);
			}
		} else if (c >= 0x20 && c < 0x7F && len < sizeof line - 1) {
			char ch = (char)c;
			line[len++] = ch;
			con_write(&ch, 1);
		}
	}
}

/*
 * ---- idle: LAPIC timer at period_us for ms, HLT between ticks ----
 * poll=1: spin with interrupts enabled instead of HLT (like Linux idle=poll);
 * the ticks then interrupt ordinary code and return with iretq.
 */
static NORETURN void scenario_idle(void)
{
	u64 ms = cmdline_u64("ms", 1000);
	u64 period = cmdline_u64("period_us", 1000);
	bool poll = cmdline_u64("poll", 0) != 0;
	if (!period)
		period = 1000;
	struct cpu *c = this_cpu();
	cli();
	c->ticks = 0;
	u64 t0 = rdtsc();
	u64 end = t0 + ms * tsc_khz;
	lapic_timer_periodic(VEC_TIMER, (u32)period);
	if (poll) {
		__asm__ volatile("sti" ::: "memory");
		while (rdtsc() < end)
			cpu_relax();
		cli();
	} else {
		while (rdtsc() < end)
			cpu_wait();
	}
	lapic_timer_stop();
	u64 t1 = rdtsc();
	u64 ticks = c->ticks;
	event("idle ms=%lu ticks=%lu tsc_cycles=%lu period_us=%lu poll=%u", ms, ticks, t1 - t0, period, poll);
	con_printf("idle%s: %lu ticks of %lu us in %lu us\n", poll ? " (poll)" : "", ticks, period,
	           (t1 - t0) * 1000 / tsc_khz);
	power_off();
}

/* ---- pio: count byte writes to port, timed with rdtsc ---- */
static NORETURN void scenario_pio(void)
{
	u64 count = cmdline_u64("count", 100000);
	u64 port = cmdline_u64("port", 0x80) & 0xFFFF;
	u64 t0 = rdtsc();
	if (count) {
		u64 n = count;
		__asm__ volatile("1: outb %%al, %%dx\n\t"
		                 "dec %0\n\t"
		                 "jnz 1b"
		                 : "+r"(n)
		                 : "d"((u16)port), "a"(0)
		                 : "memory");
	}
	u64 t1 = rdtsc();
	event("pio count=%lu tsc_cycles=%lu port=%lu", count, t1 - t0, port);
	con_printf("pio: %lu writes to port 0x%lx, %lu ns each\n", count, port,
	           count ? (t1 - t0) * 1000000 / tsc_khz / count : 0);
	power_off();
}

/*
 * ---- mmio: count 4-byte reads of addr, timed with rdtsc ----
 * The default address is unmapped MMIO (nothing there: no RAM, no BAR, not the LAPIC/IOAPIC), so
 * every read is a KVM_EXIT_MMIO answered by the VMM's empty bus: the MMIO twin of `pio`. Pass a
 * BAR register's address to time a device's MMIO path instead.
 */
#define MMIO_UNMAPPED 0xD0000000u
static NORETURN void scenario_mmio(void)
{
	u64 count = cmdline_u64("count", 100000);
	u64 addr = cmdline_u64("addr", MMIO_UNMAPPED) & ~3ull;
	if (addr >= 0x100000000ull)
		addr = MMIO_UNMAPPED; /* the identity map ends at 4 GiB */
	const volatile u32 *reg = (const volatile u32 *)(uintptr_t)addr;
	u32 value = 0;
	u64 t0 = rdtsc();
	for (u64 n = count; n; n--)
		value = *reg;
	u64 t1 = rdtsc();
	event("mmio count=%lu tsc_cycles=%lu addr=%lu value=%u", count, t1 - t0, addr, value);
	con_printf("mmio: %lu reads of 0x%lx, %lu ns each\n", count, addr,
	           count ? (t1 - t0) * 1000000 / tsc_khz / count : 0);
	power_off();
}

/*
 * ---- fault ----
 * kind=triple (default): empty IDT, then ud2: a triple fault.
 * kind=ud2: ud2 with the IDT in place: reported as "@u1 fault vector=6".
 * kind=pf: read above the 4 GiB identity map: "@u1 fault vector=14".
 */
static NORETURN void scenario_fault(void)
{
	char kind[16] = "triple";
	cmdline_get("kind", kind, sizeof kind);
	if (!memcmp(kind, "ud2", 4)) {
		con_printf("fault: executing ud2\n");
		__asm__ volatile("ud2");
	} else if (!memcmp(kind, "pf", 3)) {
		con_printf("fault: reading unmapped memory at 4 GiB\n");
		(void)*(volatile u32 *)0x100000000ull;
	}
	con_printf("fault: loading an empty IDT and executing ud2 (triple fault)\n");
	triple_fault();
}

/*
 * ---- hypercall: one vmcall/vmmcall (rax = nr, rbx = rcx = 0) ----
 * On PVM it hangs the vCPU: the test of stopping a hung VM.
 */
static NORETURN void scenario_hypercall(void)
{
	u64 nr = cmdline_u64("nr", 5);
	event("hypercall nr=%lu", nr);
	con_printf("hypercall: %s with rax=%lu\n", cpu_is_amd() ? "vmmcall" : "vmcall", nr);
	i64 ret = kvm_hypercall2(nr, 0, 0);
	event("hypercall_done ret=%ld", ret);
	con_printf("hypercall returned %ld\n", ret);
	power_off();
}

NORETURN void run_scenario(const char *name)
{
	if (!memcmp(name, "hello", 6))
		scenario_hello();
	if (!memcmp(name, "echo", 5))
		scenario_echo();
	if (!memcmp(name, "idle", 5))
		scenario_idle();
	if (!memcmp(name, "pio", 4))
		scenario_pio();
	if (!memcmp(name, "mmio", 5))
		scenario_mmio();
	if (!memcmp(name, "fault", 6))
		scenario_fault();
	if (!memcmp(name, "ipi", 4))
		scenario_ipi();
	if (!memcmp(name, "timer", 6))
		scenario_timer();
	if (!memcmp(name, "spinlock", 9))
		scenario_spinlock();
	if (!memcmp(name, "hypercall", 10))
		scenario_hypercall();
	if (!memcmp(name, "flood", 6))
		scenario_flood();
	if (!memcmp(name, "cpuid", 6))
		scenario_cpuid();
	if (!memcmp(name, "kvmclock", 9))
		scenario_kvmclock();
	if (!memcmp(name, "virtio-rng", 11))
		scenario_virtio_rng();
	if (!memcmp(name, "net-dhcp", 9) || !memcmp(name, "net-connect", 12) || !memcmp(name, "net-listen", 11)
	    || !memcmp(name, "net-udp-rr", 11) || !memcmp(name, "net-tcp-rr", 11))
		scenario_net(name);
	if (!memcmp(name, "virtio-blk", 11))
		scenario_virtio_blk();
	con_printf("probe: unknown scenario '%s'\n", name);
	event("unknown_scenario");
	power_off();
}

/*
 * Unhalt probe guest: the flood scenario, hostile on purpose, so the host
 * VMM's bounds can be tested: every CPU, for `ms` (0 = forever), mixes
 *   - ttyS0 THR writes as fast as it can, never waiting for THRE;
 *   - in/out of widths 1, 2 and 4 at pseudo-random ports with random values;
 *   - reads and writes of 1/2/4/8 bytes at unmapped MMIO 0xD0000000-0xDFFFFFFF;
 *   - ttyS1 garbage: binary bytes, over-long lines, malformed "@u1 " lines
 *     (CPU 0 writes one of those first, alone);
 * then CPU 0 re-initializes both UARTs, ends any partial ttyS1 line, reports
 * `@u1 flood ms=N ...` and powers off.
 *
 * What the random port writes leave alone, so that the run still finishes
 * the way it should (reads are allowed everywhere):
 *   - the power-off and reset paths: the ACPI PM1 blocks (0x600-0x605 here:
 *     PM1a_CNT with SLP_EN would power off), isa-debug-exit 0xF4-0xF7, the
 *     i8042 (0x60 and 0x64: 0xFE resets), port 0x92 (fast reset) and 0xCF9
 *     (reset control);
 *   - QEMU's fw_cfg 0x510-0x51B: its DMA interface would let QEMU write guest
 *     RAM at a random address (the guest's own code, say);
 *   - the 8259 PICs (0x20/0x21, 0xA0/0xA1): kept masked, so no interrupt can
 *     arrive at a vector without a gate.
 * Everything else is fair game, the UARTs' registers included (hence their
 * re-initialization at the end); the PIT may be reprogrammed (the guest uses
 * the TSC and the LAPIC timer after boot).  All CPUs run with interrupts off.
 */
#include "probe.h"

struct flood_counts {
	u64 tty_bytes, agent_bytes, pio, mmio;
};

static volatile bool flood_stop;
static volatile u32 flood_done;
static struct flood_counts flood_total;
static spinlock_t total_lock;

static u64 xorshift(u64 *s)
{
	u64 x = *s;
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return *s = x;
}

static bool overlaps(u32 port, u32 width, u32 lo, u32 hi) { return port <= hi && port + width - 1 >= lo; }

static bool port_write_allowed(u32 port, u32 width)
{
	static const u16 keep_out[][2] = {
		{ 0x20, 0x21 }, { 0xA0, 0xA1 },       /* PICs */
		{ 0x60, 0x60 }, { 0x64, 0x64 },       /* i8042 */
		{ 0x92, 0x92 }, { 0xCF9, 0xCF9 },     /* fast reset, reset control */
		{ 0xF4, 0xF7 },                       /* isa-debug-exit */
		{ 0x510, 0x51B },                     /* QEMU fw_cfg (DMA) */
		{ 0x600, 0x605 },                     /* our ACPI PM1a event + control blocks */
	};
	if (port + width > 0x10000)
		return false;
	for (u32 i = 0; i < sizeof keep_out / sizeof keep_out[0]; i++)
		if (overlaps(port, width, keep_out[i][0], keep_out[i][1]))
			return false;
	/* Wherever the FADT says the PM1 blocks and the sleep control register are. */
	if (acpi.pm1a_evt && overlaps(port, width, acpi.pm1a_evt, acpi.pm1a_evt + (acpi.pm1_evt_len ? acpi.pm1_evt_len : 4) - 1u))
		return false;
	if (acpi.pm1a_cnt && overlaps(port, width, acpi.pm1a_cnt, acpi.pm1a_cnt + 1u))
		return false;
	if (acpi.sleep_ctl.space_id == 1 && acpi.sleep_ctl.address < 0x10000 &&
	    overlaps(port, width, (u32)acpi.sleep_ctl.address, (u32)acpi.sleep_ctl.address))
		return false;
	return true;
}

static void flood_pio(u64 r, struct flood_counts *n)
{
	/* Half of them in the crowded legacy range, half anywhere. */
	u32 port = (r & 1) ? (u32)(r >> 8) & 0x3FF : (u32)(r >> 8) & 0xFFFF;
	u32 width = 1u << ((r >> 1) % 3);
	u32 v = (u32)(r >> 32);
	bool write = (r >> 3) & 1;
	port &= ~(width - 1);
	if (write && port_write_allowed(port, width)) {
		if (width == 1)
			outb((u16)port, (u8)v);
		else if (width == 2)
			outw((u16)port, (u16)v);
		else
			outl((u16)port, v);
	} else {
		if (width == 1)
			(void)inb((u16)port);
		else if (width == 2)
			(void)inw((u16)port);
		else
			(void)inl((u16)port);
	}
	n->pio++;
}

static void flood_mmio(u64 r, struct flood_counts *n)
{
	u32 width = 1u << (r & 3);
	u64 addr = (0xD0000000ull + ((r >> 8) & 0x0FFFFFFF)) & ~(u64)(width - 1);
	bool write = (r >> 2) & 1;
	u64 v = r * 0x9E3779B97F4A7C15ull;
	if (write) {
		switch (width) {
		case 1: *(volatile u8 *)addr = (u8)v; break;
		case 2: *(volatile u16 *)addr = (u16)v; break;
		case 4: *(volatile u32 *)addr = (u32)v; break;
		default: *(volatile u64 *)addr = v;
		}
	} else {
		switch (width) {
		case 1: (void)*(volatile u8 *)addr; break;
		case 2: (void)*(volatile u16 *)addr; break;
		case 4: (void)*(volatile u32 *)addr; break;
		default: (void)*(volatile u64 *)addr;
		}
	}
	n->mmio++;
}

/* ttyS0: a burst of random bytes straight into THR (no THRE wait). */
static void flood_tty(u64 *seed, struct flood_counts *n)
{
	u64 r = xorshift(seed);
	for (u32 i = 0; i < 32; i++, r >>= 2)
		outb(COM1, (u8)(r ^ i * 0x3B));
	n->tty_bytes += 32;
}

static void agent_put(const char *s, size_t len, struct flood_counts *n)
{
	for (size_t i = 0; i < len; i++)
		outb(COM2, (u8)s[i]);
	n->agent_bytes += len;
}

/* ttyS1: lines the host's `@u1` parser must count and drop, never trust. */
static void flood_agent(u64 *seed, struct flood_counts *n)
{
#define LINE(s) { s, sizeof(s) - 1 }   /* with the length: one of them holds NULs */
	static const struct {
		const char *s;
		size_t len;
	} malformed[] = {
		LINE("@u1 \n"),
		LINE("@u1  \n"),
		LINE("@u1 Boot cpus_up=1\n"),
		LINE("@u1 ipi p50_ns=1.5\n"),
		LINE("@u1 ipi p50_ns=99999999999999999999999\n"),
		LINE("@u1 ipi p50_ns=-\n"),
		LINE("@u1 timer =5\n"),
		LINE("@u1 timer count\n"),
		LINE("@u1 spinlock halts=0x10\n"),
		LINE("@u1 an_event_name_that_is_far_longer_than_thirty_two_chars x=1\n"),
		LINE("@u1 flood\xff\xfe ms=1\n"),
		LINE("@u1 \x00\x01\x02\r\n"),
		LINE("@u1@u1@u1 \n"),
		LINE("@u1 e k=1=2\n"),
	};
#undef LINE
	u64 r = xorshift(seed);
	switch (r % 8) {
	case 0: case 1: case 2: {   /* binary, newlines included */
		char b[48];
		for (u32 i = 0; i < sizeof b; i++)
			b[i] = (char)xorshift(seed);
		agent_put(b, sizeof b, n);
		break;
	}
	case 3: {   /* over-long (the protocol's limit is 512): half of them "@u1 " lines */
		u32 len = 520 + (u32)((r >> 8) % 600);
		if ((r >> 4) & 1)
			agent_put("@u1 long k=", 11, n);
		for (u32 i = 0; i < len; i++) {
			char ch = (char)('0' + i % 10);
			agent_put(&ch, 1, n);
		}
		agent_put("\n", 1, n);
		break;
	}
	default: {
		u32 i = (u32)((r >> 8) % (sizeof malformed / sizeof malformed[0]));
		agent_put(malformed[i].s, malformed[i].len, n);
	}
	}
}

static void flood_loop(u64 end, struct flood_counts *n)
{
	u64 seed = rdtsc() ^ ((u64)this_cpu()->index + 1) * 0x9E3779B97F4A7C15ull;
	if (!seed)
		seed = 1;
	for (u32 k = 0; !flood_stop && (!end || rdtsc() < end); k++) {
		u64 r = xorshift(&seed);
		switch (r & 7) {
		case 0: case 1:
			flood_tty(&seed, n);
			break;
		case 2: case 3: case 4:
			flood_pio(r >> 3, n);
			break;
		case 5: case 6:
			flood_mmio(r >> 3, n);
			break;
		default:
			flood_agent(&seed, n);
		}
	}
}

static void flood_ap(void *arg)
{
	(void)arg;
	struct flood_counts n = { 0 };
	flood_loop(0, &n);
	spin_lock(&total_lock);
	flood_total.tty_bytes += n.tty_bytes;
	flood_total.agent_bytes += n.agent_bytes;
	flood_total.pio += n.pio;
	flood_total.mmio += n.mmio;
	spin_unlock(&total_lock);
	__atomic_add_fetch(&flood_done, 1, __ATOMIC_RELEASE);
}

NORETURN void scenario_flood(void)
{
	u64 ms = cmdline_u64("ms", 2000);
	u64 t0 = rdtsc();
	/*
	 * One malformed line first, before the other CPUs start (nothing can be interleaved with
	 * it): however few operations a short flood gets through (a few dozen in a nested KVM under
	 * emulation), the host has at least one "@u1 " line to count and drop.
	 */
	struct flood_counts n = { 0 };
	agent_put("@u1 flood p50_ns=1.5\n", 21, &n);
	u32 aps = start_on_aps(flood_ap, NULL);
	flood_loop(ms ? t0 + ms * tsc_khz : 0, &n);   /* ms=0: never returns, the host stops the VM */
	flood_stop = true;
	while (__atomic_load_n(&flood_done, __ATOMIC_ACQUIRE) < aps)
		cpu_relax();
	u64 us = (rdtsc() - t0) * 1000 / tsc_khz;
	/* Back to a known UART state (DLAB off, no loopback), and end any partial line. */
	serial_init();
	serial_write_raw(COM2, "\n", 1);
	con_printf("\r\nflood: %u CPUs, %lu us: %lu ttyS0 bytes, %lu ttyS1 bytes, %lu port and %lu MMIO accesses\n",
	           aps + 1, us, n.tty_bytes + flood_total.tty_bytes, n.agent_bytes + flood_total.agent_bytes,
	           n.pio + flood_total.pio, n.mmio + flood_total.mmio);
	event("flood ms=%lu cpus=%u us=%lu tty_bytes=%lu agent_bytes=%lu pio=%lu mmio=%lu", ms, aps + 1, us,
	      n.tty_bytes + flood_total.tty_bytes, n.agent_bytes + flood_total.agent_bytes, n.pio + flood_total.pio,
	      n.mmio + flood_total.mmio);
	power_off();
}

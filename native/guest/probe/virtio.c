/*
 * Unhalt probe guest: a PCI enumerator and a virtio-rng driver (virtio 1.x over PCI, one split
 * queue, MSI-X) — the `virtio-rng` scenario (docs/guest-contract.md).
 *
 *   scenario=virtio-rng bytes=64 rounds=4 reset=0 bad=none
 *
 * Scans bus 0 through configuration mechanism #1 (0xCF8/0xCFC), sizes and maps the BARs of
 * 1af4:1044, finds its virtio capabilities, negotiates VIRTIO_F_VERSION_1, sets up queue 0 and
 * MSI-X, then asks for `bytes` random bytes `rounds` times, one buffer per request, each answer
 * announced by an MSI-X interrupt.  reset=1 resets the device afterwards, checks that it forgot
 * everything, and runs one more round on a fresh set-up.  bad=loop|size|oob programs garbage (a
 * descriptor that chains to itself, a queue size that is not a power of two, a buffer outside
 * RAM), expects DEVICE_NEEDS_RESET (and, for a running driver, a configuration interrupt), then
 * resets and checks the device works again.  bad=msi points the queue's MSI-X entry at an APIC
 * ID nobody has: the request is still served, its interrupt lost, and after the entry is fixed
 * the next one arrives.
 */
#include "probe.h"

#define PCI_ADDR 0xCF8
#define PCI_DATA 0xCFC

#define VIRTIO_STATUS_ACK 1
#define VIRTIO_STATUS_DRIVER 2
#define VIRTIO_STATUS_DRIVER_OK 4
#define VIRTIO_STATUS_FEATURES_OK 8
#define VIRTIO_STATUS_NEEDS_RESET 0x40

#define QSIZE 8
#define MAX_BYTES 4096

/* Common configuration (virtio 1.2, 4.1.4.3). */
#define CC_DFSELECT 0x00
#define CC_DF 0x04
#define CC_GFSELECT 0x08
#define CC_GF 0x0C
#define CC_MSIX_CONFIG 0x10
#define CC_NUM_QUEUES 0x12
#define CC_STATUS 0x14
#define CC_Q_SELECT 0x16
#define CC_Q_SIZE 0x18
#define CC_Q_MSIX 0x1A
#define CC_Q_ENABLE 0x1C
#define CC_Q_NOTIFY_OFF 0x1E
#define CC_Q_DESC 0x20
#define CC_Q_DRIVER 0x28
#define CC_Q_DEVICE 0x30

struct desc {
	u64 addr;
	u32 len;
	u16 flags;
	u16 next;
};
struct ring {
	struct desc desc[QSIZE] __attribute__((aligned(16)));
	struct {
		u16 flags, idx, ring[QSIZE], used_event;
	} avail __attribute__((aligned(2)));
	struct {
		u16 flags, idx;
		struct {
			u32 id, len;
		} ring[QSIZE];
		u16 avail_event;
	} used __attribute__((aligned(4)));
};

static struct ring vq __attribute__((aligned(4096)));
static u8 buf[MAX_BYTES] __attribute__((aligned(64)));
static volatile u32 queue_irqs, config_irqs;

static u64 common, isr, notify_base;
/* TSC cycles of each notify write and of each whole request (notify -> used buffer and its MSI). */
#define MAX_SAMPLES 4096
static u32 notify_buf[MAX_SAMPLES], request_buf[MAX_SAMPLES];
static struct samples notify_samples, request_samples;
static u32 notify_mult;
static u16 last_used;

void virtio_irq(u64 vector)
{
	if (vector == VEC_VIRTQ)
		queue_irqs++;
	else
		config_irqs++;
}

u32 virtio_queue_irqs(void)
{
	return queue_irqs;
}

/* ---- PCI configuration mechanism #1 (pci_read32/read8/write16 also serve virtio_net.c) ---- */
static u32 cfg_addr(u32 dev, u32 reg) { return 0x80000000u | (dev << 11) | (reg & 0xFC); }
u32 pci_read32(u32 dev, u32 reg)
{
	outl(PCI_ADDR, cfg_addr(dev, reg));
	return inl(PCI_DATA);
}
u8 pci_read8(u32 dev, u32 reg)
{
	outl(PCI_ADDR, cfg_addr(dev, reg));
	return inb(PCI_DATA + (reg & 3));
}
static void pci_write32(u32 dev, u32 reg, u32 v)
{
	outl(PCI_ADDR, cfg_addr(dev, reg));
	outl(PCI_DATA, v);
}
void pci_write16(u32 dev, u32 reg, u16 v)
{
	outl(PCI_ADDR, cfg_addr(dev, reg));
	outw(PCI_DATA + (reg & 2), v);
}

/* ---- MMIO of the BARs (uncached: 3-4 GiB) ---- */
static inline u8 rd8(u64 a) { return *(volatile u8 *)a; }
static inline u16 rd16(u64 a) { return *(volatile u16 *)a; }
static inline u32 rd32(u64 a) { return *(volatile u32 *)a; }
static inline void wr8(u64 a, u8 v) { *(volatile u8 *)a = v; }
static inline void wr16(u64 a, u16 v) { *(volatile u16 *)a = v; }
static inline void wr32(u64 a, u32 v) { *(volatile u32 *)a = v; }
static void wr64(u64 a, u64 v)
{
	wr32(a, (u32)v);
	wr32(a + 4, (u32)(v >> 32));
}

/* Stages a failure names (ttyS1 values are integers): the index in this list, plus one. */
static const char *const stages[] = { "reset", "no_version_1", "features_ok", "num_queues", "msix_config", "queue_size",
	                              "queue_msix", "no_device", "capabilities", "request" };

static NORETURN void fail(const char *what)
{
	u32 stage = 0;
	for (u32 i = 0; i < sizeof stages / sizeof stages[0]; i++)
		if (!memcmp(stages[i], what, strlen(what) + 1))
			stage = i + 1;
	event("virtio_rng ok=0 stage=%u", stage);
	con_printf("virtio-rng: FAILED at %s\n", what);
	power_off();
}

/* Waits with interrupts on until *cond changes from `old` (or the host-scaled deadline). */
static bool wait_change(volatile u16 *cond, u16 old, u64 us)
{
	u64 end = slow_host_deadline_us(us);
	__asm__ volatile("sti" ::: "memory");
	while (*cond == old && rdtsc() < end)
		cpu_relax();
	cli();
	return *cond != old;
}

static bool wait_status_bit(u8 bit, u64 us)
{
	u64 end = slow_host_deadline_us(us);
	__asm__ volatile("sti" ::: "memory");
	while (!(rd8(common + CC_STATUS) & bit) && rdtsc() < end)
		cpu_relax();
	cli();
	return (rd8(common + CC_STATUS) & bit) != 0;
}

/* Reset, negotiate VERSION_1, set up queue 0 with `size` entries, DRIVER_OK. */
static void device_init(u16 size)
{
	wr8(common + CC_STATUS, 0);
	if (rd8(common + CC_STATUS) != 0)
		fail("reset");
	wr8(common + CC_STATUS, VIRTIO_STATUS_ACK);
	wr8(common + CC_STATUS, VIRTIO_STATUS_ACK | VIRTIO_STATUS_DRIVER);
	wr32(common + CC_DFSELECT, 1);
	u32 hi = rd32(common + CC_DF);
	if (!(hi & 1))
		fail("no_version_1");
	wr32(common + CC_GFSELECT, 0);
	wr32(common + CC_GF, 0);
	wr32(common + CC_GFSELECT, 1);
	wr32(common + CC_GF, 1);   /* VIRTIO_F_VERSION_1 = bit 32 */
	wr8(common + CC_STATUS, VIRTIO_STATUS_ACK | VIRTIO_STATUS_DRIVER | VIRTIO_STATUS_FEATURES_OK);
	if (!(rd8(common + CC_STATUS) & VIRTIO_STATUS_FEATURES_OK))
		fail("features_ok");
	if (rd16(common + CC_NUM_QUEUES) < 1)
		fail("num_queues");
	wr16(common + CC_MSIX_CONFIG, 1);
	if (rd16(common + CC_MSIX_CONFIG) != 1)
		fail("msix_config");
	wr16(common + CC_Q_SELECT, 0);
	u16 max = rd16(common + CC_Q_SIZE);
	if (max < QSIZE)
		fail("queue_size");
	wr16(common + CC_Q_SIZE, size);
	wr16(common + CC_Q_MSIX, 0);
	if (rd16(common + CC_Q_MSIX) != 0)
		fail("queue_msix");
	memset(&vq, 0, sizeof vq);
	last_used = 0;
	wr64(common + CC_Q_DESC, (u64)&vq.desc);
	wr64(common + CC_Q_DRIVER, (u64)&vq.avail);
	wr64(common + CC_Q_DEVICE, (u64)&vq.used);
	wr16(common + CC_Q_ENABLE, 1);
	wr8(common + CC_STATUS, VIRTIO_STATUS_ACK | VIRTIO_STATUS_DRIVER | VIRTIO_STATUS_FEATURES_OK | VIRTIO_STATUS_DRIVER_OK);
}

static void notify_queue0(void)
{
	u16 off = rd16(common + CC_Q_NOTIFY_OFF);
	wr16(notify_base + (u64)off * notify_mult, 0);
}

/* One request: one device-writable buffer of n bytes at addr; returns the used length or -1. */
static i64 request(u64 addr, u32 n, u16 flags, u16 next)
{
	u16 slot = vq.avail.idx % QSIZE;
	vq.desc[0] = (struct desc){ .addr = addr, .len = n, .flags = (u16)(2 | flags), .next = next };
	vq.avail.ring[slot] = 0;
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	vq.avail.idx++;
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	u32 irqs = queue_irqs;
	u64 t0 = rdtsc();
	notify_queue0();
	samples_add(&notify_samples, rdtsc() - t0);
	if (!wait_change(&vq.used.idx, last_used, 1000000))
		return -1;
	/* The device publishes the used index before it sends the MSI: wait for that too, so the
	 * next request's MSI cannot coalesce with this one's (edge, same vector) and each counts. */
	u64 end = slow_host_deadline_us(1000000);
	__asm__ volatile("sti" ::: "memory");
	while (queue_irqs == irqs && rdtsc() < end)
		cpu_relax();
	cli();
	samples_add(&request_samples, rdtsc() - t0);
	u32 len = vq.used.ring[last_used % QSIZE].len;
	last_used++;
	return len;
}

static u32 distinct_bytes(const u8 *p, u32 n)
{
	u8 seen[256];
	memset(seen, 0, sizeof seen);
	u32 d = 0;
	for (u32 i = 0; i < n; i++)
		if (!seen[p[i]]++)
			d++;
	return d;
}

static void print_hex(const u8 *p, u32 n)
{
	static const char hex[] = "0123456789abcdef";
	char line[2 * 64 + 2];
	for (u32 i = 0; i < n; i += 64) {
		u32 k = n - i < 64 ? n - i : 64, o = 0;
		for (u32 j = 0; j < k; j++) {
			line[o++] = hex[p[i + j] >> 4];
			line[o++] = hex[p[i + j] & 15];
		}
		line[o] = 0;
		con_printf("virtio-rng bytes %s\n", line);
	}
}

/* ---- garbage a hostile driver programs: the device must stop, not the VMM ---- */
static void bad_driver(const char *kind)
{
	u32 cfg_before = config_irqs;
	if (!memcmp(kind, "size", 5)) {
		wr8(common + CC_STATUS, 0);
		wr8(common + CC_STATUS, VIRTIO_STATUS_ACK | VIRTIO_STATUS_DRIVER);
		wr32(common + CC_GFSELECT, 1);
		wr32(common + CC_GF, 1);
		wr8(common + CC_STATUS, VIRTIO_STATUS_ACK | VIRTIO_STATUS_DRIVER | VIRTIO_STATUS_FEATURES_OK);
		wr16(common + CC_Q_SELECT, 0);
		wr16(common + CC_Q_SIZE, 6);   /* not a power of two */
		wr16(common + CC_Q_ENABLE, 1);
	} else if (!memcmp(kind, "loop", 5)) {
		u16 slot = vq.avail.idx % QSIZE;
		vq.desc[0] = (struct desc){ .addr = (u64)buf, .len = 16, .flags = 1 | 2, .next = 0 };   /* NEXT -> itself */
		vq.avail.ring[slot] = 0;
		__atomic_thread_fence(__ATOMIC_SEQ_CST);
		vq.avail.idx++;
		notify_queue0();
	} else { /* oob: a buffer far past RAM */
		u16 slot = vq.avail.idx % QSIZE;
		vq.desc[0] = (struct desc){ .addr = 0x7000000000ull, .len = 0xFFFFFFFFu, .flags = 2, .next = 0 };
		vq.avail.ring[slot] = 0;
		__atomic_thread_fence(__ATOMIC_SEQ_CST);
		vq.avail.idx++;
		notify_queue0();
	}
	bool broken = wait_status_bit(VIRTIO_STATUS_NEEDS_RESET, 1000000);
	/* A running driver (DRIVER_OK) gets a configuration interrupt; one still setting up does not. */
	u64 end = slow_host_deadline_us(100000);
	__asm__ volatile("sti" ::: "memory");
	while (config_irqs == cfg_before && rdtsc() < end && memcmp(kind, "size", 5))
		cpu_relax();
	cli();
	u32 code = !memcmp(kind, "loop", 5) ? 1 : !memcmp(kind, "size", 5) ? 2 : 3;
	event("virtio_rng_bad kind=%u needs_reset=%u config_irqs=%u", code, broken, config_irqs - cfg_before);
	con_printf("virtio-rng: bad=%s -> %s\n", kind, broken ? "DEVICE_NEEDS_RESET" : "still running (wrong)");
}

NORETURN void scenario_virtio_rng(void)
{
	u32 nbytes = (u32)cmdline_u64("bytes", 64);
	u32 rounds = (u32)cmdline_u64("rounds", 4);
	bool reset = cmdline_u64("reset", 0) != 0;
	char bad[8] = "none";
	cmdline_get("bad", bad, sizeof bad);
	samples_init(&notify_samples, notify_buf, MAX_SAMPLES);
	samples_init(&request_samples, request_buf, MAX_SAMPLES);
	if (nbytes == 0 || nbytes > MAX_BYTES)
		nbytes = 64;

	/* Bus 0, every slot: print what answers. */
	u32 dev = 32, found = 0;
	for (u32 d = 0; d < 32; d++) {
		u32 id = pci_read32(d, 0);
		if (id == 0xFFFFFFFFu)
			continue;
		u32 class = pci_read32(d, 8) >> 8;
		con_printf("pci 00:%02x.0 %04x:%04x class %06x\n", d, id & 0xFFFF, id >> 16, class);
		event("pci slot=%u vendor=%u device=%u class=%u", d, id & 0xFFFF, id >> 16, class);
		found++;
		if (id == (0x1044u << 16 | 0x1af4u))
			dev = d;
	}
	event("pci_scan functions=%u", found);
	if (dev == 32)
		fail("no_device");

	/* BARs: size each by writing all ones (decoding off), then restore.  Memory BARs of 32 or 64
	 * bits (QEMU's modern virtio BAR is 64-bit); an I/O BAR is skipped. */
	u64 bar_addr[6] = { 0 };
	u64 bar_size[6] = { 0 };
	pci_write16(dev, 4, 0);
	for (u32 b = 0; b < 6; b++) {
		u32 reg = 0x10 + 4 * b, old = pci_read32(dev, reg);
		bool wide = (old & 7) == 4 && b < 5;
		u32 old_hi = wide ? pci_read32(dev, reg + 4) : 0;
		pci_write32(dev, reg, 0xFFFFFFFFu);
		u32 mask = pci_read32(dev, reg);
		u32 mask_hi = 0xFFFFFFFFu;
		if (wide) {
			pci_write32(dev, reg + 4, 0xFFFFFFFFu);
			mask_hi = pci_read32(dev, reg + 4);
			pci_write32(dev, reg + 4, old_hi);
		}
		pci_write32(dev, reg, old);
		if (!(old & 1) && (mask & ~0xFu)) {
			u64 m = ((u64)mask_hi << 32) | (mask & ~0xFu);
			bar_size[b] = ~m + 1;
			bar_addr[b] = ((u64)old_hi << 32) | (old & ~0xFu);
			con_printf("pci 00:%02x.0 BAR%u 0x%lx size 0x%lx%s\n", dev, b, bar_addr[b], bar_size[b], wide ? " (64-bit)" : "");
			event("pci_bar slot=%u bar=%u address=%lu size=%lu", dev, b, bar_addr[b], bar_size[b]);
		}
		if (wide)
			b++;
	}
	pci_write16(dev, 4, 0x6);   /* memory space + bus master */

	/* Capabilities: the virtio structures and MSI-X. */
	u32 msix_cap = 0, isr_found = 0;
	u64 msix_table = 0;
	common = 0;
	notify_base = 0;
	for (u32 c = pci_read8(dev, 0x34) & 0xFC, guard = 0; c && guard < 48; c = pci_read8(dev, c + 1) & 0xFC, guard++) {
		u8 id = pci_read8(dev, c);
		if (id == 0x11) {
			msix_cap = c;
			u32 t = pci_read32(dev, c + 4);
			msix_table = bar_addr[t & 7] + (t & ~7u);
		} else if (id == 0x09) {
			u8 type = pci_read8(dev, c + 3), bar = pci_read8(dev, c + 4);
			u64 at = bar_addr[bar % 6] + pci_read32(dev, c + 8);
			if (type == 1)
				common = at;
			else if (type == 2) {
				notify_base = at;
				notify_mult = pci_read32(dev, c + 16);
			} else if (type == 3) {
				isr = at;
				isr_found = 1;
			}
		}
	}
	if (!common || !notify_base || !isr_found || !msix_cap || !msix_table)
		fail("capabilities");

	/* MSI-X: vector 0 = queue, 1 = configuration, both to this CPU (fixed, edge). */
	u32 apic = lapic_id();
	for (u32 v = 0; v < 2; v++) {
		u64 e = msix_table + 16 * v;
		wr32(e, 0xFEE00000u | (apic << 12));
		wr32(e + 4, 0);
		wr32(e + 8, v == 0 ? VEC_VIRTQ : VEC_VIRTCFG);
		wr32(e + 12, 0);   /* unmask */
	}
	pci_write16(dev, msix_cap + 2, 0x8000);   /* MSI-X enable */

	if (!memcmp(bad, "msi", 4)) {
		/* An MSI-X entry that names no CPU: the interrupt is lost, the VMM and the device go on. */
		device_init(QSIZE);
		wr32(msix_table, 0xFEE00000u | (0x7Eu << 12));
		u16 slot = vq.avail.idx % QSIZE;
		vq.desc[0] = (struct desc){ .addr = (u64)buf, .len = nbytes, .flags = 2, .next = 0 };
		vq.avail.ring[slot] = 0;
		__atomic_thread_fence(__ATOMIC_SEQ_CST);
		vq.avail.idx++;
		u32 before = queue_irqs;
		notify_queue0();
		bool used = wait_change(&vq.used.idx, last_used, 1000000);
		last_used = vq.used.idx;
		tsc_delay_us(20000);
		u32 lost = queue_irqs == before;
		event("virtio_rng_bad kind=4 used=%u irq_lost=%u status=%u", used, lost, rd8(common + CC_STATUS));
		wr32(msix_table, 0xFEE00000u | (apic << 12));
		i64 len = request((u64)buf, nbytes, 0, 0);
		event("virtio_rng_recovered ok=%u len=%ld status=%u", len == (i64)nbytes, len, rd8(common + CC_STATUS));
		power_off();
	}
	if (memcmp(bad, "none", 5) && memcmp(bad, "loop", 5) && memcmp(bad, "size", 5) && memcmp(bad, "oob", 4))
		memcpy(bad, "none", 5);
	if (memcmp(bad, "none", 5)) {
		device_init(QSIZE);
		bad_driver(bad);
		device_init(QSIZE);
		i64 len = request((u64)buf, nbytes, 0, 0);
		event("virtio_rng_recovered ok=%u len=%ld status=%u", len == (i64)nbytes, len, rd8(common + CC_STATUS));
		power_off();
	}

	device_init(QSIZE);
	samples_init(&notify_samples, notify_buf, MAX_SAMPLES);
	samples_init(&request_samples, request_buf, MAX_SAMPLES);
	u32 irqs_before = queue_irqs;
	u64 t0 = rdtsc();
	u32 total = 0, distinct = 0;
	for (u32 r = 0; r < rounds; r++) {
		memset(buf, 0, nbytes);
		i64 len = request((u64)buf, nbytes, 0, 0);
		if (len != (i64)nbytes)
			fail("request");
		total += (u32)len;
		if (r == 0) {
			print_hex(buf, nbytes);
			distinct = distinct_bytes(buf, nbytes);
		}
	}
	u64 t1 = rdtsc();
	/* Interrupts are edge MSIs: each used buffer raised one (unless they coalesced). */
	u32 irqs = queue_irqs - irqs_before;
	u32 isr_now = rd8(isr);
	con_printf("virtio-rng ok bytes=%u distinct=%u rounds=%u irqs=%u\n", nbytes, distinct, rounds, irqs);
	struct summary ns, rs;
	samples_summarize(&notify_samples, &ns);
	samples_summarize(&request_samples, &rs);
	event("virtio_rng ok=1 bytes=%u distinct=%u rounds=%u total_bytes=%u irqs=%u isr=%u us=%lu notify_p50_ns=%lu notify_p99_ns=%lu notify_min_ns=%lu request_p50_ns=%lu request_p99_ns=%lu",
	      nbytes, distinct, rounds, total, irqs, isr_now, (t1 - t0) * 1000 / tsc_khz, ns.p50_ns, ns.p99_ns, ns.min_ns,
	      rs.p50_ns, rs.p99_ns);

	if (reset) {
		wr8(common + CC_STATUS, 0);
		u8 st = rd8(common + CC_STATUS);
		wr16(common + CC_Q_SELECT, 0);
		u16 en = rd16(common + CC_Q_ENABLE);
		u16 vec = rd16(common + CC_Q_MSIX);
		device_init(QSIZE);
		memset(buf, 0, nbytes);
		i64 len = request((u64)buf, nbytes, 0, 0);
		event("virtio_rng_reset status=%u queue_enable=%u queue_msix=%u len=%ld distinct=%u", st, en, vec, len,
		      distinct_bytes(buf, nbytes));
	}
	power_off();
}

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
#include "virtio.h"

#define QSIZE 8
#define MAX_BYTES 4096

static struct virtio_pci rng;
static struct virtq vq __attribute__((aligned(4096)));
static u8 buf[MAX_BYTES] __attribute__((aligned(64)));

/* TSC cycles of each notify write and of each whole request (notify -> used buffer and its MSI). */
#define MAX_SAMPLES 4096
static u32 notify_buf[MAX_SAMPLES], request_buf[MAX_SAMPLES];
static struct samples notify_samples, request_samples;

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
	while (!(rd8(rng.common + CC_STATUS) & bit) && rdtsc() < end)
		cpu_relax();
	cli();
	return (rd8(rng.common + CC_STATUS) & bit) != 0;
}

/* Reset, negotiate VERSION_1 (nothing else), set up queue 0, DRIVER_OK. */
static void device_init(void)
{
	enum virtio_error e = virtio_negotiate(&rng, 0, 0, 1);
	if (!e)
		e = virtio_queue_setup(&rng, &vq, 0, QSIZE, 0);
	if (e)
		fail(virtio_error_name(e));
	virtio_driver_ok(&rng);
}

/* One request: one device-writable buffer of n bytes at addr; returns the used length or -1. */
static i64 request(u64 addr, u32 n, u16 flags, u16 next)
{
	vq.desc[0] = (struct virtq_desc){ .addr = addr, .len = n, .flags = (u16)(VIRTQ_DESC_F_WRITE | flags), .next = next };
	virtq_post(&vq, 0);
	u32 irqs = virtio_queue_irqs();
	u64 t0 = rdtsc();
	virtio_notify(&rng, &vq);
	samples_add(&notify_samples, rdtsc() - t0);
	if (!wait_change(&vq.used.idx, vq.last_used, 1000000))
		return -1;
	/* The device publishes the used index before it sends the MSI: wait for that too, so the
	 * next request's MSI cannot coalesce with this one's (edge, same vector) and each counts. */
	u64 end = slow_host_deadline_us(1000000);
	__asm__ volatile("sti" ::: "memory");
	while (virtio_queue_irqs() == irqs && rdtsc() < end)
		cpu_relax();
	cli();
	samples_add(&request_samples, rdtsc() - t0);
	u32 len = vq.used.ring[vq.last_used % QSIZE].len;
	vq.last_used++;
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
	u64 common = rng.common;
	u32 cfg_before = virtio_config_irqs();
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
		vq.desc[0] = (struct virtq_desc){ .addr = (u64)buf, .len = 16, .flags = VIRTQ_DESC_F_NEXT | VIRTQ_DESC_F_WRITE, .next = 0 };   /* NEXT -> itself */
		virtq_post(&vq, 0);
		virtio_notify(&rng, &vq);
	} else { /* oob: a buffer far past RAM */
		vq.desc[0] = (struct virtq_desc){ .addr = 0x7000000000ull, .len = 0xFFFFFFFFu, .flags = VIRTQ_DESC_F_WRITE, .next = 0 };
		virtq_post(&vq, 0);
		virtio_notify(&rng, &vq);
	}
	bool broken = wait_status_bit(VIRTIO_STATUS_NEEDS_RESET, 1000000);
	/* A running driver (DRIVER_OK) gets a configuration interrupt; one still setting up does not. */
	u64 end = slow_host_deadline_us(100000);
	__asm__ volatile("sti" ::: "memory");
	while (virtio_config_irqs() == cfg_before && rdtsc() < end && memcmp(kind, "size", 5))
		cpu_relax();
	cli();
	u32 code = !memcmp(kind, "loop", 5) ? 1 : !memcmp(kind, "size", 5) ? 2 : 3;
	event("virtio_rng_bad kind=%u needs_reset=%u config_irqs=%u", code, broken, virtio_config_irqs() - cfg_before);
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

	/* BARs sized and mapped, capabilities found; MSI-X vector 0 = queue, 1 = configuration. */
	enum virtio_error e = virtio_pci_probe(&rng, 0x1044, 0, 2, VIRTIO_NEED_ISR);
	for (u32 b = 0; b < 6; b++)
		if (rng.bar_size[b]) {
			con_printf("pci 00:%02x.0 BAR%u 0x%lx size 0x%lx%s\n", dev, b, rng.bar[b], rng.bar_size[b],
			           rng.bar_wide[b] ? " (64-bit)" : "");
			event("pci_bar slot=%u bar=%u address=%lu size=%lu", dev, b, rng.bar[b], rng.bar_size[b]);
		}
	if (e)
		fail(virtio_error_name(e));
	u64 common = rng.common, msix_table = rng.msix_table;
	u32 apic = lapic_id();

	if (!memcmp(bad, "msi", 4)) {
		/* An MSI-X entry that names no CPU: the interrupt is lost, the VMM and the device go on. */
		device_init();
		wr32(msix_table, 0xFEE00000u | (0x7Eu << 12));
		vq.desc[0] = (struct virtq_desc){ .addr = (u64)buf, .len = nbytes, .flags = VIRTQ_DESC_F_WRITE, .next = 0 };
		virtq_post(&vq, 0);
		u32 before = virtio_queue_irqs();
		virtio_notify(&rng, &vq);
		bool used = wait_change(&vq.used.idx, vq.last_used, 1000000);
		vq.last_used = vq.used.idx;
		tsc_delay_us(20000);
		u32 lost = virtio_queue_irqs() == before;
		event("virtio_rng_bad kind=4 used=%u irq_lost=%u status=%u", used, lost, rd8(common + CC_STATUS));
		wr32(msix_table, 0xFEE00000u | (apic << 12));
		i64 len = request((u64)buf, nbytes, 0, 0);
		event("virtio_rng_recovered ok=%u len=%ld status=%u", len == (i64)nbytes, len, rd8(common + CC_STATUS));
		power_off();
	}
	if (memcmp(bad, "none", 5) && memcmp(bad, "loop", 5) && memcmp(bad, "size", 5) && memcmp(bad, "oob", 4))
		memcpy(bad, "none", 5);
	if (memcmp(bad, "none", 5)) {
		device_init();
		bad_driver(bad);
		device_init();
		i64 len = request((u64)buf, nbytes, 0, 0);
		event("virtio_rng_recovered ok=%u len=%ld status=%u", len == (i64)nbytes, len, rd8(common + CC_STATUS));
		power_off();
	}

	device_init();
	samples_init(&notify_samples, notify_buf, MAX_SAMPLES);
	samples_init(&request_samples, request_buf, MAX_SAMPLES);
	u32 irqs_before = virtio_queue_irqs();
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
	u32 irqs = virtio_queue_irqs() - irqs_before;
	u32 isr_now = rd8(rng.isr);
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
		device_init();
		memset(buf, 0, nbytes);
		i64 len = request((u64)buf, nbytes, 0, 0);
		event("virtio_rng_reset status=%u queue_enable=%u queue_msix=%u len=%ld distinct=%u", st, en, vec, len,
		      distinct_bytes(buf, nbytes));
	}
	power_off();
}

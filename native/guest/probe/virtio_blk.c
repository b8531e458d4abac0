/*
 * Unhalt probe guest: a virtio-blk driver (virtio 1.x over PCI, one split queue, MSI-X) — the
 * `virtio-blk` scenario (docs/guest-contract.md).
 *
 *   scenario=virtio-blk disk=0 sector=8 sectors=8 seed=1 write=1 hold=0 discard=0 bad=none
 *
 * Finds the disk-th 1af4:1042 on bus 0, maps its capabilities, negotiates VERSION_1 and the
 * features it knows (RO, BLK_SIZE, SEG_MAX, FLUSH, DISCARD), reads the capacity, then: reads
 * `sectors` sectors at `sector` (their checksum), asks for the disk's ID, and with write=1 writes
 * a pattern there, flushes, and reads it back; discard=1 then discards those sectors (when
 * offered) and reads zeros back.  hold=1 halts forever after the flush is reported
 * (a test kills the VMM then).  bad=range reads past the capacity (IOERR expected), bad=nostatus
 * posts a chain with no status byte (DEVICE_NEEDS_RESET expected, then a reset and a working read).
 * bench=1 times 4 KiB random reads (`ops`) and sequential 64 KiB reads (`seq_kib`).
 * Each request is three descriptors: header (device-readable), data, status (device-writable),
 * and waits for its used buffer and its MSI.
 */
#include "virtio.h"

#define QSIZE 16
#define MAX_DATA (64 * 1024)

#define F_SEG_MAX 2
#define F_RO 5
#define F_BLK_SIZE 6
#define F_FLUSH 9
#define F_DISCARD 13

#define T_IN 0
#define T_OUT 1
#define T_FLUSH 4
#define T_GET_ID 8
#define T_DISCARD 11

static struct virtio_pci blk;
static struct virtq vq __attribute__((aligned(4096)));

static struct {
	u32 type, reserved;
	u64 sector;
} hdr __attribute__((aligned(16)));
static volatile u8 status_byte;
static u8 data[MAX_DATA] __attribute__((aligned(4096)));

static NORETURN void fail(u32 stage, const char *what)
{
	event("virtio_blk ok=0 stage=%u", stage);
	con_printf("virtio-blk: FAILED at %s\n", what);
	power_off();
}

/* The transport's failures as this scenario's stages (docs/guest-contract.md). */
static const u8 stage_of[VIRTIO_ERRORS] = {
	[VIRTIO_NO_DEVICE] = 1, [VIRTIO_CAPABILITIES] = 2, [VIRTIO_RESET] = 3, [VIRTIO_NO_VERSION_1] = 4,
	[VIRTIO_FEATURES_OK] = 5, [VIRTIO_QUEUE_SIZE] = 6, [VIRTIO_QUEUE_MSIX] = 7, [VIRTIO_NUM_QUEUES] = 10,
	[VIRTIO_MSIX_CONFIG] = 11,
};
static void check(enum virtio_error e)
{
	if (e)
		fail(stage_of[e], virtio_error_name(e));
}

/* Reset, negotiate VERSION_1 and the features this driver knows, queue 0, DRIVER_OK. */
static void device_init(void)
{
	u32 known = (1u << F_SEG_MAX) | (1u << F_RO) | (1u << F_BLK_SIZE) | (1u << F_FLUSH) | (1u << F_DISCARD);
	check(virtio_negotiate(&blk, known, 0, 1));
	check(virtio_queue_setup(&blk, &vq, 0, QSIZE, 0));
	virtio_driver_ok(&blk);
}

/* Posts descriptors 0..n-1 as one chain and waits for its used buffer and MSI; -1 on a timeout. */
static i64 submit(u32 n, u64 timeout_us)
{
	for (u32 i = 0; i + 1 < n; i++) {
		vq.desc[i].flags |= VIRTQ_DESC_F_NEXT;
		vq.desc[i].next = (u16)(i + 1);
	}
	virtq_post(&vq, 0);
	u32 irqs = virtio_queue_irqs();
	virtq_kick(&vq);
	u64 end = slow_host_deadline_us(timeout_us);
	__asm__ volatile("sti" ::: "memory");
	while ((virtq_used_idx(&vq) == vq.last_used || virtio_queue_irqs() == irqs) && rdtsc() < end)
		cpu_relax();
	cli();
	if (virtq_used_idx(&vq) == vq.last_used)
		return -1;
	u32 len = vq.used.ring[vq.last_used % QSIZE].len;
	vq.last_used++;
	return len;
}

/* One request of `type` at `sector` with `bytes` of data (none for 0); the status byte, or 0xFF on a timeout. */
static u32 blk_request(u32 type, u64 sector, u8 *buf, u32 bytes, i64 *used_len)
{
	hdr.type = type;
	hdr.reserved = 0;
	hdr.sector = sector;
	status_byte = 0xEE;
	u32 n = 0;
	vq.desc[n++] = (struct virtq_desc){ .addr = (u64)&hdr, .len = 16, .flags = 0 };
	if (bytes)
		vq.desc[n++] = (struct virtq_desc){ .addr = (u64)buf, .len = bytes,
		                                    .flags = (u16)(type == T_OUT || type == T_DISCARD ? 0 : VIRTQ_DESC_F_WRITE) };
	vq.desc[n++] = (struct virtq_desc){ .addr = (u64)&status_byte, .len = 1, .flags = VIRTQ_DESC_F_WRITE };
	i64 len = submit(n, 2000000);
	if (used_len)
		*used_len = len;
	return len < 0 ? 0xFF : status_byte;
}

static u32 fnv1a(const u8 *p, u32 n)
{
	u32 h = 2166136261u;
	for (u32 i = 0; i < n; i++)
		h = (h ^ p[i]) * 16777619u;
	return h;
}

/* The pattern a write puts at byte i of its data (test/kvm/virtio-blk.test.ts computes the same). */
static u8 pattern(u32 seed, u32 i) { return (u8)(seed * 37 + i * 7 + (i >> 9)); }

static void bench(u64 capacity)
{
	u32 ops = (u32)cmdline_u64("ops", 2000);
	u32 seq_kib = (u32)cmdline_u64("seq_kib", 8192);
	u64 rng = 0x9E3779B97F4A7C15ull ^ rdtsc();
	u64 blocks = capacity / 8;
	if (blocks == 0)
		fail(9, "request");
	u64 t0 = rdtsc();
	for (u32 i = 0; i < ops; i++) {
		rng ^= rng << 13;
		rng ^= rng >> 7;
		rng ^= rng << 17;
		if (blk_request(T_IN, (rng % blocks) * 8, data, 4096, 0) != 0)
			fail(9, "request");
	}
	u64 t1 = rdtsc();
	u64 sectors = (u64)seq_kib * 2, chunk = MAX_DATA / 512, done = 0;
	for (u64 s = 0; done < sectors; s += chunk) {
		if (s + chunk > capacity)
			s = 0;
		if (blk_request(T_IN, s, data, MAX_DATA, 0) != 0)
			fail(9, "request");
		done += chunk;
	}
	u64 t2 = rdtsc();
	u64 rand_ns = (t1 - t0) * 1000000 / tsc_khz, seq_ns = (t2 - t1) * 1000000 / tsc_khz;
	event("virtio_blk_bench ops=%u rand_ns=%lu iops=%lu seq_kib=%lu seq_ns=%lu seq_kib_per_s=%lu", ops, rand_ns,
	      rand_ns ? (u64)ops * (u64)1000000000 / rand_ns : 0, done / 2, seq_ns, seq_ns ? done / 2 * (u64)1000000000 / seq_ns : 0);
}

NORETURN void scenario_virtio_blk(void)
{
	u32 which = (u32)cmdline_u64("disk", 0);
	u64 sector = cmdline_u64("sector", 8);
	u32 sectors = (u32)cmdline_u64("sectors", 8);
	u32 seed = (u32)cmdline_u64("seed", 1);
	bool write = cmdline_u64("write", 1) != 0;
	bool hold = cmdline_u64("hold", 0) != 0;
	char bad[12] = "none";
	cmdline_get("bad", bad, sizeof bad);
	if (sectors == 0 || sectors > MAX_DATA / 512)
		sectors = 8;
	u32 bytes = sectors * 512;

	check(virtio_pci_probe(&blk, 0x1042, which, 2, VIRTIO_NEED_DEVCFG));   /* MSI-X 0: the queue, 1: configuration */
	device_init();
	u32 dev = blk.slot;
	u64 devcfg = blk.devcfg, features = blk.features;
	u64 capacity = rd32(devcfg) | (u64)rd32(devcfg + 4) << 32;
	u32 blk_size = (features & (1u << F_BLK_SIZE)) ? rd32(devcfg + 20) : 512;
	u32 seg_max = (features & (1u << F_SEG_MAX)) ? rd32(devcfg + 12) : 0;
	u32 ro = (features & (1u << F_RO)) != 0;
	con_printf("virtio-blk 00:%02x.0 capacity %lu sectors, blk_size %u%s\n", dev, capacity, blk_size, ro ? ", read-only" : "");
	event("virtio_blk_dev slot=%u class=%u capacity=%lu blk_size=%u seg_max=%u ro=%u flush=%u discard=%u", dev,
	      pci_read32(dev, 8) >> 8, capacity, blk_size, seg_max, ro, (u32)((features >> F_FLUSH) & 1), (u32)((features >> F_DISCARD) & 1));

	if (cmdline_u64("bench", 0)) {
		bench(capacity);
		power_off();
	}
	if (!memcmp(bad, "nostatus", 9)) {
		/* A header and nothing device-writable: the device cannot answer and needs a reset. */
		hdr = (typeof(hdr)){ .type = T_IN, .sector = 0 };
		vq.desc[0] = (struct virtq_desc){ .addr = (u64)&hdr, .len = 16, .flags = 0 };
		virtq_post(&vq, 0);
		virtio_notify(&blk, &vq);
		u64 end = slow_host_deadline_us(1000000);
		while (!(rd8(blk.common + CC_STATUS) & VIRTIO_STATUS_NEEDS_RESET) && rdtsc() < end)
			cpu_relax();
		u32 broken = (rd8(blk.common + CC_STATUS) & VIRTIO_STATUS_NEEDS_RESET) != 0;
		device_init();
		u32 st = blk_request(T_IN, 0, data, 512, 0);
		event("virtio_blk_bad kind=2 needs_reset=%u recovered_status=%u", broken, st);
		power_off();
	}
	if (!memcmp(bad, "range", 6)) {
		/* The last sector, then one past it: OK, then IOERR; a write past it too. */
		u32 last = blk_request(T_IN, capacity - 1, data, 512, 0);
		u32 past = blk_request(T_IN, capacity, data, 512, 0);
		u32 past_write = blk_request(T_OUT, capacity, data, 512, 0);
		u32 odd = blk_request(T_IN, 0, data, 100, 0);   /* not a whole sector */
		event("virtio_blk_bad kind=1 last=%u past=%u past_write=%u partial=%u status=%u", last, past, past_write, odd,
		      rd8(blk.common + CC_STATUS));
		power_off();
	}

	i64 len = 0;
	u32 st = blk_request(T_IN, sector, data, bytes, &len);
	event("virtio_blk_read sector=%lu bytes=%u status=%u used=%ld sum=%u", sector, bytes, st, len, fnv1a(data, bytes));
	static u8 id[20];
	memset(id, 0, sizeof id);
	st = blk_request(T_GET_ID, 0, id, sizeof id, &len);
	char idtext[21];
	memcpy(idtext, id, 20);
	idtext[20] = 0;
	con_printf("virtio-blk id %s\n", idtext);
	event("virtio_blk_id status=%u used=%ld", st, len);
	if (write) {
		for (u32 i = 0; i < bytes; i++)
			data[i] = pattern(seed, i);
		u32 sum = fnv1a(data, bytes);
		st = blk_request(T_OUT, sector, data, bytes, &len);
		event("virtio_blk_write sector=%lu bytes=%u status=%u used=%ld sum=%u", sector, bytes, st, len, sum);
		u32 fst = blk_request(T_FLUSH, 0, 0, 0, &len);
		event("virtio_blk_flush status=%u used=%ld", fst, len);
		if (hold) {
			con_printf("virtio-blk: flushed, holding\n");
			for (;;)
				cpu_wait();
		}
		memset(data, 0, bytes);
		u32 rst = blk_request(T_IN, sector, data, bytes, &len);
		u32 back = fnv1a(data, bytes);
		event("virtio_blk_verify status=%u sum=%u match=%u", rst, back, back == sum);
		if (cmdline_u64("discard", 0)) {
			/* One segment: sector, count, flags 0 (no unmap hint); then the range reads zeros. */
			static struct { u64 sector; u32 count, flags; } seg __attribute__((aligned(16)));
			seg.sector = sector;
			seg.count = sectors;
			seg.flags = 0;
			u32 dst = blk_request(T_DISCARD, 0, (u8 *)&seg, sizeof seg, 0);
			memset(data, 0xAB, bytes);
			u32 zst = blk_request(T_IN, sector, data, bytes, 0);
			u32 zeros = 1;
			for (u32 i = 0; i < bytes; i++)
				if (data[i])
					zeros = 0;
			event("virtio_blk_discard status=%u read_status=%u zeros=%u", dst, zst, zeros);
		}
	}
	event("virtio_blk ok=1 irqs=%u status=%u", virtio_queue_irqs(), rd8(blk.common + CC_STATUS));
	power_off();
}

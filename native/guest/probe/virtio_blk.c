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
#include "probe.h"

#define ST_ACK 1
#define ST_DRIVER 2
#define ST_DRIVER_OK 4
#define ST_FEATURES_OK 8
#define ST_NEEDS_RESET 0x40

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

#define CC_DFSELECT 0x00
#define CC_DF 0x04
#define CC_GFSELECT 0x08
#define CC_GF 0x0C
#define CC_MSIX_CONFIG 0x10
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
static struct {
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
} vq __attribute__((aligned(4096)));

static struct {
	u32 type, reserved;
	u64 sector;
} hdr __attribute__((aligned(16)));
static volatile u8 status_byte;
static u8 data[MAX_DATA] __attribute__((aligned(4096)));
static u64 common, notify_base, devcfg;
static u32 notify_mult;
static u16 last_used;
static u64 features;

/* pci_read32 / pci_read8 / pci_write16: virtio.c's (probe.h). */
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

static NORETURN void fail(u32 stage, const char *what)
{
	event("virtio_blk ok=0 stage=%u", stage);
	con_printf("virtio-blk: FAILED at %s\n", what);
	power_off();
}

/* The disk-th virtio-blk function on bus 0 (32 if none). */
static u32 find_disk(u32 which)
{
	for (u32 d = 0, seen = 0; d < 32; d++) {
		if (pci_read32(d, 0) != (0x1042u << 16 | 0x1af4u))
			continue;
		if (seen++ == which)
			return d;
	}
	return 32;
}

static void map_device(u32 dev)
{
	u64 bar[6] = { 0 };
	for (u32 b = 0; b < 6; b++) {
		u32 lo = pci_read32(dev, 0x10 + 4 * b);
		if (lo & 1)
			continue;
		bar[b] = lo & ~0xFu;
		if ((lo & 6) == 4 && b < 5) {
			bar[b] |= (u64)pci_read32(dev, 0x14 + 4 * b) << 32;
			b++;
		}
	}
	pci_write16(dev, 4, 0x6);   /* memory space + bus master */
	u32 msix_cap = 0;
	u64 msix_table = 0;
	for (u32 c = pci_read8(dev, 0x34) & 0xFC, guard = 0; c && guard < 48; c = pci_read8(dev, c + 1) & 0xFC, guard++) {
		u8 id = pci_read8(dev, c);
		if (id == 0x11) {
			msix_cap = c;
			u32 t = pci_read32(dev, c + 4);
			msix_table = bar[t & 7] + (t & ~7u);
		} else if (id == 0x09) {
			u8 type = pci_read8(dev, c + 3), b = pci_read8(dev, c + 4);
			u64 at = bar[b % 6] + pci_read32(dev, c + 8);
			if (type == 1)
				common = at;
			else if (type == 2) {
				notify_base = at;
				notify_mult = pci_read32(dev, c + 16);
			} else if (type == 4)
				devcfg = at;
		}
	}
	if (!common || !notify_base || !devcfg || !msix_cap || !msix_table)
		fail(2, "capabilities");
	u32 apic = lapic_id();
	for (u32 v = 0; v < 2; v++) {
		u64 e = msix_table + 16 * v;
		wr32(e, 0xFEE00000u | (apic << 12));
		wr32(e + 4, 0);
		wr32(e + 8, v == 0 ? VEC_VIRTQ : VEC_VIRTCFG);
		wr32(e + 12, 0);
	}
	pci_write16(dev, msix_cap + 2, 0x8000);
}

static void device_init(void)
{
	wr8(common + CC_STATUS, 0);
	if (rd8(common + CC_STATUS) != 0)
		fail(3, "reset");
	wr8(common + CC_STATUS, ST_ACK | ST_DRIVER);
	wr32(common + CC_DFSELECT, 0);
	u32 lo = rd32(common + CC_DF);
	wr32(common + CC_DFSELECT, 1);
	u32 hi = rd32(common + CC_DF);
	if (!(hi & 1))
		fail(4, "no_version_1");
	u32 want = lo & ((1u << F_SEG_MAX) | (1u << F_RO) | (1u << F_BLK_SIZE) | (1u << F_FLUSH) | (1u << F_DISCARD));
	features = want | (1ull << 32);
	wr32(common + CC_GFSELECT, 0);
	wr32(common + CC_GF, want);
	wr32(common + CC_GFSELECT, 1);
	wr32(common + CC_GF, 1);
	wr8(common + CC_STATUS, ST_ACK | ST_DRIVER | ST_FEATURES_OK);
	if (!(rd8(common + CC_STATUS) & ST_FEATURES_OK))
		fail(5, "features_ok");
	wr16(common + CC_MSIX_CONFIG, 1);
	wr16(common + CC_Q_SELECT, 0);
	if (rd16(common + CC_Q_SIZE) < QSIZE)
		fail(6, "queue_size");
	wr16(common + CC_Q_SIZE, QSIZE);
	wr16(common + CC_Q_MSIX, 0);
	if (rd16(common + CC_Q_MSIX) != 0)
		fail(7, "queue_msix");
	memset(&vq, 0, sizeof vq);
	last_used = 0;
	wr64(common + CC_Q_DESC, (u64)&vq.desc);
	wr64(common + CC_Q_DRIVER, (u64)&vq.avail);
	wr64(common + CC_Q_DEVICE, (u64)&vq.used);
	wr16(common + CC_Q_ENABLE, 1);
	wr8(common + CC_STATUS, ST_ACK | ST_DRIVER | ST_FEATURES_OK | ST_DRIVER_OK);
}

/* Posts descriptors 0..n-1 as one chain and waits for its used buffer and MSI; -1 on a timeout. */
static i64 submit(u32 n, u64 timeout_us)
{
	for (u32 i = 0; i + 1 < n; i++) {
		vq.desc[i].flags |= 1;
		vq.desc[i].next = (u16)(i + 1);
	}
	vq.avail.ring[vq.avail.idx % QSIZE] = 0;
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	vq.avail.idx++;
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	u32 irqs = virtio_queue_irqs();
	wr16(notify_base + (u64)rd16(common + CC_Q_NOTIFY_OFF) * notify_mult, 0);
	u64 end = slow_host_deadline_us(timeout_us);
	__asm__ volatile("sti" ::: "memory");
	while ((*(volatile u16 *)&vq.used.idx == last_used || virtio_queue_irqs() == irqs) && rdtsc() < end)
		cpu_relax();
	cli();
	if (*(volatile u16 *)&vq.used.idx == last_used)
		return -1;
	u32 len = vq.used.ring[last_used % QSIZE].len;
	last_used++;
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
	vq.desc[n++] = (struct desc){ .addr = (u64)&hdr, .len = 16, .flags = 0 };
	if (bytes)
		vq.desc[n++] = (struct desc){ .addr = (u64)buf, .len = bytes, .flags = (u16)(type == T_OUT || type == T_DISCARD ? 0 : 2) };
	vq.desc[n++] = (struct desc){ .addr = (u64)&status_byte, .len = 1, .flags = 2 };
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

	u32 dev = find_disk(which);
	if (dev == 32)
		fail(1, "no_device");
	map_device(dev);
	device_init();
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
		vq.desc[0] = (struct desc){ .addr = (u64)&hdr, .len = 16, .flags = 0 };
		vq.avail.ring[vq.avail.idx % QSIZE] = 0;
		__atomic_thread_fence(__ATOMIC_SEQ_CST);
		vq.avail.idx++;
		wr16(notify_base + (u64)rd16(common + CC_Q_NOTIFY_OFF) * notify_mult, 0);
		u64 end = slow_host_deadline_us(1000000);
		while (!(rd8(common + CC_STATUS) & ST_NEEDS_RESET) && rdtsc() < end)
			cpu_relax();
		u32 broken = (rd8(common + CC_STATUS) & ST_NEEDS_RESET) != 0;
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
		      rd8(common + CC_STATUS));
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
	event("virtio_blk ok=1 irqs=%u status=%u", virtio_queue_irqs(), rd8(common + CC_STATUS));
	power_off();
}

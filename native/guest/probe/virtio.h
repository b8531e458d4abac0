/*
 * Unhalt probe guest: the virtio 1.x PCI transport its three drivers share (virtio_pci.c) —
 * virtio-rng (virtio.c), virtio-blk (virtio_blk.c), virtio-net (virtio_net.c).
 *
 * A driver calls virtio_pci_probe (find the function, map its BARs, walk its capabilities, aim
 * its MSI-X entries at this CPU), virtio_negotiate (reset, ACK, DRIVER, features, FEATURES_OK,
 * the configuration vector), virtio_queue_setup for each queue, then virtio_driver_ok.  What
 * the device does with the queues is the driver's own business.
 */
#ifndef VIRTIO_H
#define VIRTIO_H

#include "probe.h"

/* ---- PCI configuration mechanism #1: bus 0, function 0 ---- */
u32 pci_read32(u32 dev, u32 reg);
u8 pci_read8(u32 dev, u32 reg);
void pci_write32(u32 dev, u32 reg, u32 v);
void pci_write16(u32 dev, u32 reg, u16 v);

/* Interrupts taken so far on VEC_VIRTQ (any driver's queues) and VEC_VIRTCFG. */
u32 virtio_queue_irqs(void);
u32 virtio_config_irqs(void);

/* ---- MMIO of the BARs (uncached: 3-4 GiB) ---- */
static inline u8 rd8(u64 a) { return *(volatile u8 *)a; }
static inline u16 rd16(u64 a) { return *(volatile u16 *)a; }
static inline u32 rd32(u64 a) { return *(volatile u32 *)a; }
static inline void wr8(u64 a, u8 v) { *(volatile u8 *)a = v; }
static inline void wr16(u64 a, u16 v) { *(volatile u16 *)a = v; }
static inline void wr32(u64 a, u32 v) { *(volatile u32 *)a = v; }
static inline void wr64(u64 a, u64 v)
{
	wr32(a, (u32)v);
	wr32(a + 4, (u32)(v >> 32));
}

/* ---- device status (virtio 1.2, 2.1) ---- */
#define VIRTIO_STATUS_ACK 1
#define VIRTIO_STATUS_DRIVER 2
#define VIRTIO_STATUS_DRIVER_OK 4
#define VIRTIO_STATUS_FEATURES_OK 8
#define VIRTIO_STATUS_NEEDS_RESET 0x40

/* ---- common configuration (virtio 1.2, 4.1.4.3) ---- */
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

/* ---- one split virtqueue (virtio 1.2, 2.7) ---- */
#define VIRTQ_MAX 16   /* entries the ring type has room for; a queue may use fewer */
#define VIRTQ_DESC_F_NEXT 1
#define VIRTQ_DESC_F_WRITE 2

struct virtq_desc {
	u64 addr;
	u32 len;
	u16 flags;
	u16 next;
};
/* The device is given the three parts' addresses, so a queue of `size` < VIRTQ_MAX entries
 * uses the first `size` of each; the driver's own fields follow, never seen by the device. */
struct virtq {
	struct virtq_desc desc[VIRTQ_MAX] __attribute__((aligned(16)));
	struct {
		u16 flags, idx, ring[VIRTQ_MAX], used_event;
	} avail __attribute__((aligned(2)));
	struct {
		u16 flags, idx;
		struct {
			u32 id, len;
		} ring[VIRTQ_MAX];
		u16 avail_event;
	} used __attribute__((aligned(4)));
	u16 index;       /* the queue's number on its device */
	u16 size;        /* entries in use: a power of two, at most VIRTQ_MAX */
	u16 last_used;   /* used.idx as far as the driver has taken used buffers */
	u64 notify_addr; /* where this queue is notified: read once at setup, as Linux's driver does */
};

/* Makes descriptor chain `head` available: the device sees it once it is notified. */
static inline void virtq_post(struct virtq *q, u16 head)
{
	q->avail.ring[q->avail.idx % q->size] = head;
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	q->avail.idx++;
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
}
static inline u16 virtq_used_idx(const struct virtq *q) { return *(const volatile u16 *)&q->used.idx; }

/* ---- one virtio PCI function ---- */
struct virtio_pci {
	u32 slot;                         /* bus 0 device number; 32 when none was found */
	u64 bar[6], bar_size[6];          /* memory BARs (0 for I/O or absent); a 64-bit BAR fills the lower index */
	bool bar_wide[6];
	u64 common, notify, isr, devcfg;  /* the virtio structures (capability types 1, 2, 3, 4); 0 when absent */
	u32 notify_mult;
	u32 msix_cap;
	u64 msix_table;
	u32 vectors;                      /* MSI-X entries in use: 0..vectors-2 queues, vectors-1 configuration */
	u64 features;                     /* what virtio_negotiate agreed (bit 32: VERSION_1) */
};

/* What went wrong, for each driver to report in its own terms (virtio_error_name: rng's words). */
enum virtio_error {
	VIRTIO_OK,
	VIRTIO_NO_DEVICE,
	VIRTIO_CAPABILITIES,
	VIRTIO_RESET,
	VIRTIO_NO_VERSION_1,
	VIRTIO_MISSING_FEATURE,
	VIRTIO_FEATURES_OK,
	VIRTIO_NUM_QUEUES,
	VIRTIO_MSIX_CONFIG,
	VIRTIO_QUEUE_SIZE,
	VIRTIO_QUEUE_MSIX,
	VIRTIO_ERRORS
};
const char *virtio_error_name(enum virtio_error e);

/* Capabilities a driver needs besides common, notify and MSI-X (bit n = virtio capability type n). */
#define VIRTIO_NEED_ISR (1u << 3)
#define VIRTIO_NEED_DEVCFG (1u << 4)

/* The which-th 1af4:`device` on bus 0: BARs sized and mapped (memory space and bus master on),
 * the virtio capabilities and MSI-X found, `vectors` MSI-X entries aimed at this CPU (the last
 * at VEC_VIRTCFG, the others at VEC_VIRTQ) and MSI-X enabled. */
enum virtio_error virtio_pci_probe(struct virtio_pci *d, u16 device, u32 which, u32 vectors, u32 need);

/* Reset, ACK, DRIVER, then the low feature bits `want` that the device offers (all of `require`
 * must be offered) plus VERSION_1, FEATURES_OK; at least `queues` queues; the configuration
 * interrupt on the last MSI-X vector.  Leaves the device waiting for its queues and DRIVER_OK. */
enum virtio_error virtio_negotiate(struct virtio_pci *d, u32 want, u32 require, u16 queues);

/* Queue `index` with `size` entries on ring q (zeroed here), its interrupt on MSI-X `vector`, enabled. */
enum virtio_error virtio_queue_setup(struct virtio_pci *d, struct virtq *q, u16 index, u16 size, u16 vector);

static inline void virtio_driver_ok(struct virtio_pci *d)
{
	wr8(d->common + CC_STATUS,
	    VIRTIO_STATUS_ACK | VIRTIO_STATUS_DRIVER | VIRTIO_STATUS_FEATURES_OK | VIRTIO_STATUS_DRIVER_OK);
}

/* Notifies the device of queue q as Linux's virtio driver does on its data path: one write of the
 * queue's index to the notify address found at setup (an ioeventfd where the VMM set one: no exit
 * to the VMM). The block and network drivers use it, so their round trips time what a Linux
 * guest's do. */
static inline void virtq_kick(const struct virtq *q)
{
	wr16(q->notify_addr, q->index);
}

/* Notifies the device of queue q, which must be the selected queue (CC_Q_SELECT): its notify
 * offset is read at each notification, and the notify benches time that read with the write. */
static inline void virtio_notify(struct virtio_pci *d, struct virtq *q)
{
	wr16(d->notify + (u64)rd16(d->common + CC_Q_NOTIFY_OFF) * d->notify_mult, q->index);
}

#endif

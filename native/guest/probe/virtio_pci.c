/*
 * Unhalt probe guest: PCI configuration mechanism #1 and the virtio 1.x PCI transport shared by
 * the virtio-rng, virtio-blk and virtio-net drivers (virtio.h).
 */
#include "virtio.h"

#define PCI_ADDR 0xCF8
#define PCI_DATA 0xCFC

static volatile u32 queue_irqs, config_irqs;

void virtio_irq(u64 vector)
{
	if (vector == VEC_VIRTQ)
		queue_irqs++;
	else
		config_irqs++;
}
u32 virtio_queue_irqs(void) { return queue_irqs; }
u32 virtio_config_irqs(void) { return config_irqs; }

/* ---- PCI configuration mechanism #1: bus 0, function 0 ---- */
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
void pci_write32(u32 dev, u32 reg, u32 v)
{
	outl(PCI_ADDR, cfg_addr(dev, reg));
	outl(PCI_DATA, v);
}
void pci_write16(u32 dev, u32 reg, u16 v)
{
	outl(PCI_ADDR, cfg_addr(dev, reg));
	outw(PCI_DATA + (reg & 2), v);
}

static const char *const error_names[VIRTIO_ERRORS] = {
	[VIRTIO_OK] = "ok",
	[VIRTIO_NO_DEVICE] = "no_device",
	[VIRTIO_CAPABILITIES] = "capabilities",
	[VIRTIO_RESET] = "reset",
	[VIRTIO_NO_VERSION_1] = "no_version_1",
	[VIRTIO_MISSING_FEATURE] = "missing_feature",
	[VIRTIO_FEATURES_OK] = "features_ok",
	[VIRTIO_NUM_QUEUES] = "num_queues",
	[VIRTIO_MSIX_CONFIG] = "msix_config",
	[VIRTIO_QUEUE_SIZE] = "queue_size",
	[VIRTIO_QUEUE_MSIX] = "queue_msix",
};
const char *virtio_error_name(enum virtio_error e) { return e < VIRTIO_ERRORS ? error_names[e] : "?"; }

static u32 find(u16 device, u32 which)
{
	for (u32 d = 0, seen = 0; d < 32; d++) {
		if (pci_read32(d, 0) != ((u32)device << 16 | 0x1af4u))
			continue;
		if (seen++ == which)
			return d;
	}
	return 32;
}

/* Sizes each BAR by writing all ones (decoding off), then restores it.  Memory BARs of 32 or 64
 * bits (QEMU's modern virtio BAR is 64-bit); an I/O BAR is skipped. */
static void map_bars(struct virtio_pci *d)
{
	u32 dev = d->slot;
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
			d->bar_size[b] = ~m + 1;
			d->bar[b] = ((u64)old_hi << 32) | (old & ~0xFu);
			d->bar_wide[b] = wide;
		}
		if (wide)
			b++;
	}
	pci_write16(dev, 4, 0x6);   /* memory space + bus master */
}

/* The capability list: MSI-X and the virtio structures (vendor-specific, id 9). */
static void walk_capabilities(struct virtio_pci *d)
{
	u32 dev = d->slot;
	for (u32 c = pci_read8(dev, 0x34) & 0xFC, guard = 0; c && guard < 48; c = pci_read8(dev, c + 1) & 0xFC, guard++) {
		u8 id = pci_read8(dev, c);
		if (id == 0x11) {
			d->msix_cap = c;
			u32 t = pci_read32(dev, c + 4);
			d->msix_table = d->bar[t & 7] + (t & ~7u);
		} else if (id == 0x09) {
			u8 type = pci_read8(dev, c + 3), bar = pci_read8(dev, c + 4);
			u64 at = d->bar[bar % 6] + pci_read32(dev, c + 8);
			if (type == 1)
				d->common = at;
			else if (type == 2) {
				d->notify = at;
				d->notify_mult = pci_read32(dev, c + 16);
			} else if (type == 3)
				d->isr = at;
			else if (type == 4)
				d->devcfg = at;
		}
	}
}

enum virtio_error virtio_pci_probe(struct virtio_pci *d, u16 device, u32 which, u32 vectors, u32 need)
{
	memset(d, 0, sizeof *d);
	d->slot = find(device, which);
	if (d->slot == 32)
		return VIRTIO_NO_DEVICE;
	map_bars(d);
	walk_capabilities(d);
	if (!d->common || !d->notify || !d->msix_cap || !d->msix_table || ((need & VIRTIO_NEED_ISR) && !d->isr) ||
	    ((need & VIRTIO_NEED_DEVCFG) && !d->devcfg))
		return VIRTIO_CAPABILITIES;
	/* Fixed delivery, edge, to this CPU: the queues on VEC_VIRTQ, configuration on VEC_VIRTCFG. */
	d->vectors = vectors;
	u32 apic = lapic_id();
	for (u32 v = 0; v < vectors; v++) {
		u64 e = d->msix_table + 16 * v;
		wr32(e, 0xFEE00000u | (apic << 12));
		wr32(e + 4, 0);
		wr32(e + 8, v + 1 < vectors ? VEC_VIRTQ : VEC_VIRTCFG);
		wr32(e + 12, 0);   /* unmask */
	}
	pci_write16(d->slot, d->msix_cap + 2, 0x8000);   /* MSI-X enable */
	return VIRTIO_OK;
}

enum virtio_error virtio_negotiate(struct virtio_pci *d, u32 want, u32 require, u16 queues)
{
	u64 c = d->common;
	wr8(c + CC_STATUS, 0);
	if (rd8(c + CC_STATUS) != 0)
		return VIRTIO_RESET;
	wr8(c + CC_STATUS, VIRTIO_STATUS_ACK);
	wr8(c + CC_STATUS, VIRTIO_STATUS_ACK | VIRTIO_STATUS_DRIVER);
	wr32(c + CC_DFSELECT, 0);
	u32 lo = rd32(c + CC_DF);
	wr32(c + CC_DFSELECT, 1);
	if (!(rd32(c + CC_DF) & 1))
		return VIRTIO_NO_VERSION_1;
	if ((lo & require) != require)
		return VIRTIO_MISSING_FEATURE;
	u32 take = lo & want;
	d->features = take | (1ull << 32);
	wr32(c + CC_GFSELECT, 0);
	wr32(c + CC_GF, take);
	wr32(c + CC_GFSELECT, 1);
	wr32(c + CC_GF, 1);   /* VIRTIO_F_VERSION_1 = bit 32 */
	wr8(c + CC_STATUS, VIRTIO_STATUS_ACK | VIRTIO_STATUS_DRIVER | VIRTIO_STATUS_FEATURES_OK);
	if (!(rd8(c + CC_STATUS) & VIRTIO_STATUS_FEATURES_OK))
		return VIRTIO_FEATURES_OK;
	if (rd16(c + CC_NUM_QUEUES) < queues)
		return VIRTIO_NUM_QUEUES;
	u16 config_vector = (u16)(d->vectors - 1);
	wr16(c + CC_MSIX_CONFIG, config_vector);
	if (rd16(c + CC_MSIX_CONFIG) != config_vector)
		return VIRTIO_MSIX_CONFIG;
	return VIRTIO_OK;
}

enum virtio_error virtio_queue_setup(struct virtio_pci *d, struct virtq *q, u16 index, u16 size, u16 vector)
{
	u64 c = d->common;
	wr16(c + CC_Q_SELECT, index);
	if (size > VIRTQ_MAX || rd16(c + CC_Q_SIZE) < size)
		return VIRTIO_QUEUE_SIZE;
	wr16(c + CC_Q_SIZE, size);
	wr16(c + CC_Q_MSIX, vector);
	if (rd16(c + CC_Q_MSIX) != vector)
		return VIRTIO_QUEUE_MSIX;
	memset(q, 0, sizeof *q);
	q->index = index;
	q->size = size;
	wr64(c + CC_Q_DESC, (u64)&q->desc);
	wr64(c + CC_Q_DRIVER, (u64)&q->avail);
	wr64(c + CC_Q_DEVICE, (u64)&q->used);
	q->notify_addr = d->notify + (u64)rd16(c + CC_Q_NOTIFY_OFF) * d->notify_mult;
	wr16(c + CC_Q_ENABLE, 1);
	/* Where the device's used index sits (guest-physical = ours): the host reads it from guest
	 * RAM to see what the device published, e.g. that nothing moves while the VM is paused. */
	event("virtio_queue slot=%u queue=%u used=%lu", d->slot, index, (u64)&q->used);
	return VIRTIO_OK;
}

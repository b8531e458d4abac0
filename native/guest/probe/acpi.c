/*
 * Unhalt probe guest: ACPI tables.
 * RSDP (start_info.rsdp_paddr, else scan 0xE0000-0xFFFFF) -> XSDT/RSDT ->
 *   MADT: LAPIC base, enabled LAPIC IDs, the IOAPIC, ISA IRQ overrides
 *   FADT: PM1a_EVT_BLK, PM1a_CNT_BLK, SCI_INT, or the HW-reduced sleep
 *         control register; DSDT
 *   DSDT: \_S5 package -> SLP_TYP
 * Table checksums are not summed (every instruction is emulated on PVM);
 * signatures and lengths are checked.
 */
#include "probe.h"

struct acpi_info acpi;

struct sdt {
	char sig[4];
	u32 length;
	u8 revision, checksum;
	char oem_id[6], oem_table_id[8];
	u32 oem_revision, creator_id, creator_revision;
} __attribute__((packed));

static u8 sum(const u8 *p, size_t n)
{
	u8 s = 0;
	while (n--)
		s += *p++;
	return s;
}

static bool rsdp_valid(u64 addr)
{
	const u8 *p = (const u8 *)addr;
	return addr && !memcmp(p, "RSD PTR ", 8) && sum(p, 20) == 0;
}

static u64 find_rsdp(const struct hvm_start_info *si)
{
	if (si && rsdp_valid(si->rsdp_paddr))
		return si->rsdp_paddr;
	for (u64 a = 0xE0000; a < 0x100000; a += 16)
		if (rsdp_valid(a))
			return a;
	return 0;
}

static const struct sdt *table_at(u64 addr)
{
	if (!addr || addr >= 0x100000000ull)
		return NULL;
	const struct sdt *t = (const struct sdt *)addr;
	return t->length >= sizeof *t && t->length < (16u << 20) ? t : NULL;
}

static u16 rd16(const u8 *p) { return (u16)(p[0] | p[1] << 8); }
static u32 rd32(const u8 *p) { return (u32)p[0] | (u32)p[1] << 8 | (u32)p[2] << 16 | (u32)p[3] << 24; }
static u64 rd64(const u8 *p) { return rd32(p) | (u64)rd32(p + 4) << 32; }

static void add_cpu(u32 apic_id)
{
	if (apic_id > 255 || acpi.ncpus >= MAX_CPUS)
		return;
	for (u32 i = 0; i < acpi.ncpus; i++)
		if (acpi.apic_ids[i] == apic_id)
			return;
	acpi.apic_ids[acpi.ncpus++] = (u8)apic_id;
}

static void parse_madt(const struct sdt *t)
{
	const u8 *p = (const u8 *)t;
	acpi.lapic_base = rd32(p + 36);
	for (u32 off = 44; off + 2 <= t->length;) {
		u8 type = p[off], len = p[off + 1];
		const u8 *e = p + off;
		if (len < 2 || off + len > t->length)
			break;
		switch (type) {
		case 0: /* Processor Local APIC: uid, id, flags (enabled bit 0) */
			if (len >= 8 && (rd32(e + 4) & 1))
				add_cpu(e[3]);
			break;
		case 1: /* I/O APIC: id, rsvd, address, GSI base */
			if (len >= 12 && !acpi.has_ioapic) {
				acpi.has_ioapic = true;
				acpi.ioapic_id = e[2];
				acpi.ioapic_base = rd32(e + 4);
				acpi.ioapic_gsi_base = rd32(e + 8);
			}
			break;
		case 2: /* Interrupt Source Override: bus, source, GSI, flags */
			if (len >= 10 && e[2] == 0 && e[3] < 16) {
				acpi.irq_gsi[e[3]] = rd32(e + 4);
				acpi.irq_flags[e[3]] = rd16(e + 8);
			}
			break;
		case 5: /* Local APIC address override */
			if (len >= 12)
				acpi.lapic_base = rd64(e + 4);
			break;
		case 9: /* Processor Local x2APIC: rsvd, id, flags, uid */
			if (len >= 16 && (rd32(e + 8) & 1))
				add_cpu(rd32(e + 4));
			break;
		}
		off += len;
	}
}

/* Find Name(_S5_, Package(){ SLP_TYPa, ... }) in the AML. */
static void parse_dsdt(const struct sdt *t)
{
	const u8 *p = (const u8 *)t;
	u32 n = t->length;
	for (u32 i = sizeof *t + 1; i + 8 < n; i++) {
		if (p[i] != '_' || memcmp(p + i, "_S5_", 4))
			continue;
		bool named = p[i - 1] == 0x08 || (p[i - 1] == '\\' && p[i - 2] == 0x08);
		if (!named || p[i + 4] != 0x12)  /* NameOp ... PackageOp */
			continue;
		u32 j = i + 5;
		j += (u32)((p[j] >> 6) & 3) + 1;  /* PkgLength */
		j += 1;                           /* NumElements */
		u8 v = p[j];
		if (v == 0x0A)                    /* BytePrefix */
			v = p[j + 1];
		else if (v == 0xFF)               /* OnesOp: not a sleep type */
			continue;
		acpi.slp_typ = v & 7;             /* ZeroOp = 0, OneOp = 1 read as is */
		acpi.s5_found = true;
		return;
	}
}

static void parse_fadt(const struct sdt *t)
{
	const u8 *p = (const u8 *)t;
	u32 len = t->length;
	u64 dsdt = len >= 44 ? rd32(p + 40) : 0;
	if (len >= 148 && rd64(p + 140))
		dsdt = rd64(p + 140);
	if (len >= 89) {
		acpi.sci_irq = rd16(p + 46);
		acpi.smi_cmd = rd32(p + 48);
		acpi.acpi_enable = p[52];
		acpi.pm1a_evt = (u16)rd32(p + 56);
		acpi.pm1_evt_len = p[88];
	}
	if (!acpi.pm1a_evt && len >= 160 && p[148] == 1 && rd64(p + 152) < 0x10000)
		acpi.pm1a_evt = (u16)rd64(p + 152);      /* X_PM1a_EVT_BLK in I/O space */
	if (len >= 68)
		acpi.pm1a_cnt = (u16)rd32(p + 64);
	if (!acpi.pm1a_cnt && len >= 184 && p[172] == 1 && rd64(p + 176) < 0x10000)
		acpi.pm1a_cnt = (u16)rd64(p + 176);      /* X_PM1a_CNT_BLK in I/O space */
	if (len >= 116)
		acpi.hw_reduced = (rd32(p + 112) >> 20) & 1;
	if (len >= 256)
		memcpy(&acpi.sleep_ctl, p + 244, sizeof acpi.sleep_ctl);
	const struct sdt *d = table_at(dsdt);
	if (d && !memcmp(d->sig, "DSDT", 4))
		parse_dsdt(d);
}

void acpi_init(const struct hvm_start_info *si)
{
	memset(&acpi, 0, sizeof acpi);
	acpi.lapic_base = 0xFEE00000;
	acpi.ioapic_base = 0xFEC00000;
	acpi.slp_typ = 5;
	for (u32 i = 0; i < 16; i++)
		acpi.irq_gsi[i] = i;

	u64 rsdp = find_rsdp(si);
	if (!rsdp)
		return;
	const u8 *r = (const u8 *)rsdp;
	acpi.rsdp = rsdp;
	u64 root = rd32(r + 16);
	u32 entry_size = 4;
	if (r[15] >= 2 && rd64(r + 24)) {
		root = rd64(r + 24);
		entry_size = 8;
	}
	const struct sdt *rt = table_at(root);
	if (!rt || memcmp(rt->sig, entry_size == 8 ? "XSDT" : "RSDT", 4))
		return;
	acpi.found = true;
	const u8 *ents = (const u8 *)rt + sizeof *rt;
	u32 n = (rt->length - (u32)sizeof *rt) / entry_size;
	for (u32 i = 0; i < n; i++) {
		u64 a = entry_size == 8 ? rd64(ents + i * 8) : rd32(ents + i * 4);
		const struct sdt *t = table_at(a);
		if (!t)
			continue;
		if (!memcmp(t->sig, "APIC", 4))
			parse_madt(t);
		else if (!memcmp(t->sig, "FACP", 4))
			parse_fadt(t);
	}
}

/*
 * The ACPI power button (fixed hardware): PWRBTN_EN in PM1a_EN, the SCI
 * routed through the IOAPIC to the BSP.  Not on a HW-reduced FADT (QEMU
 * microvm: no PM1 event block) or without an IOAPIC.
 */
#define PM1_PWRBTN (1u << 8)   /* in PM1_STS and PM1_EN */
#define PM1_SCI_EN 1u          /* in PM1_CNT */

static u16 pm1a_en(void) { return (u16)(acpi.pm1a_evt + acpi.pm1_evt_len / 2); }

void acpi_power_button_init(void)
{
	if (!acpi.found || acpi.hw_reduced || !acpi.pm1a_evt || acpi.pm1_evt_len < 4 || !acpi.has_ioapic ||
	    acpi.sci_irq >= 16)
		return;
	/* SMI_CMD 0 (ours): always in ACPI mode.  Otherwise ask the firmware to switch. */
	if (acpi.smi_cmd && acpi.acpi_enable && acpi.pm1a_cnt && !(inw(acpi.pm1a_cnt) & PM1_SCI_EN)) {
		outb((u16)acpi.smi_cmd, acpi.acpi_enable);
		u64 end = slow_host_deadline_us(100000);
		while (!(inw(acpi.pm1a_cnt) & PM1_SCI_EN) && rdtsc() < end)
			cpu_relax();
	}
	/*
	 * The SCI is level triggered, active low unless the MADT's interrupt
	 * source override says otherwise (ours: level, active high).  Flags 0
	 * ("conforms to the bus") mean the SCI's defaults, not ISA's.
	 */
	u16 fl = acpi.irq_flags[acpi.sci_irq];
	bool active_low = (fl & 3) != 1;
	bool level = ((fl >> 2) & 3) != 1;
	outw(acpi.pm1a_evt, PM1_PWRBTN);   /* a stale press from before boot is not a request */
	ioapic_route_gsi(acpi.irq_gsi[acpi.sci_irq], VEC_SCI, cpus[0].apic_id, level, active_low);
	outw(pm1a_en(), (u16)(inw(pm1a_en()) | PM1_PWRBTN));
	acpi.power_button = true;
}

/* The SCI handler (interrupt context, any scenario that waits with interrupts on). */
void acpi_sci(void)
{
	u16 sts = inw(acpi.pm1a_evt) & inw(pm1a_en());
	if (sts & PM1_PWRBTN) {
		outw(acpi.pm1a_evt, PM1_PWRBTN);   /* write 1 to clear */
		/* The interrupted code held no lock (handlers run only from waits), but be safe. */
		serial_panic_write(COM1, "power button\n");
		serial_panic_write(COM2, "@u1 powerbutton\n");
		power_off();
	}
	if (sts)
		outw(acpi.pm1a_evt, sts);   /* anything else enabled: ack, or the level SCI fires forever */
}

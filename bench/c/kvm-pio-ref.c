/*
 * kvm-pio-ref: the reference for bench/pio-exit.ts — the smallest C program that drives KVM
 * directly and boots the probe guest's `pio` scenario through its PVH entry, so that the cost
 * of one PIO exit round trip (guest `out` -> KVM_EXIT_IO -> this loop -> KVM_RUN) can be
 * compared with Unhalt's vCPU worker on the same guest, timed by the guest itself.
 *
 *   kvm-pio-ref [-v] [-m MiB] [-s mmio] PROBE_ELF [COUNT] [PORT | ADDR]
 *
 * One vCPU, one memory slot, no ACPI tables (rsdp_paddr 0: the probe scans 0xE0000-0xFFFFF,
 * finds nothing and assumes one CPU). The guest command line is
 * "scenario=pio count=COUNT port=PORT unhalt.pvm=1" when /sys/module/kvm_pvm exists, without the
 * last word otherwise. -s mmio runs the `mmio` scenario instead ("scenario=mmio count=COUNT
 * addr=ADDR"; ADDR defaults to the guest's own unmapped-MMIO default): every read is a
 * KVM_EXIT_MMIO that this loop answers with all ones, as an empty bus does.
 * stdout: one line "TSC_CYCLES COUNT TSC_KHZ" from the guest's `@u1 pio` (or `@u1 mmio`) and
 * `@u1 boot` lines.
 * -v: ttyS0 and ttyS1 bytes go to stderr. Exit status 0 when the guest powered off after its
 * `@u1 pio` line, 2 when the VM failed, 1 on bad input or setup errors.
 *
 * Written for this benchmark from the KVM API documentation (Documentation/virt/kvm/api.rst) and
 * the PVH boot ABI (xen/include/public/arch-x86/hvm/start_info.h).
 */
#define _GNU_SOURCE
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/kvm.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define START_INFO 0x6000
#define MEMMAP 0x7000
#define CMDLINE 0x20000
#define GDT_ADDR 0x500
#define TSS_ADDR 0xfffbd000
#define IDENTITY_MAP_ADDR 0xfffbc000
#define LOW_END 0x9fc00
#define XEN_ELFNOTE_PHYS32_ENTRY 18
#define HVM_START_MAGIC 0x336ec578

struct hvm_start_info {
	uint32_t magic, version, flags, nr_modules;
	uint64_t modlist_paddr, cmdline_paddr, rsdp_paddr, memmap_paddr;
	uint32_t memmap_entries, reserved;
};
struct hvm_memmap_entry {
	uint64_t addr, size;
	uint32_t type, reserved;
};

static int verbose;

static void die(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fputs("kvm-pio-ref: ", stderr);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

static int xioctl(int fd, unsigned long req, void *arg, const char *name)
{
	int r = ioctl(fd, req, arg);
	if (r < 0)
		die("%s: %s", name, strerror(errno));
	return r;
}
#define IOCTL(fd, req, arg) xioctl((fd), (req), (void *)(arg), #req)

/* ---- the guest image ---- */

static uint8_t *read_file(const char *path, size_t *len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0)
		die("%s: %s", path, strerror(errno));
	uint8_t *buf = malloc(st.st_size ? st.st_size : 1);
	size_t got = 0;
	while (got < (size_t)st.st_size) {
		ssize_t n = read(fd, buf + got, st.st_size - got);
		if (n <= 0)
			die("%s: short read", path);
		got += n;
	}
	close(fd);
	*len = got;
	return buf;
}

/* Scans a note area for the Xen PHYS32_ENTRY note; returns 0 if absent. */
static uint32_t find_pvh_entry(const uint8_t *p, size_t len)
{
	size_t off = 0;
	while (off + 12 <= len) {
		uint32_t namesz, descsz, type;
		memcpy(&namesz, p + off, 4);
		memcpy(&descsz, p + off + 4, 4);
		memcpy(&type, p + off + 8, 4);
		size_t name = off + 12, desc = name + ((namesz + 3) & ~3u);
		if (desc + descsz > len)
			break;
		if (type == XEN_ELFNOTE_PHYS32_ENTRY && namesz == 4 && !memcmp(p + name, "Xen", 4) && descsz >= 4) {
			uint32_t e;
			memcpy(&e, p + desc, 4);
			return e;
		}
		off = desc + ((descsz + 3) & ~3u);
	}
	return 0;
}

/* Copies PT_LOAD segments to guest memory at p_paddr (the rest of p_memsz stays zero);
 * returns the PVH entry point. ELF64 and ELF32. */
static uint32_t load_elf(const uint8_t *f, size_t len, uint8_t *ram, uint64_t ram_size)
{
	if (len < EI_NIDENT || memcmp(f, ELFMAG, SELFMAG))
		die("the guest is not an ELF file");
	int is64 = f[EI_CLASS] == ELFCLASS64;
	uint64_t phoff, phnum, phentsize;
	if (is64) {
		const Elf64_Ehdr *eh = (const void *)f;
		phoff = eh->e_phoff, phnum = eh->e_phnum, phentsize = eh->e_phentsize;
	} else {
		const Elf32_Ehdr *eh = (const void *)f;
		phoff = eh->e_phoff, phnum = eh->e_phnum, phentsize = eh->e_phentsize;
	}
	uint32_t entry = 0;
	for (uint64_t i = 0; i < phnum; i++) {
		if (phoff + (i + 1) * phentsize > len)
			die("truncated program headers");
		const uint8_t *ph = f + phoff + i * phentsize;
		uint64_t type, off, paddr, filesz, memsz;
		if (is64) {
			const Elf64_Phdr *h = (const void *)ph;
			type = h->p_type, off = h->p_offset, paddr = h->p_paddr, filesz = h->p_filesz, memsz = h->p_memsz;
		} else {
			const Elf32_Phdr *h = (const void *)ph;
			type = h->p_type, off = h->p_offset, paddr = h->p_paddr, filesz = h->p_filesz, memsz = h->p_memsz;
		}
		if (off + filesz > len)
			die("segment %llu lies outside the file", (unsigned long long)i);
		if (type == PT_LOAD) {
			if (paddr + memsz > ram_size || filesz > memsz)
				die("segment %llu does not fit in guest memory", (unsigned long long)i);
			memcpy(ram + paddr, f + off, filesz);
		} else if (type == PT_NOTE && !entry) {
			entry = find_pvh_entry(f + off, filesz);
		}
	}
	if (!entry)
		die("no XEN_ELFNOTE_PHYS32_ENTRY note: not a PVH kernel");
	return entry;
}

/* ---- vCPU set-up ---- */

static void set_cpuid(int kvm, int vcpu)
{
	int nent = 256;
	struct kvm_cpuid2 *c;
	for (;;) {
		c = calloc(1, sizeof *c + (nent + 2) * sizeof c->entries[0]);
		c->nent = nent;
		if (ioctl(kvm, KVM_GET_SUPPORTED_CPUID, c) == 0)
			break;
		if (errno != E2BIG)
			die("KVM_GET_SUPPORTED_CPUID: %s", strerror(errno));
		free(c);
		nent *= 2;
	}
	int have_sig = 0;
	for (uint32_t i = 0; i < c->nent; i++) {
		struct kvm_cpuid_entry2 *e = &c->entries[i];
		if (e->function == 1) {
			e->ebx &= 0x00ffffff;     /* initial APIC ID 0 */
			e->ecx |= 1u << 31;       /* hypervisor present */
		} else if (e->function == 0x40000000) {
			have_sig = 1;
		}
	}
	if (!have_sig) {
		struct kvm_cpuid_entry2 *e = &c->entries[c->nent++];
		memset(e, 0, sizeof *e);
		e->function = 0x40000000;
		e->eax = 0x40000001;
		memcpy(&e->ebx, "KVMKVMKVM\0\0\0", 12);
		int have_features = 0;
		for (uint32_t i = 0; i + 1 < c->nent; i++)
			have_features |= c->entries[i].function == 0x40000001;
		if (!have_features) {
			e = &c->entries[c->nent++];
			memset(e, 0, sizeof *e);
			e->function = 0x40000001;
		}
	}
	IOCTL(vcpu, KVM_SET_CPUID2, c);
	free(c);
}

static void set_boot_state(int vcpu, uint8_t *ram, uint32_t entry)
{
	/* null, null, 0x10 code32, 0x18 data32, 0x20 32-bit TSS (flat, as in Linux's boot GDT) */
	static const uint64_t gdt[] = { 0, 0, 0x00cf9b000000ffffull, 0x00cf93000000ffffull, 0x00008b0000000067ull };
	memcpy(ram + GDT_ADDR, gdt, sizeof gdt);

	struct kvm_sregs s;
	IOCTL(vcpu, KVM_GET_SREGS, &s);
	struct kvm_segment code = { .base = 0, .limit = 0xffffffff, .selector = 0x10, .type = 0xb,
	                            .present = 1, .dpl = 0, .db = 1, .s = 1, .l = 0, .g = 1 };
	struct kvm_segment data = code;
	data.selector = 0x18;
	data.type = 0x3;
	struct kvm_segment tr = { .base = 0, .limit = 0x67, .selector = 0x20, .type = 11, .present = 1 };
	s.cs = code;
	s.ds = s.es = s.fs = s.gs = s.ss = data;
	s.tr = tr;
	s.gdt.base = GDT_ADDR;
	s.gdt.limit = sizeof gdt - 1;
	s.idt.base = 0;
	s.idt.limit = 0;
	s.cr0 = (s.cr0 | 0x1 /* PE */ | 0x10 /* ET */) & ~0x80000000ull /* PG */;
	IOCTL(vcpu, KVM_SET_SREGS, &s);

	struct kvm_regs r;
	memset(&r, 0, sizeof r);
	r.rip = entry;
	r.rbx = START_INFO;
	r.rflags = 0x2;
	IOCTL(vcpu, KVM_SET_REGS, &r);

	struct kvm_fpu fpu;
	memset(&fpu, 0, sizeof fpu);
	fpu.fcw = 0x37f;
	fpu.mxcsr = 0x1f80;
	IOCTL(vcpu, KVM_SET_FPU, &fpu);
}

/* ---- ports ---- */

struct uart {
	uint16_t base;
	uint8_t lcr;
	char line[512];
	size_t len;
};

static struct uart com1 = { .base = 0x3f8 }, com2 = { .base = 0x2f8 };
static unsigned long long pio_cycles, pio_count, tsc_khz;
static int have_pio;
/* The timed scenario's event prefix: "@u1 pio " or "@u1 mmio ". */
static char scenario_event[16] = "@u1 pio ";

static void ttyS1_line(const char *l)
{
	const char *p;
	if (!strncmp(l, scenario_event, strlen(scenario_event))) {
		if ((p = strstr(l, " count=")))
			pio_count = strtoull(p + 7, NULL, 10);
		if ((p = strstr(l, " tsc_cycles=")))
			pio_cycles = strtoull(p + 12, NULL, 10);
		have_pio = 1;
	} else if (!strncmp(l, "@u1 boot ", 9) && (p = strstr(l, " tsc_khz="))) {
		tsc_khz = strtoull(p + 9, NULL, 10);
	}
}

static void uart_write(struct uart *u, unsigned reg, uint8_t v)
{
	if (reg == 3) {
		u->lcr = v;
		return;
	}
	if (reg != 0 || (u->lcr & 0x80)) /* registers other than THR, or the divisor latch */
		return;
	if (verbose)
		fputc(v, stderr);
	if (u == &com2) {
		if (v == '\n' || u->len == sizeof u->line - 1) {
			u->line[u->len] = 0;
			ttyS1_line(u->line);
			u->len = 0;
		} else {
			u->line[u->len++] = (char)v;
		}
	}
}

enum { RUN_ON, RUN_POWEROFF };

/* Returns RUN_POWEROFF when the guest asked to power off. */
static int handle_io(struct kvm_run *run)
{
	uint8_t *data = (uint8_t *)run + run->io.data_offset;
	uint16_t port = run->io.port;
	if (run->io.direction == KVM_EXIT_IO_OUT) {
		if (port == 0x80) /* the pio scenario's target: ignored */
			return RUN_ON;
		for (uint32_t i = 0; i < run->io.count; i++, data += run->io.size) {
			if (port >= 0x3f8 && port <= 0x3ff)
				uart_write(&com1, port - 0x3f8, data[0]);
			else if (port >= 0x2f8 && port <= 0x2ff)
				uart_write(&com2, port - 0x2f8, data[0]);
			else if ((port == 0x64 && data[0] == 0xfe) || port == 0xf4 || port == 0x604)
				return RUN_POWEROFF; /* i8042 reset, isa-debug-exit, ACPI PM1a_CNT */
		}
	} else {
		for (uint32_t i = 0; i < run->io.count; i++, data += run->io.size) {
			int uart_lsr = port == 0x3fd || port == 0x2fd;
			memset(data, uart_lsr ? 0x00 : 0xff, run->io.size);
			if (uart_lsr)
				data[0] = 0x60; /* THRE | TEMT: always ready */
		}
	}
	return RUN_ON;
}

int main(int argc, char **argv)
{
	uint64_t mem_mib = 64;
	int opt, mmio = 0;
	const char *usage = "usage: kvm-pio-ref [-v] [-m MiB] [-s mmio] PROBE_ELF [COUNT] [PORT | ADDR]";
	while ((opt = getopt(argc, argv, "vm:s:")) != -1) {
		if (opt == 'v')
			verbose = 1;
		else if (opt == 'm')
			mem_mib = strtoull(optarg, NULL, 0);
		else if (opt == 's' && (!strcmp(optarg, "mmio") || !strcmp(optarg, "pio")))
			mmio = !strcmp(optarg, "mmio");
		else
			die("%s", usage);
	}
	if (optind >= argc)
		die("%s", usage);
	const char *elf = argv[optind];
	unsigned long long count = optind + 1 < argc ? strtoull(argv[optind + 1], NULL, 0) : 100000;
	unsigned long long port = optind + 2 < argc ? strtoull(argv[optind + 2], NULL, 0) : mmio ? 0xD0000000ull : 0x80;
	if (mmio)
		strcpy(scenario_event, "@u1 mmio ");
	if (mem_mib < 16 || mem_mib > 3072)
		die("memory must be 16..3072 MiB");
	uint64_t ram_size = mem_mib << 20;

	int kvm = open("/dev/kvm", O_RDWR | O_CLOEXEC);
	if (kvm < 0)
		die("/dev/kvm: %s", strerror(errno));
	if (ioctl(kvm, KVM_GET_API_VERSION, 0) != KVM_API_VERSION)
		die("unexpected KVM API version");
	int vm = IOCTL(kvm, KVM_CREATE_VM, 0);
	IOCTL(vm, KVM_SET_TSS_ADDR, TSS_ADDR);
	uint64_t idmap = IDENTITY_MAP_ADDR;
	IOCTL(vm, KVM_SET_IDENTITY_MAP_ADDR, &idmap);
	IOCTL(vm, KVM_CREATE_IRQCHIP, 0);
	struct kvm_pit_config pit = { .flags = 0 };
	IOCTL(vm, KVM_CREATE_PIT2, &pit);

	/* Anonymous memory is zero: the 0xE0000-0xFFFFF RSDP scan finds nothing, .bss is clear. */
	uint8_t *ram = mmap(NULL, ram_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (ram == MAP_FAILED)
		die("mmap guest memory: %s", strerror(errno));
	struct kvm_userspace_memory_region region = {
		.slot = 0, .flags = 0, .guest_phys_addr = 0, .memory_size = ram_size, .userspace_addr = (uintptr_t)ram,
	};
	IOCTL(vm, KVM_SET_USER_MEMORY_REGION, &region);

	size_t elf_len;
	uint8_t *image = read_file(elf, &elf_len);
	uint32_t entry = load_elf(image, elf_len, ram, ram_size);
	free(image);

	char *cmdline = (char *)ram + CMDLINE;
	snprintf(cmdline, 4096, "scenario=%s count=%llu %s=%llu%s", mmio ? "mmio" : "pio", count, mmio ? "addr" : "port", port,
	         access("/sys/module/kvm_pvm", F_OK) == 0 ? " unhalt.pvm=1" : "");
	struct hvm_memmap_entry *mm = (void *)(ram + MEMMAP);
	mm[0] = (struct hvm_memmap_entry){ .addr = 0, .size = LOW_END, .type = 1 };
	mm[1] = (struct hvm_memmap_entry){ .addr = 0x100000, .size = ram_size - 0x100000, .type = 1 };
	struct hvm_start_info *si = (void *)(ram + START_INFO);
	*si = (struct hvm_start_info){
		.magic = HVM_START_MAGIC, .version = 1, .cmdline_paddr = CMDLINE, .rsdp_paddr = 0,
		.memmap_paddr = MEMMAP, .memmap_entries = 2,
	};

	int vcpu = IOCTL(vm, KVM_CREATE_VCPU, 0);
	int run_size = IOCTL(kvm, KVM_GET_VCPU_MMAP_SIZE, 0);
	struct kvm_run *run = mmap(NULL, run_size, PROT_READ | PROT_WRITE, MAP_SHARED, vcpu, 0);
	if (run == MAP_FAILED)
		die("mmap kvm_run: %s", strerror(errno));
	set_cpuid(kvm, vcpu);
	set_boot_state(vcpu, ram, entry);

	for (;;) {
		if (ioctl(vcpu, KVM_RUN, 0) < 0) {
			if (errno == EINTR || errno == EAGAIN)
				continue;
			fprintf(stderr, "kvm-pio-ref: KVM_RUN: %s\n", strerror(errno));
			return 2;
		}
		switch (run->exit_reason) {
		case KVM_EXIT_IO:
			if (handle_io(run) == RUN_POWEROFF)
				goto done;
			break;
		case KVM_EXIT_MMIO:
			if (!run->mmio.is_write)
				memset(run->mmio.data, 0xff, sizeof run->mmio.data);
			break;
		case KVM_EXIT_HLT:
			fprintf(stderr, "kvm-pio-ref: the guest halted for good\n");
			return 2;
		case KVM_EXIT_SHUTDOWN:
			fprintf(stderr, "kvm-pio-ref: triple fault (KVM_EXIT_SHUTDOWN)\n");
			return 2;
		case KVM_EXIT_INTERNAL_ERROR:
			fprintf(stderr, "kvm-pio-ref: KVM_EXIT_INTERNAL_ERROR, suberror %u\n", run->internal.suberror);
			return 2;
		case KVM_EXIT_FAIL_ENTRY:
			fprintf(stderr, "kvm-pio-ref: KVM_EXIT_FAIL_ENTRY, reason 0x%llx\n",
			        (unsigned long long)run->fail_entry.hardware_entry_failure_reason);
			return 2;
		default:
			fprintf(stderr, "kvm-pio-ref: unexpected exit reason %u\n", run->exit_reason);
			return 2;
		}
	}
done:
	if (!have_pio) {
		fprintf(stderr, "kvm-pio-ref: the guest powered off without an \"%.*s\" line\n", (int)strlen(scenario_event) - 1, scenario_event);
		return 2;
	}
	printf("%llu %llu %llu\n", pio_cycles, pio_count, tsc_khz);
	return 0;
}

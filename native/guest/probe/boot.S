/*
 * Unhalt probe guest: PVH entry, long-mode switch, AP trampoline,
 * exception/interrupt stubs.
 *
 * PVH entry state: 32-bit protected mode, paging off, flat CS/DS/ES/SS,
 * %ebx = physical address of struct hvm_start_info.
 *
 * Everything here runs in (on PVM: emulated) ring 0, so it avoids what the
 * PVM emulator lacks: no 32-bit iret, no int3, no cmpxchg16b, no xsave.
 */

#include "config.h"

#define SEL_CODE32 0x08
#define SEL_DATA   0x10
#define SEL_CODE64 0x18

#define CR0_PE     0x00000001
#define CR0_PG     0x80000000
#define CR4_PAE    0x00000020
#define MSR_EFER   0xC0000080
#define EFER_LME   0x00000100

/* ---------------------------------------------------------------------
 * PVH note: XEN_ELFNOTE_PHYS32_ENTRY (18), name "Xen", 32-bit entry.
 * The note segment must be 4-byte aligned (QEMU pads the name to p_align).
 */
	.section .note.Xen, "a", @note
	.balign 4
	.long 4                 /* namesz */
	.long 4                 /* descsz */
	.long 18                /* XEN_ELFNOTE_PHYS32_ENTRY */
	.asciz "Xen"
	.long pvh_entry

/* ---------------------------------------------------------------------
 * 32-bit entry (BSP from PVH, APs from the trampoline)
 */
	.section .text.boot, "ax"
	.code32
	.globl pvh_entry
pvh_entry:
	cli
	cld
	movl %ebx, boot_start_info
	lgdt gdt_desc
	ljmp $SEL_CODE32, $1f
1:	movl $SEL_DATA, %eax
	movl %eax, %ds
	movl %eax, %es
	movl %eax, %ss
	movl %eax, %fs
	movl %eax, %gs
	xorl %esi, %esi                 /* %esi = 0: bootstrap processor */
	jmp to_long_mode

	.globl ap_entry32
ap_entry32:                             /* from the trampoline, GDT loaded */
	movl $SEL_DATA, %eax
	movl %eax, %ds
	movl %eax, %es
	movl %eax, %ss
	movl %eax, %fs
	movl %eax, %gs
	movl $1, %esi                   /* %esi = 1: application processor */

to_long_mode:
	movl %cr4, %eax
	orl $CR4_PAE, %eax
	movl %eax, %cr4
	movl $pml4, %eax
	movl %eax, %cr3
	movl $MSR_EFER, %ecx
	rdmsr
	orl $EFER_LME, %eax
	wrmsr
	movl %cr0, %eax
	orl $(CR0_PG | CR0_PE), %eax
	movl %eax, %cr0
	ljmp $SEL_CODE64, $entry64

	.code64
entry64:
	movl $SEL_DATA, %eax
	movl %eax, %ds
	movl %eax, %es
	movl %eax, %ss
	xorl %eax, %eax
	movl %eax, %fs
	movl %eax, %gs
	testl %esi, %esi
	jnz 2f

	/* BSP: stack, C. The BSS is zero already: an ELF loader zero-fills
	 * what a PT_LOAD has beyond its file bytes (ours in pvh.ts, from a
	 * fresh boot's untouched RAM; QEMU's at every reset). Zeroing it here
	 * again would touch its ~330 pages, each a first-touch fault, ~20 ms
	 * on a PVM host before the first line. */
	movq $bsp_stack_top, %rsp
	call probe_main
	jmp halt_forever

2:	/* AP: stack from ap_stack_tops[initial APIC ID] */
	movl $1, %eax
	cpuid
	shrl $24, %ebx
	movq ap_stack_tops(, %rbx, 8), %rsp
	testq %rsp, %rsp
	jz halt_forever
	call ap_main
	jmp halt_forever

	.globl halt_forever
halt_forever:
	cli
3:	hlt
	jmp 3b

	.globl triple_fault
triple_fault:
	lidt idt_null
	ud2
	jmp triple_fault

/* ---------------------------------------------------------------------
 * cpu_wait: call with IF=0.  sti;hlt sleeps until an interrupt; the
 * interrupt stub sees the saved RIP == cpu_wait_resume and, instead of
 * iretq (slow on PVM), drops the frame and jumps to cpu_wait_resume with
 * the pre-interrupt %rsp: we return with IF=0 (interrupt gate).  Only
 * caller-saved registers are clobbered, which a call allows anyway.
 */
	.text
	.globl cpu_wait, cpu_wait_resume
cpu_wait:
	sti
	hlt
cpu_wait_resume:
	cli
	ret

/* ---------------------------------------------------------------------
 * Exceptions 0..31: push (error code or 0), vector; save all GPRs; call
 * exception_handler(struct exc_frame *).  It never returns.
 */
	.macro EXC vec, err
	.balign 16
exc_\vec:
	.if \err == 0
	pushq $0
	.endif
	pushq $\vec
	jmp exc_common
	.endm

	.irp v, 0,1,2,3,4,5,6,7,9,15,16,18,19,20,22,23,24,25,26,27,28,31
	EXC \v, 0
	.endr
	.irp v, 8,10,11,12,13,14,17,21,29,30
	EXC \v, 1
	.endr

exc_common:
	pushq %rax
	pushq %rbx
	pushq %rcx
	pushq %rdx
	pushq %rsi
	pushq %rdi
	pushq %rbp
	pushq %r8
	pushq %r9
	pushq %r10
	pushq %r11
	pushq %r12
	pushq %r13
	pushq %r14
	pushq %r15
	movq %rsp, %rdi
	andq $-16, %rsp
	call exception_handler
	jmp halt_forever

	.section .rodata
	.balign 8
	.globl exc_stubs
exc_stubs:
	.irp v, 0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31
	.quad exc_\v
	.endr

/* ---------------------------------------------------------------------
 * Interrupts: push vector, save caller-saved registers, call
 * irq_dispatch(vector).  Fast return to cpu_wait_resume when the
 * interrupt woke a cpu_wait (see above), else restore and iretq.
 * Frame after the pushes: 9 regs (72 bytes), vector @72, rip @80,
 * cs @88, rflags @96, rsp @104, ss @112.
 */
	.text
	.macro IRQ name, vec
	.globl irq_stub_\name
	.balign 16
irq_stub_\name:
	pushq $\vec
	jmp irq_common
	.endm

	IRQ uart0, VEC_UART0
	IRQ sci, VEC_SCI
	IRQ timer, VEC_TIMER
	IRQ wake, VEC_WAKE
	IRQ spurious, VEC_SPURIOUS
	IRQ virtq, VEC_VIRTQ
	IRQ virtcfg, VEC_VIRTCFG

irq_common:
	pushq %rax
	pushq %rcx
	pushq %rdx
	pushq %rsi
	pushq %rdi
	pushq %r8
	pushq %r9
	pushq %r10
	pushq %r11
	movq 72(%rsp), %rdi
	/* The CPU aligned %rsp to 16 before its 5-qword frame: now %rsp = 8 mod 16. */
	subq $8, %rsp
	call irq_dispatch
	addq $8, %rsp
	movq $cpu_wait_resume, %rax
	cmpq %rax, 80(%rsp)
	jne 4f
	movq 104(%rsp), %rsp            /* back to cpu_wait's stack, IF stays 0 */
	jmp cpu_wait_resume
4:	popq %r11
	popq %r10
	popq %r9
	popq %r8
	popq %rdi
	popq %rsi
	popq %rdx
	popq %rcx
	popq %rax
	addq $8, %rsp
	iretq

/* ---------------------------------------------------------------------
 * Real-mode AP trampoline.  Copied to a free page below 1 MiB; the SIPI
 * vector is that page number, so it starts at CS = page << 8, IP = 0.
 * Only CS-relative references inside it; the GDT and ap_entry32 are at
 * their linked (identity) addresses.
 */
	.section .rodata
	.balign 16
	.code16
	.globl trampoline_start, trampoline_end
trampoline_start:
	cli
	cld
	lgdtl %cs:(tramp_gdt_desc - trampoline_start)
	movl %cr0, %eax
	orl $CR0_PE, %eax
	movl %eax, %cr0
	ljmpl $SEL_CODE32, $ap_entry32
	.balign 8
tramp_gdt_desc:
	.word gdt_end - gdt - 1
	.long gdt
trampoline_end:
	.code64

/* ---------------------------------------------------------------------
 * GDT and page tables (static: nothing to build at boot on a slow CPU).
 */
	.section .data
	.balign 16
gdt:
	.quad 0
	.quad 0x00cf9a000000ffff        /* 0x08: 32-bit code, flat */
	.quad 0x00cf92000000ffff        /* 0x10: data, flat */
	.quad 0x00af9a000000ffff        /* 0x18: 64-bit code */
gdt_end:
	.balign 8
	.word 0
	.globl gdt_desc
gdt_desc:
	.word gdt_end - gdt - 1
	.quad gdt
	.balign 8
	.word 0
idt_null:
	.word 0
	.quad 0

	.balign 4
	.globl boot_start_info
boot_start_info:
	.long 0

	.balign 8
	.globl ap_stack_tops
ap_stack_tops:
	.fill 256, 8, 0

/* Identity map of the first 4 GiB with 2 MiB pages; 3-4 GiB (LAPIC,
 * IOAPIC, other MMIO) uncached (PCD|PWT). */
#define PTE_P   0x001
#define PTE_W   0x002
#define PTE_PS  0x080
#define PTE_UC  0x018
	.section .data.pagetables, "aw"
	.balign 4096
pml4:
	.quad pdpt + (PTE_P | PTE_W)
	.fill 511, 8, 0
pdpt:
	.quad pd + 0x0000 + (PTE_P | PTE_W)
	.quad pd + 0x1000 + (PTE_P | PTE_W)
	.quad pd + 0x2000 + (PTE_P | PTE_W)
	.quad pd + 0x3000 + (PTE_P | PTE_W)
	.fill 508, 8, 0
pd:
	.set i, 0
	.rept 1536
	.quad (i << 21) | (PTE_P | PTE_W | PTE_PS)
	.set i, i + 1
	.endr
	.rept 512
	.quad (i << 21) | (PTE_P | PTE_W | PTE_PS | PTE_UC)
	.set i, i + 1
	.endr

/* Stacks: not part of the file and not zeroed. */
	.section .stacks, "aw", @nobits
	.balign 4096
	.globl stacks
stacks:
	.skip STACK_SIZE * MAX_CPUS
	.globl bsp_stack_top
bsp_stack_top = stacks + STACK_SIZE

/* Unhalt probe guest: constants shared by C and assembly. */
#ifndef PROBE_CONFIG_H
#define PROBE_CONFIG_H

#define MAX_CPUS 64
#define STACK_SIZE 16384

/* Interrupt vectors */
#define VEC_UART0 0x24    /* ttyS0 RX via IOAPIC pin 4 */
#define VEC_SCI 0x29      /* ACPI SCI (ISA IRQ 9) via the IOAPIC, level */
#define VEC_TIMER 0x40    /* LAPIC timer */
#define VEC_WAKE 0x50     /* IPI: "look at your mailbox"; also the ipi ping-pong and spinlock kicks */
#define VEC_VIRTQ 0x60    /* MSI-X vector 0 of the virtio-rng scenario: used buffers */
#define VEC_VIRTCFG 0x61  /* MSI-X vector 1: configuration change (DEVICE_NEEDS_RESET) */
#define VEC_SPURIOUS 0xFF

#endif

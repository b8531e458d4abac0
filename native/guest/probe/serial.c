/*
 * Unhalt probe guest: 16550 UARTs.
 *   ttyS0 (0x3F8): human text, CRLF line ends; RX interrupt-driven (IRQ4).
 *   ttyS1 (0x2F8): "@u1 EVENT key=value..." lines, LF line ends.
 * Transmit is polled: wait for LSR.THRE, then write up to a FIFO's worth
 * (16 bytes on a 16550A whose FIFO is on, else 1; see uart_init).  Every line goes out whole under
 * one spinlock, so CPUs never interleave.  Handlers never print (except the
 * fault path, which uses serial_panic_write), so holding the lock with
 * interrupts disabled cannot deadlock.
 */
#include "probe.h"

#define UART_RBR 0
#define UART_THR 0
#define UART_IER 1
#define UART_DLL 0
#define UART_DLM 1
#define UART_FCR 2
#define UART_IIR 2
#define UART_LCR 3
#define UART_MCR 4
#define UART_LSR 5

#define LSR_DR 0x01
#define LSR_THRE 0x20

static spinlock_t tx_lock;
static u8 tx_burst[2];   /* [0] ttyS0, [1] ttyS1: bytes per THRE */

/* ttyS0 input: IRQ4 -> ring buffer (one writer: the BSP's handler or poll) */
static volatile u8 rx_buf[256];
static volatile u32 rx_head, rx_tail;   /* head: written by the IRQ, tail: by the reader */

static void rx_push(u8 c)
{
	u32 h = rx_head;
	if (h - rx_tail < sizeof rx_buf) {
		rx_buf[h % sizeof rx_buf] = c;
		rx_head = h + 1;
	}
}

/*
 * Turning a 16550's FIFO on empties it, and the VMM may already hold input
 * typed before we boot, so the FIFO stays as we find it on ttyS0 (off after
 * reset: one byte per THRE).  ttyS1 only transmits: FIFO on.
 */
static u8 uart_init(u16 base, bool fifo)
{
	outb(base + UART_IER, 0x00);
	outb(base + UART_LCR, 0x80);   /* DLAB */
	outb(base + UART_DLL, 0x01);   /* 115200 baud */
	outb(base + UART_DLM, 0x00);
	outb(base + UART_LCR, 0x03);   /* 8N1 */
	if (fifo)
		outb(base + UART_FCR, 0x07);   /* FIFOs on and cleared */
	outb(base + UART_MCR, 0x03);   /* DTR | RTS */
	return (inb(base + UART_IIR) & 0xC0) == 0xC0 ? 16 : 1;   /* FIFO enabled? */
}

void serial_init(void)
{
	tx_burst[0] = uart_init(COM1, false);
	tx_burst[1] = uart_init(COM2, true);
}

struct tx {
	u16 base;
	u8 room;   /* bytes we may write before looking at THRE again */
	u8 burst;
};

static void uart_putc(struct tx *t, char c)
{
	if (!t->room) {
		/* Bounded wait: a missing UART reads 0xFF (THRE set) anyway. */
		if (!(inb(t->base + UART_LSR) & LSR_THRE))
			for (u64 end = slow_host_deadline_us(10000); !(inb(t->base + UART_LSR) & LSR_THRE) && rdtsc() < end;)
				cpu_relax();
		t->room = t->burst;
	}
	outb(t->base + UART_THR, (u8)c);
	t->room--;
}

static void uart_write(u16 base, const char *s, size_t n, bool crlf)
{
	struct tx t = { base, 0, tx_burst[base == COM2] ? tx_burst[base == COM2] : 1 };
	for (size_t i = 0; i < n; i++) {
		if (s[i] == '\n' && crlf)
			uart_putc(&t, '\r');
		uart_putc(&t, s[i]);
	}
}

void con_write(const char *s, size_t n)
{
	spin_lock(&tx_lock);
	uart_write(COM1, s, n, true);
	spin_unlock(&tx_lock);
}

void con_printf(const char *f, ...)
{
	char buf[512];
	va_list ap;
	va_start(ap, f);
	int n = vfmt(buf, sizeof buf, f, ap);
	va_end(ap);
	if (n > (int)sizeof buf - 1)
		n = sizeof buf - 1;
	con_write(buf, (size_t)n);
}

void event(const char *f, ...)
{
	char buf[512];
	va_list ap;
	memcpy(buf, "@u1 ", 4);
	va_start(ap, f);
	int n = 4 + vfmt(buf + 4, sizeof buf - 5, f, ap);
	va_end(ap);
	if (n > (int)sizeof buf - 2)
		n = sizeof buf - 2;
	buf[n++] = '\n';
	spin_lock(&tx_lock);
	uart_write(COM2, buf, (size_t)n, false);
	spin_unlock(&tx_lock);
}

void serial_write_raw(u16 base, const char *s, size_t n)
{
	spin_lock(&tx_lock);
	uart_write(base, s, n, false);
	spin_unlock(&tx_lock);
}

/* For the fault path: take the lock if we can get it soon, else write anyway. */
void serial_panic_write(u16 base, const char *s)
{
	bool locked = false;
	for (u64 end = slow_host_deadline_us(100000); !(locked = spin_trylock(&tx_lock)) && rdtsc() < end;)
		cpu_relax();
	uart_write(base, s, strlen(s), base == COM1);
	if (locked)
		spin_unlock(&tx_lock);
}


/* Input typed before this is kept: with data waiting, enabling the interrupt raises it. */
void serial_rx_enable(void)
{
	outb(COM1 + UART_MCR, 0x0B);             /* DTR | RTS | OUT2 (IRQ enable) */
	outb(COM1 + UART_IER, 0x01);             /* received data available */
}

/* The RX interrupt handler; also called with interrupts off as a poll. */
void serial_rx_irq(void)
{
	for (int i = 0; i < 256 && (inb(COM1 + UART_LSR) & LSR_DR); i++)
		rx_push(inb(COM1 + UART_RBR));
}

int serial_getc(void)
{
	u32 t = rx_tail;
	if (t == rx_head)
		return -1;
	int c = rx_buf[t % sizeof rx_buf];
	rx_tail = t + 1;
	return c;
}

import { describe, it, expect } from 'vitest';
import { Uart16550, UART_STATE_WORDS } from '../../electron/vmm/devices/uart16550.ts';

// Register offsets.
const RBR = 0, IER = 1, IIR = 2, FCR = 2, LCR = 3, MCR = 4, LSR = 5, MSR = 6, SCR = 7;

function makeUart(state = newState()) {
  const emitted: number[] = [];
  const irqs: boolean[] = [];
  const uart = new Uart16550(state, { emit: (b) => emitted.push(b), setIrq: (l) => irqs.push(l) });
  return { uart, emitted, irqs, state };
}

function newState(): Int32Array {
  const s = new Int32Array(new SharedArrayBuffer(UART_STATE_WORDS * 4));
  Uart16550.initState(s);
  return s;
}

describe('Uart16550', () => {
  it('transmits straight out: THR never holds a byte', () => {
    const { uart, emitted } = makeUart();
    for (const c of 'hi\n') uart.write(RBR, c.charCodeAt(0));
    expect(String.fromCharCode(...emitted)).toBe('hi\n');
    expect(uart.read(LSR) & 0x60).toBe(0x60); // THRE | TEMT
    expect(uart.read(LSR) & 0x01).toBe(0); // no data
  });

  it('echoes in loopback mode without emitting', () => {
    const { uart, emitted } = makeUart();
    uart.write(MCR, 0x10);
    uart.write(RBR, 0x41);
    uart.write(RBR, 0x42);
    expect(emitted).toEqual([]);
    expect(uart.read(LSR) & 0x01).toBe(1);
    expect(uart.read(RBR)).toBe(0x41);
    expect(uart.read(RBR)).toBe(0x42);
    expect(uart.read(LSR) & 0x01).toBe(0);
  });

  it('loopback wires modem outputs to inputs and reports deltas once', () => {
    const { uart } = makeUart();
    uart.write(MCR, 0x10); // loopback, all outputs off
    uart.read(MSR); // clear the deltas of entering loopback
    uart.write(MCR, 0x10 | 0x01 | 0x02 | 0x08); // DTR, RTS, OUT2
    const msr = uart.read(MSR);
    expect(msr & 0xf0).toBe(0x20 | 0x10 | 0x80); // DSR, CTS, DCD
    expect(msr & 0x0f).toBe(0x01 | 0x02 | 0x08); // DCTS, DDSR, DDCD
    expect(uart.read(MSR) & 0x0f).toBe(0); // deltas clear on read
    uart.write(MCR, 0);
    expect(uart.read(MSR) & 0xf0).toBe(0xb0); // back to an idle modem
  });

  it('bounds the RX FIFO at 16 and sets OE on overrun', () => {
    const { uart } = makeUart();
    uart.write(FCR, 0x07);
    uart.write(MCR, 0x10);
    for (let i = 0; i < 17; i++) uart.write(RBR, i);
    const lsr = uart.read(LSR);
    expect(lsr & 0x03).toBe(0x03); // DR | OE
    expect(uart.read(LSR) & 0x02).toBe(0); // OE clears on read
    const got: number[] = [];
    while (uart.read(LSR) & 1) got.push(uart.read(RBR));
    expect(got).toEqual([...Array(16).keys()]);
  });

  it('enqueueRx takes only what fits and never overruns', () => {
    const { uart } = makeUart();
    expect(uart.rxSpace()).toBe(16);
    expect(uart.enqueueRx(new Uint8Array(20).fill(7))).toBe(16);
    expect(uart.rxSpace()).toBe(0);
    expect(uart.enqueueRx(new Uint8Array([1]))).toBe(0);
    expect(uart.read(LSR) & 0x02).toBe(0);
    uart.read(RBR);
    expect(uart.rxSpace()).toBe(1);
  });

  it('refuses host input in loopback (the line is disconnected)', () => {
    const { uart } = makeUart();
    uart.write(MCR, 0x10);
    expect(uart.rxSpace()).toBe(0);
    expect(uart.enqueueRx(new Uint8Array([1, 2]))).toBe(0);
  });

  it('reports interrupts by priority: line status > RX data > THRE > modem status', () => {
    const { uart } = makeUart();
    uart.write(MCR, 0x10); // loopback for overrun and modem-status changes
    uart.write(MCR, 0x10 | 0x02); // CTS changes: modem-status delta pending
    uart.write(IER, 0x0f);
    for (let i = 0; i < 17; i++) uart.write(RBR, i); // data + overrun
    expect(uart.read(IIR)).toBe(0x06); // line status
    uart.read(LSR); // acknowledges line status
    expect(uart.read(IIR)).toBe(0x04); // received data
    for (let i = 0; i < 16; i++) uart.read(RBR);
    expect(uart.read(IIR)).toBe(0x02); // THR empty; reading IIR acknowledges it
    expect(uart.read(IIR)).toBe(0x00); // modem status
    uart.read(MSR);
    expect(uart.read(IIR)).toBe(0x01); // nothing
  });

  it('sets the FIFO bits in IIR when FIFOs are enabled, and FCR resets RX', () => {
    const { uart } = makeUart();
    expect(uart.read(IIR)).toBe(0x01);
    uart.write(FCR, 0x01);
    expect(uart.read(IIR)).toBe(0xc1);
    uart.enqueueRx(new Uint8Array([1, 2, 3]));
    uart.write(FCR, 0x03); // enabled + clear RX
    expect(uart.read(LSR) & 1).toBe(0);
    uart.enqueueRx(new Uint8Array([4]));
    uart.write(FCR, 0x00); // disabling the FIFO resets it too
    expect(uart.read(LSR) & 1).toBe(0);
    expect(uart.read(IIR)).toBe(0x01);
  });

  it('THRE interrupt: raised by enabling THRI, acked by IIR read, re-armed by a THR write', () => {
    const { uart, irqs, emitted } = makeUart();
    uart.write(IER, 0x02);
    expect(irqs).toEqual([true]);
    expect(uart.read(IIR)).toBe(0x02);
    expect(irqs).toEqual([true, false]);
    expect(uart.read(IIR)).toBe(0x01);
    uart.write(RBR, 0x58); // transmit: THR empties again at once
    expect(emitted).toEqual([0x58]);
    expect(irqs).toEqual([true, false, true]);
    uart.write(RBR, 0x59); // acked by the write, re-armed: the line pulses (an edge for the PIC)
    expect(irqs).toEqual([true, false, true, false, true]);
    uart.write(IER, 0x00);
    expect(irqs.at(-1)).toBe(false);
    expect(uart.irqLevel()).toBe(false);
  });

  it('THRE is not reported without IER THRI, and IIR read does not ack it then', () => {
    const { uart, irqs } = makeUart();
    uart.write(RBR, 0x41);
    expect(uart.read(IIR)).toBe(0x01);
    expect(irqs).toEqual([]);
  });

  it('maps offsets 0/1 to the divisor latch while DLAB is set', () => {
    const { uart, emitted } = makeUart();
    uart.write(IER, 0x05);
    uart.write(LCR, 0x83);
    expect(uart.read(RBR)).toBe(12); // power-on divisor: 9600 baud
    uart.write(RBR, 0x01); // DLL
    uart.write(IER, 0x00); // DLM
    expect(uart.read(RBR)).toBe(0x01);
    expect(uart.read(IER)).toBe(0x00);
    expect(emitted).toEqual([]);
    uart.write(LCR, 0x03);
    expect(uart.read(LCR)).toBe(0x03);
    expect(uart.read(IER)).toBe(0x05); // IER untouched by DLM writes
  });

  it('keeps the scratch register', () => {
    const { uart } = makeUart();
    uart.write(SCR, 0xa5);
    expect(uart.read(SCR)).toBe(0xa5);
  });

  it('calls setIrq only when the level changes', () => {
    const { uart, irqs } = makeUart();
    uart.write(IER, 0x01);
    expect(irqs).toEqual([]);
    uart.enqueueRx(new Uint8Array([1, 2, 3]));
    uart.enqueueRx(new Uint8Array([4]));
    expect(irqs).toEqual([true]);
    uart.read(RBR);
    uart.read(LSR);
    uart.read(RBR);
    uart.read(RBR);
    expect(irqs).toEqual([true]);
    uart.read(RBR);
    expect(irqs).toEqual([true, false]);
  });

  it('shares state and the last IRQ level between instances (one per thread)', () => {
    const state = newState();
    const a = makeUart(state);
    const b = makeUart(state);
    a.uart.write(IER, 0x01);
    b.uart.enqueueRx(new Uint8Array([9]));
    expect(b.irqs).toEqual([true]);
    expect(a.uart.read(RBR)).toBe(9);
    expect(a.irqs).toEqual([false]);
    expect(b.uart.irqLevel()).toBe(false);
  });
});

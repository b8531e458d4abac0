// 16550A UART as a pure state machine over an Int32Array (a slice of the shared device SAB),
// in the manner of rust-vmm's vm-superio: every thread that touches the UART (each vCPU
// worker, the main thread injecting input) builds its own Uart16550 over the same words and
// the caller serializes accesses with the bus lock. I/O is injected.
//
// Transmit never holds bytes: a THR write goes straight to `emit`, so THR/TSR are always
// empty (LSR THRE|TEMT always set). Receive has a 16-byte FIFO in the state words; it is
// 16 deep even while the guest has FIFOs disabled (as vm-superio, which always buffers),
// because the host can then hand over a pasted line in one go. The host never overruns it:
// `enqueueRx` takes what fits and the host retries later; only loopback can overrun.

export const UART_STATE_WORDS = 32;

// Word offsets inside one UART's state.
const IER = 0;
const LCR = 1;
const MCR = 2;
const LSR_ERR = 3; // sticky line-status error bits (OE); DR/THRE/TEMT are derived
const MSR = 4; // modem status: bits 4-7 lines, bits 0-3 deltas (cleared on read)
const SCR = 5;
const DLL = 6;
const DLM = 7;
const FCR = 8; // the FIFO-control bits that persist: enable (0), DMA mode (3), trigger (6-7)
const RX_HEAD = 9;
const RX_COUNT = 10;
const THR_PENDING = 11; // "THR empty" interrupt condition, cleared by IIR read / THR write
const IRQ_LEVEL = 12; // last level given to setIrq, so it is only called on a change
const RX_FIFO = 16; // 16 words, one byte each
const FIFO_SIZE = 16;
/** Where each register lives in the state words (read-only: for diagnostics and tests that inspect state). */
export const UART_STATE_LAYOUT = Object.freeze({
  ier: IER, lcr: LCR, mcr: MCR, lsrErr: LSR_ERR, msr: MSR, scr: SCR, dll: DLL, dlm: DLM, fcr: FCR,
  rxHead: RX_HEAD, rxCount: RX_COUNT, thrPending: THR_PENDING, irqLevel: IRQ_LEVEL, rxFifo: RX_FIFO, fifoSize: FIFO_SIZE,
});

// Register bits.
const IER_RDI = 0x01;
const IER_THRI = 0x02;
const IER_RLSI = 0x04;
const IER_MSI = 0x08;
const IIR_NO_INT = 0x01;
const IIR_MSI = 0x00;
const IIR_THRI = 0x02;
const IIR_RDI = 0x04;
const IIR_RLSI = 0x06;
const IIR_FIFO_ENABLED = 0xc0;
const FCR_ENABLE = 0x01;
const FCR_CLEAR_RX = 0x02;
const LCR_DLAB = 0x80;
const MCR_DTR = 0x01;
const MCR_RTS = 0x02;
const MCR_OUT1 = 0x04;
const MCR_OUT2 = 0x08;
const MCR_LOOP = 0x10;
const LSR_DR = 0x01;
const LSR_OE = 0x02;
const LSR_ERRORS = 0x1e; // OE, PE, FE, BI
const LSR_THRE = 0x20;
const LSR_TEMT = 0x40;
const MSR_CTS = 0x10;
const MSR_DSR = 0x20;
const MSR_RI = 0x40;
const MSR_DCD = 0x80;
// With nothing attached the lines read as a ready modem (QEMU and vm-superio do the same).
const MSR_IDLE = MSR_DCD | MSR_DSR | MSR_CTS;

export interface UartIo {
  /** A transmitted byte (called under the bus lock). */
  emit(byte: number): void;
  /** The interrupt line changed level (called under the bus lock, only on changes). */
  setIrq(level: boolean): void;
}

export class Uart16550 {
  private readonly s: Int32Array;
  private readonly io: UartIo;

  /** `state` is this UART's UART_STATE_WORDS words, initialized once with `initState`. */
  constructor(state: Int32Array, io: UartIo) {
    if (state.length < UART_STATE_WORDS) throw new RangeError('UART state too small');
    this.s = state;
    this.io = io;
  }

  /** Power-on register values (divisor 12 = 9600 baud, modem lines idle). */
  static initState(state: Int32Array): void {
    state.fill(0, 0, UART_STATE_WORDS);
    state[DLL] = 12;
    state[MSR] = MSR_IDLE;
  }

  read(offset: number): number {
    const s = this.s;
    let v: number;
    switch (offset & 7) {
      case 0:
        v = s[LCR] & LCR_DLAB ? s[DLL] : this.popRx();
        break;
      case 1:
        v = s[LCR] & LCR_DLAB ? s[DLM] : s[IER];
        break;
      case 2: {
        const id = this.interruptId();
        // Reading IIR acknowledges a THRE interrupt, but only if that is what it reported.
        if (id === IIR_THRI) s[THR_PENDING] = 0;
        v = id | (s[FCR] & FCR_ENABLE ? IIR_FIFO_ENABLED : 0);
        break;
      }
      case 3:
        v = s[LCR];
        break;
      case 4:
        v = s[MCR];
        break;
      case 5:
        v = this.lsr();
        s[LSR_ERR] = 0; // error bits clear on read (acknowledges the line-status interrupt)
        break;
      case 6:
        v = s[MSR];
        s[MSR] = v & 0xf0; // deltas clear on read
        break;
      default:
        v = s[SCR];
    }
    this.updateIrq();
    return v;
  }

  write(offset: number, value: number): void {
    const s = this.s;
    const v = value & 0xff;
    switch (offset & 7) {
      case 0:
        if (s[LCR] & LCR_DLAB) s[DLL] = v;
        else this.transmit(v);
        break;
      case 1:
        if (s[LCR] & LCR_DLAB) {
          s[DLM] = v;
        } else {
          // Enabling THRI while THR is empty (always, here) raises the interrupt at once;
          // Linux's 8250 driver starts transmitting by doing exactly that.
          if (v & IER_THRI && !(s[IER] & IER_THRI)) s[THR_PENDING] = 1;
          s[IER] = v & 0x0f;
        }
        break;
      case 2:
        this.writeFcr(v);
        break;
      case 3:
        s[LCR] = v;
        break;
      case 4:
        this.writeMcr(v & 0x1f);
        break;
      case 5:
      case 6:
        break; // LSR and MSR writes are factory-test only: ignored
      default:
        s[SCR] = v;
    }
    this.updateIrq();
  }

  /** Host side: bytes the RX FIFO can take now (0 in loopback: the line is disconnected). */
  rxSpace(): number {
    return this.s[MCR] & MCR_LOOP ? 0 : FIFO_SIZE - this.s[RX_COUNT];
  }

  /** Host side: queues received bytes; returns how many fit (retry the rest later). */
  enqueueRx(bytes: Uint8Array): number {
    const n = Math.min(this.rxSpace(), bytes.length);
    for (let i = 0; i < n; i++) this.pushRx(bytes[i]);
    if (n > 0) this.updateIrq();
    return n;
  }

  /** Whether the interrupt line is asserted. */
  irqLevel(): boolean {
    return this.interruptId() !== IIR_NO_INT;
  }

  private lsr(): number {
    const s = this.s;
    return s[LSR_ERR] | (s[RX_COUNT] > 0 ? LSR_DR : 0) | LSR_THRE | LSR_TEMT;
  }

  // Highest-priority pending source: line status > received data > THR empty > modem status.
  private interruptId(): number {
    const s = this.s;
    const ier = s[IER];
    if (ier & IER_RLSI && s[LSR_ERR] & LSR_ERRORS) return IIR_RLSI;
    if (ier & IER_RDI && s[RX_COUNT] > 0) return IIR_RDI;
    if (ier & IER_THRI && s[THR_PENDING]) return IIR_THRI;
    if (ier & IER_MSI && s[MSR] & 0x0f) return IIR_MSI;
    return IIR_NO_INT;
  }

  private updateIrq(): void {
    const level = this.irqLevel() ? 1 : 0;
    if (level !== this.s[IRQ_LEVEL]) {
      this.s[IRQ_LEVEL] = level;
      this.io.setIrq(level === 1);
    }
  }

  private transmit(byte: number): void {
    const s = this.s;
    // Writing THR acknowledges THRE; the byte leaves at once, so THR is empty again and
    // THRE re-arms. The line drops in between, giving the edge an ISA (edge) IRQ needs.
    s[THR_PENDING] = 0;
    this.updateIrq();
    if (s[MCR] & MCR_LOOP) {
      if (s[RX_COUNT] < FIFO_SIZE) this.pushRx(byte);
      else s[LSR_ERR] |= LSR_OE;
    } else {
      this.io.emit(byte);
    }
    s[THR_PENDING] = 1;
  }

  private writeFcr(v: number): void {
    const s = this.s;
    // Changing the FIFO mode resets the FIFOs (16550 datasheet); so does the RX-reset bit,
    // which only counts while the FIFO is (being) enabled. TX reset: TX holds nothing.
    if ((v ^ s[FCR]) & FCR_ENABLE || (v & (FCR_ENABLE | FCR_CLEAR_RX)) === (FCR_ENABLE | FCR_CLEAR_RX)) {
      s[RX_HEAD] = 0;
      s[RX_COUNT] = 0;
    }
    s[FCR] = v & FCR_ENABLE ? v & 0xc9 : 0;
  }

  private writeMcr(v: number): void {
    const s = this.s;
    s[MCR] = v;
    // In loopback the modem inputs are wired to the outputs: CTS=RTS, DSR=DTR, RI=OUT1, DCD=OUT2.
    const lines = v & MCR_LOOP
      ? (v & MCR_RTS ? MSR_CTS : 0) | (v & MCR_DTR ? MSR_DSR : 0) |
        (v & MCR_OUT1 ? MSR_RI : 0) | (v & MCR_OUT2 ? MSR_DCD : 0)
      : MSR_IDLE;
    const old = s[MSR];
    const changed = (old ^ lines) & 0xf0;
    let deltas = old & 0x0f;
    if (changed & MSR_CTS) deltas |= 0x01;
    if (changed & MSR_DSR) deltas |= 0x02;
    if (changed & MSR_RI && !(lines & MSR_RI)) deltas |= 0x04; // trailing edge of RI
    if (changed & MSR_DCD) deltas |= 0x08;
    s[MSR] = lines | deltas;
  }

  private pushRx(byte: number): void {
    const s = this.s;
    s[RX_FIFO + ((s[RX_HEAD] + s[RX_COUNT]) & (FIFO_SIZE - 1))] = byte & 0xff;
    s[RX_COUNT]++;
  }

  private popRx(): number {
    const s = this.s;
    if (s[RX_COUNT] === 0) return 0;
    const b = s[RX_FIFO + s[RX_HEAD]];
    s[RX_HEAD] = (s[RX_HEAD] + 1) & (FIFO_SIZE - 1);
    s[RX_COUNT]--;
    return b;
  }
}

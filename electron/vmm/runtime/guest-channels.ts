// The VM's two serial channels as the host sees them: ttyS0 (the console) and ttyS1 (the agent's
// line protocol). Guest output arrives in shared rings that the vCPU threads write before they
// re-enter KVM_RUN; the main thread drains them here. Host input waits in bounded queues, paced by
// each UART's receive FIFO, and is injected without ever waiting for the bus lock.
import { AgentLineReader, type AgentEvent } from '../agent/line-protocol.ts';
import { SerialInput } from '../devices/board.ts';
import { ByteRing } from '../devices/byte-ring.ts';
import { InputQueue } from '../devices/input-queue.ts';

/** Console input waiting for a guest that does not read it: at most this much is kept. */
export const MAX_PENDING_INPUT = 1024 * 1024;
const RING_BYTES = 64 * 1024;

/** Where the guest's output goes once drained. */
export interface ChannelSinks {
  console(bytes: Uint8Array): void;
  agentBytes(bytes: Uint8Array): void;
  /** A line of the agent's protocol (ttyS1), parsed. */
  agentEvent(event: AgentEvent): void;
}

export class GuestChannels {
  readonly consoleRingSab = ByteRing.create(RING_BYTES);
  readonly agentRingSab = ByteRing.create(RING_BYTES);
  readonly agentReader: AgentLineReader;
  private readonly consoleRing = new ByteRing(this.consoleRingSab);
  private readonly agentRing = new ByteRing(this.agentRingSab);
  private input?: SerialInput;
  /** Host input for ttyS0 and ttyS1, paced by each UART's receive FIFO and bounded. */
  private readonly consoleQueue = new InputQueue((b) => this.input?.inject(0, b) ?? 0, MAX_PENDING_INPUT);
  private readonly agentQueue = new InputQueue((b) => this.input?.inject(1, b) ?? 0, MAX_PENDING_INPUT);
  private draining = true;
  private readonly sinks: ChannelSinks;

  constructor(sinks: ChannelSinks) {
    this.sinks = sinks;
    this.agentReader = new AgentLineReader((e) => sinks.agentEvent(e));
  }

  /** Host input reaches the machine's UARTs (in its device state) from now on. */
  connect(deviceSab: SharedArrayBuffer, setIrq: (line: number, level: boolean) => void): void {
    this.input = new SerialInput(deviceSab, setIrq);
  }

  /** The machine is gone: input has nowhere to go. */
  disconnect(): void {
    this.input = undefined;
  }

  /** Drains both rings until stopDraining(). */
  startDraining(): void {
    void this.drain(this.consoleRing, (b) => this.sinks.console(b));
    void this.drain(this.agentRing, (b) => this.agentOutput(b));
  }

  stopDraining(): void {
    this.draining = false;
  }

  /** Delivers whatever the rings hold now (at a pause, at the end). */
  flush(): void {
    const c = this.consoleRing.drain();
    if (c.length) this.sinks.console(c);
    const a = this.agentRing.drain();
    if (a.length) this.agentOutput(a);
  }

  sendConsole(bytes: Uint8Array | string): void {
    this.consoleQueue.push(typeof bytes === 'string' ? new TextEncoder().encode(bytes) : bytes);
  }

  sendAgent(bytes: Uint8Array | string): void {
    this.agentQueue.push(typeof bytes === 'string' ? new TextEncoder().encode(bytes) : bytes);
  }

  /** Stops taking and retrying input. */
  closeInput(): void {
    this.consoleQueue.close();
    this.agentQueue.close();
  }

  /** Console input bytes dropped because the guest did not read its UART (see MAX_PENDING_INPUT). */
  get droppedConsoleInputBytes(): number {
    return this.consoleQueue.dropped;
  }

  /** ttyS1 input bytes dropped because the guest did not read its UART (see MAX_PENDING_INPUT). */
  get droppedAgentInputBytes(): number {
    return this.agentQueue.dropped;
  }

  /** Console bytes dropped because nobody drained them fast enough. */
  get droppedConsoleBytes(): number {
    return this.consoleRing.dropped();
  }

  private agentOutput(bytes: Uint8Array): void {
    this.sinks.agentBytes(bytes);
    this.agentReader.push(bytes);
  }

  private async drain(ring: ByteRing, sink: (b: Uint8Array) => void): Promise<void> {
    while (this.draining) {
      const bytes = ring.drain();
      if (bytes.length) {
        sink(bytes);
        // While output streams, collect it for a millisecond before draining again: waking this
        // thread from a vCPU costs tens of µs, so this caps wake-ups at about 1000 per second.
        await new Promise((r) => setTimeout(r, 1));
      } else {
        await ring.waitForData(100);
      }
    }
  }
}

// The virtio devices' counters (notifications by kind, interrupts, requests, bytes) as the main
// thread reads them for telemetry, without the bus lock, and as they stood when the VM ended.
import type { BuiltMachine } from '../builder/build-machine.ts';
import { attachPci, type PciDeviceName } from '../devices/board.ts';
import type { VirtioCounters } from '../devices/virtio/virtio-pci.ts';

export type VirtioCountersByDevice = Partial<Record<PciDeviceName, VirtioCounters>>;

export class VirtioCounterReader {
  /** The counters as the VM ended (its device state goes with the machine). */
  private final?: VirtioCountersByDevice;
  private view?: { machine: object; virtio: { name: PciDeviceName; device: { counters(): VirtioCounters } }[] };

  /** The running machine's counters, or (none: the VM has ended) the final ones. */
  read(m: BuiltMachine | undefined): VirtioCountersByDevice {
    if (!m) return this.final ?? {};
    // This thread's view of the functions, made once per machine: telemetry reads it 10 times a second.
    if (this.view?.machine !== m) {
      const noIo = { signalMsi: () => {}, signalEventFd: () => {}, setIoeventfd: () => {} };
      this.view = { machine: m, virtio: attachPci(m.deviceSab, m.board, noIo).virtio };
    }
    const out: VirtioCountersByDevice = {};
    for (const v of this.view.virtio) out[v.name] = v.device.counters();
    return out;
  }

  /** Before the machine closes: its counters are kept as the final ones. */
  keepFinal(m: BuiltMachine): void {
    if (m.board.virtio.length) this.final = this.read(m);
  }

  /** After the machine closed: no reference to it is kept (its guest RAM goes with the last). */
  forget(): void {
    this.view = undefined;
  }
}

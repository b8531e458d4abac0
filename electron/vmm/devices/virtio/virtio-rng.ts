// virtio-rng (virtio 1.2, 5.4: entropy device, type 4): one request queue; each chain's
// device-writable buffers are filled by the host's getrandom(2) — the kernel's CSPRNG, as QEMU's
// default rng-builtin backend does — straight into guest RAM (the call writes at the guest-RAM
// SharedArrayBuffer's own addresses: no copy, no view). No features, no configuration. At most
// MAX_BYTES_PER_REQUEST are written per chain (the used length says how many), so a guest that
// posts gigabytes cannot hold the I/O thread. A getrandom that returns fewer bytes than asked
// (a signal may cut a large request short) is called again for the rest; one that fails ends the
// chain with what was written: the used length tells the driver, which asks again.
import { ramAddressOnce, type GuestRam } from './guest-ram.ts';
import type { Chain } from './virtqueue.ts';
import type { VirtioDeviceType } from './virtio-device-type.ts';

export const VIRTIO_ID_RNG = 4;
export const MAX_BYTES_PER_REQUEST = 64 * 1024;

/** The host calls the device makes: libc's getrandom through koffi in the VMM (only the thread that serves the queue). */
export interface EntropyIo {
  /** getrandom(address, length, 0): the bytes written, or -1. */
  getrandomAddress(address: number, length: number): number;
  /** Address of guest RAM's first byte. */
  ramAddress(ram: GuestRam): number;
}

/** The shape of the entropy device (board.ts sizes its state with it). */
export const VIRTIO_RNG_SHAPE = Object.freeze({ type: VIRTIO_ID_RNG, queues: 1, maxQueueSize: 256 });

/** The entropy device type; `io` only where its queue is served (the I/O thread). */
export function virtioRngType(io?: EntropyIo): VirtioDeviceType {
  const ramAddress = io ? ramAddressOnce((ram) => io.ramAddress(ram)) : undefined;
  return Object.freeze({
    ...VIRTIO_RNG_SHAPE,
    name: 'virtio-rng',
    features: 0n,
    classCode: 0x00ff00, // class 00 (unclassified), subclass ff: what QEMU's virtio-rng-pci says
    configBytes: 0,
    serve(_queue: number, chain: Chain, ram: GuestRam): number {
      if (!io || !ramAddress) throw new Error('virtio-rng is served on the I/O thread only');
      const ramBase = ramAddress(ram);
      let written = 0;
      for (let i = 0; i < chain.count && written < MAX_BYTES_PER_REQUEST; i++) {
        if (!chain.writable[i]) continue;
        const want = Math.min(chain.length[i]!, MAX_BYTES_PER_REQUEST - written);
        let got = 0;
        while (got < want) {
          const n = io.getrandomAddress(ramBase + chain.offset[i]! + got, want - got);
          if (n <= 0) return written + got; // failed: what is there is what the driver gets
          got += n;
        }
        written += got;
      }
      return written;
    },
  });
}

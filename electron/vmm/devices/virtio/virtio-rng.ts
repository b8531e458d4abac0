// virtio-rng (virtio 1.2, 5.4: entropy device, type 4): one request queue; each chain's
// device-writable buffers are filled from the host's getrandom (crypto.getRandomValues reads the
// kernel's CSPRNG) straight into guest RAM. No features, no configuration. At most
// MAX_BYTES_PER_REQUEST are written per chain (the used length says how many), so a guest that
// posts gigabytes cannot hold the I/O thread.
import type { GuestRam } from './guest-ram.ts';
import type { Chain } from './virtqueue.ts';
import type { VirtioDeviceType } from './virtio-pci.ts';

export const VIRTIO_ID_RNG = 4;
export const MAX_BYTES_PER_REQUEST = 64 * 1024;
// getRandomValues takes at most 65536 bytes per call.
const FILL_CHUNK = 65536;
// node:crypto is loaded on first use: loading it costs tens of ms at every start of a VM without this device.
let getRandomValues: ((view: Uint8Array) => unknown) | undefined;

export const VIRTIO_RNG: VirtioDeviceType = Object.freeze({
  type: VIRTIO_ID_RNG,
  name: 'virtio-rng',
  queues: 1,
  maxQueueSize: 256,
  features: 0n,
  classCode: 0x00ff00, // class 00 (unclassified), subclass ff: what QEMU's virtio-rng-pci says
  configBytes: 0,
  serve(_queue: number, chain: Chain, ram: GuestRam): number {
    let written = 0;
    for (let i = 0; i < chain.count && written < MAX_BYTES_PER_REQUEST; i++) {
      if (!chain.writable[i]) continue;
      let n = Math.min(chain.length[i]!, MAX_BYTES_PER_REQUEST - written);
      let at = chain.offset[i]!;
      while (n > 0) {
        const k = Math.min(n, FILL_CHUNK);
        // A view over the shared RAM; crypto writes into SharedArrayBuffer views.
        getRandomValues ??= process.getBuiltinModule('node:crypto').getRandomValues;
        getRandomValues(ram.bytes.subarray(at, at + k));
        at += k;
        n -= k;
        written += k;
      }
    }
    return written;
  },
});

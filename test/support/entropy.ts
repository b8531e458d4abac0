// Test support: virtio-rng's host calls as the I/O thread passes them (libc's getrandom into guest
// RAM), for tests that serve its queue on their own thread.
import { addressOf, libc } from '../../native/kvm/libc.ts';
import type { EntropyIo } from '../../electron/vmm/devices/virtio/virtio-rng.ts';

export const getrandomEntropy: EntropyIo = {
  getrandomAddress: (address, length) => Number(libc.getrandomAddress(address, length, 0)),
  ramAddress: (ram) => addressOf(ram.bytes),
};

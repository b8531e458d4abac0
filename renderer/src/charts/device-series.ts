// Which columns the Devices panel's charts plot, per device the store has seen (pure: the node
// tests check them against the store's columns).
import { deviceLabel } from './labels.ts';

interface Series { key: string; label: string }
type Devices = { readonly deviceNames: readonly string[] };

/** requests/s, one series per device. */
export function deviceRequestSeries(t: Devices): Series[] {
  return t.deviceNames.map((d) => ({ key: `requests_per_s@${d}`, label: deviceLabel(d) }));
}

/** bytes/s, per direction where a device has two (a disk's read / write, the network's rx / tx). */
export function deviceByteSeries(t: Devices): Series[] {
  return t.deviceNames.flatMap((d): Series[] => {
    const label = deviceLabel(d);
    if (/^blk\d+$/.test(d)) return [{ key: `read_bytes_per_s@${d}`, label: `${label} read` }, { key: `write_bytes_per_s@${d}`, label: `${label} write` }];
    if (d === 'net') return [{ key: `rx_bytes_per_s@${d}`, label: 'net rx' }, { key: `tx_bytes_per_s@${d}`, label: 'net tx' }];
    return [{ key: `bytes_per_s@${d}`, label }];
  });
}

/** Per device: notifications, how many of them were MMIO exits, and the interrupts sent back. */
export function deviceNotifySeries(t: Devices): Series[] {
  return t.deviceNames.flatMap((d): Series[] => {
    const label = deviceLabel(d);
    return [
      { key: `notifications_per_s@${d}`, label: `${label} notifications` },
      { key: `mmio_notifications_per_s@${d}`, label: `${label} as MMIO exits` },
      { key: `interrupts_per_s@${d}`, label: `${label} interrupts` },
    ];
  });
}

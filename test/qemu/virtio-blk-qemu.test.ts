// The probe guest's virtio-blk driver (native/guest/probe/virtio_blk.c) against QEMU's own
// virtio-blk-pci on q35 and against ours, on copies of one image: the driver is checked against the
// reference device, and our device against the same driver. QEMU gets the disk exactly as our
// QEMU export writes it (`-drive file=...,if=none,id=disk0,format=raw[,readonly=on|,snapshot=on] -device
// virtio-blk-pci,drive=disk0`), modern only (disable-legacy=on: the probe, like our device, knows no
// legacy interface). Both must read what the file holds, write and flush what the guest wrote
// (in the file afterwards), refuse a write on a read-only disk with IOERR (the file unchanged),
// answer out-of-range and partial-sector requests with IOERR, with snapshot=on write and read back
// and leave the file as it was, and stop with DEVICE_NEEDS_RESET on a
// chain with no status byte (QEMU: "virtio-blk missing headers"), then work after a reset. One
// difference: QEMU 7.2 offers DISCARD on a read-only disk too (a discard there fails); we do not
// offer it.
import { spawnSync } from 'node:child_process';
import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { agentEvents, runTimed } from '../../bench/lib.ts';
import type { AgentEvent } from '../../electron/vmm/agent/line-protocol.ts';
import { resolveMachine } from '../../electron/vmm/config/resolve.ts';
import { validateConfig, type DiskConfig } from '../../electron/vmm/config/vm-config.ts';
import { exportPlan } from '../../electron/vmm/export/plan.ts';
import { qemuArgs } from '../../electron/vmm/export/qemu.ts';
import { probeHost } from '../../electron/vmm/machine/host-caps.ts';
import { hostKind } from '../../electron/vmm/host.ts';
import { VirtualMachine } from '../../electron/vmm/vm.ts';
import { watch } from '../support/probe.ts';
import { qemuSkipReason, root } from '../support/qemu-probe.ts';
import { scaled } from '../support/time-scale.ts';

const skip = qemuSkipReason();
if (skip) console.warn(`skipping the virtio-blk vs QEMU tests: ${skip}`);
const pvm = hostKind() === 'pvm'; // the host's kind needs no KVM (a host may have none: then these skip)
const dir = mkdtempSync(join(tmpdir(), 'unhalt-blk-qemu-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const original = join(dir, 'original.img');
writeFileSync(original, Uint8Array.from({ length: 1 << 20 }, (_, i) => (i * 29 + 1) & 0xff));

/** How a run's disk is given: its flags beside the path (read-write when none). */
type Mode = Omit<DiskConfig, 'path'>;

/** The -drive / -device pair our QEMU export writes for this disk. */
function exportedDisk(path: string, mode: Mode): string[] {
  const config = validateConfig({ guest: 'probe', disks: [{ path, ...mode }] });
  const args = qemuArgs(exportPlan({ config, boot: { kernelPath: `${root}assets/guests/probe.elf`, cmdline: '' }, hostKind: 'hardware' }));
  const drive = args[args.indexOf('-drive') + 1]!;
  const device = args.find((a) => a.startsWith('virtio-blk-pci'))!;
  return ['-drive', drive, '-device', `${device},disable-legacy=on`];
}

async function underQemu(append: string, img: string, mode: Mode = {}): Promise<AgentEvent[]> {
  const ttyS1 = join(dir, 'qemu.ttyS1');
  const r = await runTimed('qemu-system-x86_64', [
    '-machine', 'q35', '-accel', 'kvm', '-cpu', 'host,-arch-capabilities', '-smp', '1', '-m', '128',
    '-nodefaults', '-no-user-config', '-display', 'none', '-no-reboot', '-device', 'isa-debug-exit,iobase=0xf4,iosize=4',
    '-kernel', `${root}assets/guests/probe.elf`, '-append', `scenario=virtio-blk ${append}${pvm ? ' unhalt.pvm=1' : ''}`,
    ...exportedDisk(img, mode), '-serial', 'null', '-serial', `file:${ttyS1}`,
  ], { timeoutMs: scaled(60_000) });
  expect([0, 1], `QEMU status ${r.code}: ${r.stderr.slice(-300)}`).toContain(r.code);
  return agentEvents(readFileSync(ttyS1, 'utf8'));
}

async function underUnhalt(append: string, img: string, mode: Mode = {}): Promise<AgentEvent[]> {
  const { spec } = resolveMachine(validateConfig({
    guest: 'probe', cpus: 1, memoryMiB: 128, append: `scenario=virtio-blk ${append}`, name: 'blk-vs-qemu', disks: [{ path: img, ...mode }],
  }), probeHost());
  const g = watch(await VirtualMachine.start(spec));
  expect((await g.vm.ended).kind).toBe('poweroff');
  return g.events;
}

const fields = (events: AgentEvent[], name: string) => {
  const e = events.find((x) => x.event === name);
  if (!e) throw new Error(`no "@u1 ${name}": ${events.map((x) => `${x.event} ${JSON.stringify(x.fields)}`).join('; ')}`);
  return e.fields;
};

/** Both VMMs on fresh copies of the original image: their events and the images afterwards. */
async function both(append: string, mode: Mode = {}) {
  const out: [string, AgentEvent[], Buffer][] = [];
  for (const [who, run] of [['QEMU q35', underQemu], ['Unhalt', underUnhalt]] as const) {
    const img = join(dir, `${who.split(' ')[0]}.img`);
    copyFileSync(original, img);
    const events = await run(append, img, mode);
    out.push([who, events, readFileSync(img)]);
  }
  return out;
}

describe.skipIf(!!skip)('virtio-blk: our device and QEMU\'s, one driver', () => {
  beforeAll(() => {
    spawnSync(process.execPath, [`${root}native/guest/build.mjs`, '--quiet'], { stdio: 'inherit' });
  });

  it('both read the file, write, flush and read back the same bytes; both images end the same', async () => {
    const runs = await both('sector=16 sectors=16 seed=7');
    for (const [who, events] of runs) {
      expect(fields(events, 'virtio_blk_dev'), who).toMatchObject({ class: 0x010000, capacity: 2048, blk_size: 512, seg_max: 254, ro: 0, flush: 1 });
      expect(fields(events, 'virtio_blk_read'), who).toMatchObject({ status: 0, used: 16 * 512 + 1 });
      expect(fields(events, 'virtio_blk_write'), who).toMatchObject({ status: 0 });
      expect(fields(events, 'virtio_blk_flush'), who).toEqual({ status: 0, used: 1 });
      expect(fields(events, 'virtio_blk_verify'), who).toMatchObject({ status: 0, match: 1 });
      expect(fields(events, 'virtio_blk'), who).toMatchObject({ ok: 1, irqs: 5, status: 15 });
    }
    // The same bytes read, the same bytes written: the two images are identical afterwards.
    expect(fields(runs[1]![1], 'virtio_blk_read').sum).toBe(fields(runs[0]![1], 'virtio_blk_read').sum);
    expect(runs[1]![2].equals(runs[0]![2])).toBe(true);
    expect(runs[0]![2].equals(readFileSync(original))).toBe(false);
  });

  it('readonly=on: both refuse the write with IOERR and leave the file as it was', async () => {
    for (const [who, events, after] of await both('sector=8 sectors=8 seed=3', { readonly: true })) {
      expect(fields(events, 'virtio_blk_dev'), who).toMatchObject({ ro: 1 });
      expect(fields(events, 'virtio_blk_write'), who).toMatchObject({ status: 1 });
      expect(fields(events, 'virtio_blk_verify'), who).toMatchObject({ status: 0, match: 0 });
      expect(after.equals(readFileSync(original)), who).toBe(true);
    }
  });

  it('snapshot=on: both take the write, read it back, and leave the file as it was', async () => {
    for (const [who, events, after] of await both('sector=120 sectors=16 seed=8', { snapshot: true })) {
      expect(fields(events, 'virtio_blk_dev'), who).toMatchObject({ ro: 0, flush: 1 });
      expect(fields(events, 'virtio_blk_write'), who).toMatchObject({ status: 0 });
      expect(fields(events, 'virtio_blk_flush'), who).toEqual({ status: 0, used: 1 });
      expect(fields(events, 'virtio_blk_verify'), who).toMatchObject({ status: 0, match: 1 });
      expect(after.equals(readFileSync(original)), who).toBe(true);
    }
  });

  it('out of range and partial sectors: IOERR from both, the device still running', async () => {
    for (const [who, events] of await both('bad=range')) {
      expect(fields(events, 'virtio_blk_bad'), who).toEqual({ kind: 1, last: 0, past: 1, past_write: 1, partial: 1, status: 15 });
    }
  });

  it('a chain with no status byte: DEVICE_NEEDS_RESET from both, then a reset and a working read', async () => {
    for (const [who, events] of await both('bad=nostatus')) {
      expect(fields(events, 'virtio_blk_bad'), who).toEqual({ kind: 2, needs_reset: 1, recovered_status: 0 });
    }
  });
});

// Pause and resume through the service's API (pauseVm / resumeVm, the app's buttons) on real KVM
// with the probe guest's virtio drivers: the service's calls are VirtualMachine.pause() and
// resume(), so the devices pause too. A virtio-blk stream's device telemetry (the samples a client
// charts) stands still for the whole pause and moves again after it, and the guest's run ends
// without an I/O error; a host connection through a user-networking forward made while the VM is
// paused leaves the receive counters alone, drops nothing, and reaches the guest (its `net_syn`
// metric) after the resume.
import { connect } from 'node:net';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { ApiEvent, TelemetryDeviceSample, VmStatus } from '../../electron/service/api.ts';
import { createService } from '../../electron/service/service.ts';
import { parseNetOption } from '../../electron/vmm/config/net-config.ts';
import { freePort } from '../support/free-port.ts';
import { kvmAvailable } from '../support/probe.ts';
import { removeTempHomes, tempHome } from '../support/temp-home.ts';
import { scaled } from '../support/time-scale.ts';

afterAll(removeTempHomes);

/** How long a pause is watched: several telemetry samples (10 Hz). */
const PAUSE_WATCH_MS = 1000;

function until<T>(pick: () => T | undefined, what: string, timeoutMs = scaled(30_000)): Promise<T> {
  return new Promise((resolve, reject) => {
    const start = performance.now();
    const tick = () => {
      const v = pick();
      if (v !== undefined) return resolve(v);
      if (performance.now() - start > timeoutMs) return reject(new Error(`timed out waiting for ${what}`));
      setTimeout(tick, 10);
    };
    tick();
  });
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** One VM's events, as a client subscribed to it receives them. */
function recorder(events: ApiEvent[], vmId: string) {
  return {
    devices: (device: string): TelemetryDeviceSample[] => events.flatMap((e) => (e.type === 'telemetry' && e.vmId === vmId ? e.devices ?? [] : []))
      .filter((d) => d.device === device),
    metric: (name: string) => events.find((e): e is Extract<ApiEvent, { type: 'guest-metric' }> => e.type === 'guest-metric' && e.vmId === vmId && e.metric.event === name)?.metric,
    status: () => events.filter((e): e is Extract<ApiEvent, { type: 'status' }> => e.type === 'status' && e.vmId === vmId).at(-1)?.status,
  };
}

/**
 * The device's samples taken after `since` (epoch ms) while paused: one unchanging set of totals,
 * and nothing per second in every interval wholly inside the pause (all but the first one's).
 */
function expectStill(samples: TelemetryDeviceSample[], since: number, fields: string[]): void {
  const during = samples.filter((s) => s.t > since);
  expect(during.length).toBeGreaterThan(2);
  during.forEach((s, i) => {
    for (const f of fields) {
      expect(s[f], `${f} at ${s.t}`).toBe(during[0]![f]);
      if (i > 0) expect(s[`${f}_per_s`] ?? 0, `${f}_per_s at ${s.t}`).toBe(0);
    }
  });
}

describe.skipIf(!kvmAvailable)('pause and resume through the service hold the virtio devices too', () => {
  it('virtio-blk: a stream of reads stands still in the device telemetry while paused, goes on after resume and completes', async () => {
    const home = tempHome('svc-pause-blk');
    const svc = await createService({ home });
    try {
      const events: ApiEvent[] = [];
      svc.on((e) => events.push(e));
      mkdirSync(join(home, 'disks'));
      const disk = join(home, 'disks', 'stream.img');
      writeFileSync(disk, Buffer.alloc(4 * 1024 * 1024, 0x5a));
      const ops = 3000;
      const vm = await svc.createVm({
        name: 'pause blk', guest: 'probe', cpus: 1, memoryMiB: 64, append: `scenario=virtio-blk bench=1 ops=${ops} seq_kib=64`,
        disks: [{ path: disk, readonly: true }],
      });
      await svc.subscribe(vm.id);
      const r = recorder(events, vm.id);
      expect((await svc.startVm(vm.id)).state).toBe('running');
      const requests = () => Number(r.devices('blk0').at(-1)?.requests ?? 0);
      await until(() => (requests() > 20 ? true : undefined), 'blk0 requests in the telemetry');
      expect(requests()).toBeLessThan(ops * 0.8); // the stream is still going when the pause comes

      expect((await svc.pauseVm(vm.id)).state).toBe('paused');
      const pausedAt = Date.now();
      await sleep(PAUSE_WATCH_MS);
      expectStill(r.devices('blk0'), pausedAt, ['requests', 'reads', 'notifications', 'interrupts']);
      const held = requests();

      expect((await svc.resumeVm(vm.id)).state).toBe('running');
      await until(() => (requests() > held ? true : undefined), 'blk0 requests after the resume');
      const end = await until(() => (r.status()?.state === 'stopped' ? r.status() : undefined), 'the guest to power off', scaled(120_000));
      expect((end as VmStatus).lastEnd?.kind).toBe('poweroff');
      expect(r.metric('virtio_blk_bench')?.fields).toMatchObject({ ops, seq_kib: 64 });
      expect(r.metric('fault')).toBeUndefined();
      const last = r.devices('blk0').at(-1)!;
      expect(last).toMatchObject({ errors: 0, drops: 0 });
      expect(last.interrupts).toBe(last.requests);
    } finally {
      await svc.shutdown();
    }
  });

  it('user networking: a connection through a forward made while paused is held, not dropped, and reaches the guest after resume', async () => {
    const svc = await createService({ home: tempHome('svc-pause-net') });
    try {
      const events: ApiEvent[] = [];
      svc.on((e) => events.push(e));
      const port = await freePort();
      const vm = await svc.createVm({
        name: 'pause net', guest: 'probe', cpus: 1, memoryMiB: 64, append: 'scenario=net-listen port=8080 wait_ms=120000',
        net: parseNetOption(`user,hostfwd=tcp:127.0.0.1:${port}-:8080`),
      });
      await svc.subscribe(vm.id);
      const r = recorder(events, vm.id);
      await svc.startVm(vm.id);
      await until(() => r.metric('net_listen'), 'the guest listening');

      expect((await svc.pauseVm(vm.id)).state).toBe('paused');
      const pausedAt = Date.now();
      const sock = connect(port, '127.0.0.1');
      sock.on('error', () => {});
      try {
        await new Promise<void>((resolve, reject) => { sock.once('connect', resolve); sock.once('error', reject); });
        await sleep(PAUSE_WATCH_MS);
        expectStill(r.devices('net'), pausedAt, ['rx_frames', 'rx_bytes', 'interrupts']);
        expect(r.devices('net').at(-1)).toMatchObject({ rx_drops: 0 });
        expect(r.metric('net_syn')).toBeUndefined();

        expect((await svc.resumeVm(vm.id)).state).toBe('running');
        const syn = await until(() => r.metric('net_syn'), 'the SYN in the guest after the resume');
        expect(syn.fields).toMatchObject({ port: 8080, syn: 1, src: 0x0a000202 });
      } finally {
        sock.destroy();
      }
      await until(() => (r.status()?.state === 'stopped' ? true : undefined), 'the guest to power off');
      expect(r.status()?.lastEnd?.kind).toBe('poweroff');
      expect(r.devices('net').at(-1)).toMatchObject({ rx_drops: 0, tx_drops: 0 });
    } finally {
      await svc.shutdown();
    }
  });
});

// The API boundary: every bad input gets a specific code and message, and nothing is written.
// Runs without KVM (creating and editing VMs needs none); starting is in test/kvm/service.test.ts.
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ApiEvent, ExperimentSpec } from '../../electron/service/api.ts';
import { handleCall } from '../../electron/service/dispatch.ts';
import { createService, type UnhaltService } from '../../electron/service/service.ts';
import { hostMemoryBytes } from '../../electron/vmm/host.ts';
import { rejection } from '../support/api-errors.ts';
import { kvmAvailable } from '../support/probe.ts';
import { describeKvmAccess } from '../../electron/vmm/kvm-access.ts';
import { removeTempHomes, tempHome } from '../support/temp-home.ts';

afterAll(removeTempHomes);

const UNKNOWN_ID = '00000000-0000-4000-8000-000000000000';
const probe = { name: 'probe-vm', guest: 'probe', cpus: 1, memoryMiB: 64, append: 'scenario=echo' };


describe('service API boundary', () => {
  let home: string;
  let svc: UnhaltService;
  const events: ApiEvent[] = [];

  beforeAll(async () => {
    home = tempHome('api');
    svc = await createService({ home, lockTimeoutMs: 500 });
    svc.on((e) => events.push(e));
  });
  afterAll(() => svc.shutdown());

  it('refuses bad configurations with the reason, and writes nothing', async () => {
    const hostMiB = Math.floor(hostMemoryBytes() / 1048576);
    const cases: [unknown, string, RegExp][] = [
      [null, 'invalid', /a VM configuration must be an object/],
      [[], 'invalid', /a VM configuration must be an object/],
      ['cpus=2', 'invalid', /a VM configuration must be an object/],
      [{ ...probe, cpus: 'many' }, 'invalid', /cpus must be a whole number, got "many"/],
      [{ ...probe, cpus: 1.5 }, 'invalid', /cpus must be a whole number/],
      [{ ...probe, cpus: 100_000 }, 'invalid', /cpus must be between 1 and 254, got 100000/],
      [{ ...probe, memoryMiB: 1 }, 'invalid', /memory \(MiB\) must be between 16 and/],
      [{ ...probe, memoryMiB: 10 ** 9 }, 'invalid', /memory \(MiB\) must be between 16 and 1048576/],
      [{ ...probe, memoryMiB: hostMiB + 1024 }, 'invalid', new RegExp(`memory ${hostMiB + 1024} MiB is more than this host has \\(${hostMiB} MiB\\)`)],
      [{ ...probe, name: 'x'.repeat(100_000) }, 'invalid', /name is 100000 characters long; at most 64/],
      [{ ...probe, name: '../../etc/passwd' }, 'invalid', /may use letters, digits, space, dot, dash and underscore/],
      [{ ...probe, name: '..' }, 'invalid', /must start with a letter or digit/],
      [{ ...probe, name: 'a/b' }, 'invalid', /may use letters/],
      [{ ...probe, append: 'y'.repeat(1 << 20) }, 'invalid', /append is 1048576 characters long/],
      [{ ...probe, guest: 'windows' }, 'invalid', /guest must be one of probe, linux, custom/],
      [{ ...probe, machine: 'pc-q35-9.0' }, 'invalid', /unknown machine type "pc-q35-9.0"/],
      [{ ...probe, cpuFeatures: { 'kvm-pv-unhalt': 'maybe' } }, 'invalid', /kvm-pv-unhalt must be on or off/],
      [{ ...probe, cpuFeatures: { 'kvm-fast-lane': true } }, 'invalid', /unknown CPU feature "kvm-fast-lane"/],
      [{ ...probe, haltPollNs: -5 }, 'invalid', /halt-poll-ns must be between 0 and/],
      [{ ...probe, pin: [4000] }, 'invalid', /pin: host CPU 4000 does not exist or is not available to Unhalt/],
      [{ ...probe, pin: [9999] }, 'invalid', /pin must be between 0 and 4095, got 9999/],
      [{ ...probe, pin: 'all' }, 'invalid', /pin must be a non-empty list/],
      [{ ...probe, evil: true }, 'invalid', /unknown configuration field "evil"/],
      [{ ...probe, __proto__: { cpus: 3 }, version: 2 }, 'invalid', /configuration version 2 is not supported/],
    ];
    for (const [config, code, message] of cases) {
      const r = await rejection(svc.createVm(config));
      expect(r.code, JSON.stringify(config).slice(0, 80)).toBe(code);
      expect(r.message).toMatch(message);
      expect(r.message.length).toBeLessThan(600);
    }
    expect(existsSync(join(home, 'vms.json'))).toBe(false);
    expect(events.filter((e) => e.type === 'library')).toEqual([]);
  });

  it('checks custom kernel and initrd files, and never reports their content', async () => {
    const dir = join(home, 'files');
    mkdirSync(dir);
    const secret = join(dir, 'blob.bin');
    writeFileSync(secret, Buffer.from([0xde, 0xad, 0xbe, 0xef, 0x53, 0x45, 0x43, 0x52, 0x45, 0x54]));
    const custom = (over: object) => ({ name: 'custom', guest: 'custom', kernel: secret, ...over });
    const cases: [object, RegExp][] = [
      [custom({ kernel: 'relative/vmlinux' }), /kernel must be an absolute path \(its full path on the host, starting with \/\), got "relative\/vmlinux"/],
      // Outside the allowed folders, whether a file is there or not (nothing outside can be probed).
      [custom({ kernel: '/nonexistent/../etc/vmlinuz' }), /^kernel \/nonexistent\/..\/etc\/vmlinuz is outside the folders Unhalt may give to a guest/],
      [custom({ kernel: join(dir, 'missing.elf') }), /kernel not found: .*missing\.elf/],
      [custom({ kernel: dir }), /kernel is not a regular file/],
      [custom({}), /is neither a PVH ELF, a Linux bzImage nor a multiboot kernel$/],
      [custom({ kernel: '/proc/self/environ' }), /^kernel \/proc\/self\/environ is outside the folders/],
      [custom({ kernel: '' }), /kernel is an empty path/],
      [custom({ kernel: 'a\0b' }), /kernel contains a NUL character/],
      [{ ...probe, initrd: join(dir, 'missing.cpio') }, /initrd not found/],
    ];
    for (const [config, message] of cases) {
      const r = await rejection(svc.createVm(config));
      expect(r.code).toBe('invalid');
      expect(r.message).toMatch(message);
      expect(r.message).not.toMatch(/de ad be ef|SECRET|deadbeef/i);
    }
    expect(existsSync(join(home, 'vms.json'))).toBe(false);
  });

  it('unknown and malformed VM ids: not-found / invalid on every method that takes one', async () => {
    const byId: [string, (id: unknown) => Promise<unknown>][] = [
      ['getVm', (id) => svc.getVm(id as string)],
      ['updateVm', (id) => svc.updateVm(id as string, probe)],
      ['renameVm', (id) => svc.renameVm(id as string, 'new-name')],
      ['cloneVm', (id) => svc.cloneVm(id as string)],
      ['deleteVm', (id) => svc.deleteVm(id as string)],
      ['startVm', (id) => svc.startVm(id as string)],
      ['stopVm', (id) => svc.stopVm(id as string)],
      ['forceStopVm', (id) => svc.forceStopVm(id as string)],
      ['resetVm', (id) => svc.resetVm(id as string)],
      ['pauseVm', (id) => svc.pauseVm(id as string)],
      ['resumeVm', (id) => svc.resumeVm(id as string)],
      ['status', (id) => svc.status(id as string)],
      ['setHaltPollNs', (id) => svc.setHaltPollNs(id as string, 1000)],
      ['setPin', (id) => svc.setPin(id as string, [0])],
      ['sendConsole', (id) => svc.sendConsole(id as string, 'x')],
      ['subscribe', (id) => svc.subscribe(id as string)],
    ];
    for (const [name, call] of byId) {
      expect(await rejection(call(UNKNOWN_ID)), name).toEqual({ code: 'not-found', message: `there is no VM with the id "${UNKNOWN_ID}"` });
      expect((await rejection(call('../../../etc/passwd'))).code, name).toBe('not-found');
      expect(await rejection(call(42)), name).toEqual({ code: 'invalid', message: 'a VM id must be text, got 42' });
      expect((await rejection(call({ toString: () => UNKNOWN_ID }))).code, name).toBe('invalid');
    }
    expect(existsSync(join(home, 'vms.json'))).toBe(false);
    expect(existsSync(join(home, 'logs'))).toBe(false);
  });

  it('creates, lists, clones, updates and deletes, with library events', async () => {
    const vm = await svc.createVm(probe);
    expect(vm.status).toEqual({ id: vm.id, state: 'stopped' });
    expect(vm.config).toMatchObject({ version: 1, name: 'probe-vm', guest: 'probe', machine: 'unhalt-1.2', pvmProfile: true });
    expect(events.at(-1)).toMatchObject({ type: 'library', vms: [{ id: vm.id }] });
    expect((await rejection(svc.createVm({ ...probe, name: 'PROBE-VM' })))).toMatchObject({ code: 'conflict', message: expect.stringMatching(/a VM named "probe-vm" already exists/) });

    const copy = await svc.cloneVm(vm.id);
    expect(copy.config.name).toBe('probe-vm-copy');
    expect((await svc.cloneVm(vm.id)).config.name).toBe('probe-vm-copy-2');
    expect((await rejection(svc.cloneVm(vm.id, 'bad/name'))).code).toBe('invalid');

    const updated = await svc.updateVm(copy.id, { ...probe, name: 'renamed', cpus: 2 });
    expect(updated.config).toMatchObject({ name: 'renamed', cpus: 2 });
    expect((await rejection(svc.updateVm(copy.id, { ...probe })))).toMatchObject({ code: 'conflict' });
    expect((await rejection(svc.updateVm(copy.id, { ...probe, name: 'ok', cpus: 0 })))).toMatchObject({ code: 'invalid', message: expect.stringMatching(/cpus must be between 1/) });

    expect((await svc.listVms()).map((v) => v.config.name)).toEqual(['probe-vm', 'renamed', 'probe-vm-copy-2']);
    await svc.deleteVm(copy.id);
    expect((await svc.listVms()).map((v) => v.config.name)).toEqual(['probe-vm', 'probe-vm-copy-2']);
    const saved = JSON.parse(readFileSync(join(home, 'vms.json'), 'utf8'));
    expect(saved.vms.map((v: { config: { name: string } }) => v.config.name)).toEqual(['probe-vm', 'probe-vm-copy-2']);
  });

  it('refuses wrong argument types and sizes on the live methods', async () => {
    const [vm] = await svc.listVms();
    const id = vm!.id;
    expect(await rejection(svc.stopVm(id, 'soon' as unknown as number))).toEqual({ code: 'invalid', message: 'grace period (ms) must be a whole number, got "soon"' });
    expect((await rejection(svc.stopVm(id, 10 ** 9))).message).toMatch(/grace period \(ms\) must be between 0 and 60000/);
    expect((await rejection(svc.setHaltPollNs(id, -1))).message).toMatch(/halt-poll-ns must be between 0 and 1000000000, got -1/);
    expect((await rejection(svc.setHaltPollNs(id, Number.NaN))).message).toMatch(/halt-poll-ns must be a whole number, got NaN/);
    expect((await rejection(svc.setPin(id, 'all' as unknown as number[]))).message).toMatch(/pin must be a list of whole numbers/);
    expect((await rejection(svc.setPin(id, new Array(5000).fill(0)))).code).toBe('too-large');
    expect(await rejection(svc.sendConsole(id, 'x'.repeat(100_000)))).toEqual({ code: 'too-large', message: 'console input is 100000 characters long; at most 65536 are allowed' });
    expect((await rejection(svc.sendConsole(id, 7 as unknown as string))).code).toBe('invalid');
    // Well-formed, but the VM does not run.
    expect(await rejection(svc.sendConsole(id, 'help\r'))).toEqual({ code: 'conflict', message: 'cannot type into a VM that is stopped' });
    expect((await rejection(svc.pauseVm(id))).code).toBe('conflict');
    // Stopping a stopped VM is not an error: it is already where the caller wants it.
    expect((await svc.stopVm(id)).state).toBe('stopped');
  });

  it('a subscription to a stopped VM backfills nothing yet and streams nothing', async () => {
    const [vm] = await svc.listVms();
    const sub = await svc.subscribe(vm!.id);
    expect(sub).toEqual({ vmId: vm!.id, backfill: { console: '', samples: [], markers: [], metrics: [] } });
    await svc.unsubscribe(vm!.id);
    await svc.unsubscribe(vm!.id); // twice is fine
  });

  it('the transport framing refuses what is not a call of api.ts', async () => {
    const cases: [unknown, RegExp][] = [
      [null, /a request must be an object/],
      [{ id: 'one', method: 'listVms', params: [] }, /non-negative whole-number id/],
      [{ id: 1, method: 'shutdown', params: [] }, /unknown method "shutdown"/],
      [{ id: 1, method: 'constructor', params: [] }, /unknown method "constructor"/],
      [{ id: 1, method: '__proto__', params: [] }, /unknown method "__proto__"/],
      [{ id: 1, method: 'connect', params: [] }, /unknown method "connect"/],
      [{ id: 1, method: 'getVm', params: 'x' }, /params must be a list/],
      [{ id: 1, method: 'getVm', params: [1, 2, 3, 4, 5] }, /too many params/],
    ];
    for (const [msg, re] of cases) {
      const out = await handleCall(svc, msg);
      expect(out).toMatchObject({ error: { code: 'invalid', message: expect.stringMatching(re) } });
    }
    expect(await handleCall(svc, { id: 7, method: 'getVm', params: [UNKNOWN_ID] })).toEqual({ id: 7, error: { code: 'not-found', message: `there is no VM with the id "${UNKNOWN_ID}"` } });
    expect(await handleCall(svc, { id: 8, method: 'listExperiments', params: [] })).toEqual({ id: 8, result: [] });
    expect(await handleCall(svc, { id: 9, method: 'unsubscribe', params: [UNKNOWN_ID] })).toEqual({ id: 9, result: null });
  });

  it('host info says what the host can run, and reports the library', async () => {
    const info = await svc.host();
    expect(info.machineTypes.map((m) => m.name)).toEqual(['unhalt-1.0', 'unhalt-1.1', 'unhalt-1.2']);
    expect(info.guests.find((g) => g.kind === 'probe')?.label).toMatch(/diagnostic guest/);
    // Unavailable for its own reason, with KVM or without (then the problem is said once, in kvmProblem).
    expect(info.options.find((o) => o.option === 'feature:kvm-msi-ext-dest-id')).toMatchObject({ available: false, reason: expect.stringMatching(/split irqchip/) });
    if (kvmAvailable) expect(info.kvmProblem).toBeUndefined();
    else expect(info.kvmProblem).toBe(`KVM is not usable on this host: ${describeKvmAccess(info.kvm)}`);
    expect(info.doctor.find((d) => d.name === 'library')).toMatchObject({ ok: true });
  });
});

describe('experiments through the service', () => {
  const spec: ExperimentSpec = {
    guest: 'probe', workload: 'ipi', runs: 2,
    configs: [{ name: 'A', config: 'cpus=2,halt-poll-ns=0' }, { name: 'B', config: 'cpus=2,halt-poll-ns=200000' }],
  };

  it('validates the spec before anything runs', async () => {
    const svc = await createService({ home: tempHome('exp'), loadExperimentRunner: async () => { throw new Error('not loaded'); } });
    const cases: [unknown, RegExp][] = [
      [null, /an experiment must be an object/],
      [{ ...spec, guest: 'dos' }, /experiment guest must be probe or linux/],
      [{ ...spec, workload: '../x' }, /must be a lower-case name/],
      [{ ...spec, configs: [spec.configs[0]] }, /at least two configurations/],
      [{ ...spec, configs: [spec.configs[0], { name: 'A', config: 'cpus=1' }] }, /two configurations are named "A"/],
      [{ ...spec, configs: [spec.configs[0], { name: 'B', config: 'cpus=zero' }] }, /configuration "B": cpus must be a whole number/],
      [{ ...spec, configs: [spec.configs[0], { name: 'B', config: 'turbo=on' }] }, /unknown key "turbo"/],
      [{ ...spec, runs: 0 }, /runs must be a whole number from 1 to 100/],
      [{ ...spec, vsQemu: 'yes' }, /vsQemu must be true or false/],
      [{ ...spec, extra: 1 }, /unknown experiment field "extra"/],
    ];
    for (const [s, re] of cases) expect(await rejection(svc.startExperiment(s as ExperimentSpec))).toMatchObject({ code: 'invalid', message: expect.stringMatching(re) });
    expect(await rejection(svc.startExperiment(spec))).toMatchObject({ code: 'host', message: expect.stringMatching(/experiments are not available in this build .*not loaded/) });
    expect((await rejection(svc.getExperiment('nope'))).code).toBe('not-found');
    expect((await rejection(svc.getExperiment('../vms'))).code).toBe('not-found');
    await svc.shutdown();
  });

  it('runs one, streams progress, keeps the result, lists it after a restart', async () => {
    const home = tempHome('exp');
    let release!: () => void;
    const gate = new Promise<void>((r) => { release = r; });
    const runner = {
      prepareExperiment: () => undefined,
      runExperiment: async (s: ExperimentSpec, onProgress: (p: { done: number; total: number; current?: string }) => void) => {
        onProgress({ done: 0, total: 4, current: 'A (unhalt) run 1/2' });
        await gate;
        onProgress({ done: 4, total: 4 });
        return {
          rows: s.configs.map((c, i) => ({ config: c.name, runner: 'unhalt', unit: 'ns', median: 100 + i, min: 90, max: 120, ratioToFirst: i ? 1.01 : 1, ratioToReference: null, haltExitsPerS: 10, pollHitRate: null, runs: [100, 101] })),
          environment: { host: 'test' }, raw: [], notes: ['a note'],
        };
      },
    };
    const svc = await createService({ home, loadExperimentRunner: async () => runner });
    const seen: ApiEvent[] = [];
    svc.on((e) => seen.push(e));
    const started = await svc.startExperiment(spec);
    expect(started).toMatchObject({ state: 'running', progress: { total: 4 } });
    expect(await rejection(svc.startExperiment(spec))).toMatchObject({ code: 'conflict' });
    expect((await svc.listExperiments()).map((e) => e.id)).toEqual([started.id]);
    release();
    await new Promise((r) => setTimeout(r, 50));
    const detail = await svc.getExperiment(started.id);
    expect(detail).toMatchObject({ state: 'done', progress: { done: 4, total: 4 }, environment: { host: 'test' } });
    expect(detail.rows.map((r) => r.config)).toEqual(['A', 'B']);
    expect(seen.filter((e) => e.type === 'experiment').at(-1)).toMatchObject({ experiment: { id: started.id, state: 'done' } });
    await svc.shutdown();
    expect(readdirSync(join(home, 'experiments'))).toEqual([`${started.id}.json`]);

    const again = await createService({ home, loadExperimentRunner: async () => runner });
    expect((await again.listExperiments())).toMatchObject([{ id: started.id, state: 'done' }]);
    await again.shutdown();
  });

  it('an experiment left running by a dead process shows as interrupted; bench results are listed', async () => {
    const home = tempHome('exp');
    mkdirSync(join(home, 'experiments'));
    writeFileSync(join(home, 'experiments', 'exp-abc-0123abcd.json'), JSON.stringify({ id: 'exp-abc-0123abcd', createdAt: 1, spec, state: 'running', progress: { done: 1, total: 4 }, rows: [], environment: {}, ownerPid: 999_999_999 }));
    writeFileSync(join(home, 'experiments', '2025-01-01T00-00-00-000Z-12345678.json'), JSON.stringify({ id: '2025-01-01T00-00-00-000Z-12345678', createdAt: 2, spec, rows: [], raw: [{}, {}], environment: {} }));
    writeFileSync(join(home, 'experiments', 'garbage.json'), '{');
    const svc = await createService({ home });
    expect(await svc.listExperiments()).toMatchObject([
      { id: '2025-01-01T00-00-00-000Z-12345678', state: 'done', progress: { done: 2, total: 2 } },
      { id: 'exp-abc-0123abcd', state: 'failed', error: expect.stringMatching(/interrupted/) },
    ]);
    await svc.shutdown();
  });
});

describe('a damaged library through the service', () => {
  it('is reported in host() and the service starts with an empty library', async () => {
    const home = tempHome('corrupt');
    writeFileSync(join(home, 'vms.json'), '\0\0\0 not json');
    const svc = await createService({ home });
    expect(await svc.listVms()).toEqual([]);
    const entry = (await svc.host()).doctor.find((d) => d.name === 'library');
    expect(entry).toMatchObject({ ok: false, detail: expect.stringMatching(/is damaged: not valid JSON/), fix: expect.stringMatching(/vms\.json\.corrupt-/) });
    await svc.createVm(probe);
    expect(readdirSync(home).filter((f) => f.startsWith('vms.json.corrupt-'))).toHaveLength(1);
    await svc.shutdown();
  });
});

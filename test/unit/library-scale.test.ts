// The library at its limit (issue 13, finding 1), through the service: 1,000 VMs are created,
// listed, survive a restart and load quickly; the 1,001st create (and a clone) is refused naming
// the limit, and nothing is lost. A record this version refuses is kept aside, the others load,
// and the service says so — in host().library and the doctor entry — also after a restart.
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { MAX_VMS } from '../../electron/service/library-schema.ts';
import { createService } from '../../electron/service/service.ts';
import { runCli } from '../support/cli.ts';
import { rejection } from '../support/api-errors.ts';
import { removeTempHomes, tempHome } from '../support/temp-home.ts';

afterAll(removeTempHomes);


describe('a library of 1,000 VMs', () => {
  it('is created, listed, restarted and loaded; the 1,001st create and a clone are refused with the limit', async () => {
    const home = tempHome('scale');
    const svc = await createService({ home });
    const t0 = performance.now();
    // Concurrent creates: the store's queue serializes them, each one whole-file atomic write.
    await Promise.all(Array.from({ length: MAX_VMS }, (_, i) => svc.createVm({ name: `vm-${i}`, guest: 'probe', memoryMiB: 64, append: 'scenario=echo' })));
    const createdMs = performance.now() - t0;
    const t1 = performance.now();
    const listed = await svc.listVms();
    const listMs = performance.now() - t1;
    expect(listed).toHaveLength(MAX_VMS);

    const full = await rejection(svc.createVm({ name: 'one-too-many', guest: 'probe', memoryMiB: 64 }));
    expect(full).toMatchObject({ code: 'conflict', message: 'the library holds at most 1000 VMs; delete some before adding more' });
    expect((await rejection(svc.cloneVm(listed[0]!.id))).message).toBe(full.message);
    expect(await svc.listVms()).toHaveLength(MAX_VMS);
    expect((await svc.host()).library).toMatchObject({ vms: MAX_VMS, maxVms: MAX_VMS, notices: [] });
    await svc.shutdown();

    const t2 = performance.now();
    const again = await createService({ home });
    const reopenMs = performance.now() - t2;
    const t3 = performance.now();
    const reloaded = await again.listVms();
    const reloadListMs = performance.now() - t3;
    expect(reloaded.map((v) => v.config.name).sort()).toEqual(listed.map((v) => v.config.name).sort());
    // Still editable at the limit: delete one, then one create fits again.
    await again.deleteVm(reloaded[0]!.id);
    await again.createVm({ name: 'fits-again', guest: 'probe', memoryMiB: 64 });
    expect(await again.listVms()).toHaveLength(MAX_VMS);
    expect((await again.host()).doctor.find((d) => d.name === 'library')).toMatchObject({ ok: true });
    await again.shutdown();
    const bytes = readFileSync(join(home, 'vms.json')).length;
    process.stdout.write(`library scale: ${MAX_VMS} creates ${createdMs.toFixed(0)} ms (${(createdMs / MAX_VMS).toFixed(1)} ms each), list ${listMs.toFixed(1)} ms, `
      + `restart (open + load) ${reopenMs.toFixed(1)} ms, list after restart ${reloadListMs.toFixed(1)} ms, vms.json ${(bytes / 1024).toFixed(0)} KiB\n`);
    // Liveness, not a timing target (bench/ owns those): a load that took seconds would be a bug.
    expect(reopenMs + reloadListMs).toBeLessThan(10_000);
  }, 300_000);
});

describe('a record this version refuses, through the service', () => {
  it('hides nothing else, and the notice is in host().library and the doctor after a restart until dismissed', async () => {
    const home = tempHome('quarantine');
    const first = await createService({ home });
    await first.createVm({ name: 'kept-1', guest: 'probe', memoryMiB: 64 });
    await first.createVm({ name: 'kept-2', guest: 'probe', memoryMiB: 64 });
    await first.shutdown();
    // As if a newer Unhalt had saved a VM on a machine type this one does not know.
    const file = JSON.parse(readFileSync(join(home, 'vms.json'), 'utf8'));
    file.vms.splice(1, 0, { ...file.vms[0], id: 'from-the-future', config: { ...file.vms[0].config, name: 'future', machine: 'unhalt-9.0' } });
    writeFileSync(join(home, 'vms.json'), JSON.stringify(file));

    const svc = await createService({ home });
    expect((await svc.listVms()).map((v) => v.config.name)).toEqual(['kept-1', 'kept-2']);
    await svc.shutdown();

    const later = await createService({ home });
    const { library, doctor } = await later.host();
    expect(library.notices).toHaveLength(1);
    const [n] = library.notices;
    expect(n).toMatchObject({ severity: 'error', message: expect.stringMatching(/^1 VM record in .*vms\.json could not be loaded \(VM #2 \(from-the-future\): unknown machine type "unhalt-9\.0".*\) and was kept aside in .*vms\.json\.quarantine-.*; the other 2 VMs loaded$/) });
    expect(JSON.parse(readFileSync(n!.movedTo!, 'utf8')).records[0].record.config.name).toBe('future');
    expect(doctor.find((d) => d.name === 'library')).toMatchObject({ ok: false, fix: expect.stringContaining(n!.movedTo!) });
    // `unhalt doctor` says it too, from the notice on disk.
    const cli = await runCli(['doctor'], { env: { UNHALT_HOME: home } });
    expect(cli.stdout).toContain(`FAIL  library: ${n!.message}`);
    expect(cli.stdout).toContain(`-> what was set aside is in ${n!.movedTo}`);
    expect(cli.code).toBe(1);
    await later.dismissLibraryNotices();
    expect((await runCli(['doctor'], { env: { UNHALT_HOME: home } })).stdout).not.toContain('library:');
    expect((await later.host()).library.notices).toEqual([]);
    expect((await later.listVms()).map((v) => v.config.name)).toEqual(['kept-1', 'kept-2']);
    await later.shutdown();
  });
});

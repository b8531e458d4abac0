// The VM library file: atomic writes, schema validation, v0 -> v1 migration, corrupt and
// newer-version files moved aside (never overwritten), and the cross-process lock.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, statSync, symlinkSync, utimesSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { FileLock, LockBusyError, LockFileError, processStartTime } from '../../electron/service/file-lock.ts';
import { createService } from '../../electron/service/service.ts';
import { rejection } from '../support/api-errors.ts';
import { MAX_VMS, parseLibrary, LibraryFileError, type LibraryRecord } from '../../electron/service/library-schema.ts';
import { LibraryStore } from '../../electron/service/library-store.ts';
import { validateConfig } from '../../electron/vmm/config/vm-config.ts';
import { removeTempHomes, tempHome } from '../support/temp-home.ts';

afterAll(removeTempHomes);

const rec = (name: string, id = `id-${name.toLowerCase()}`): LibraryRecord =>
  ({ id, config: validateConfig({ name, guest: 'probe', cpus: 2 }), createdAt: 1000, updatedAt: 1000 });

describe('library store', () => {
  it('saves atomically and loads what it saved', async () => {
    const home = tempHome();
    const a = await LibraryStore.open(home);
    expect(a.list()).toEqual([]);
    await a.mutate((vms) => { vms.push(rec('one'), rec('two')); });
    const text = readFileSync(join(home, 'vms.json'), 'utf8');
    expect(JSON.parse(text).schema).toBe(1);
    expect(statSync(join(home, 'vms.json')).mode & 0o777).toBe(0o600);
    // No temp files and no lock left behind.
    expect(readdirSync(home).sort()).toEqual(['vms.json']);
    const b = await LibraryStore.open(home);
    expect(b.list().map((r) => r.config.name)).toEqual(['one', 'two']);
  });

  it('a change that throws writes nothing', async () => {
    const home = tempHome();
    const s = await LibraryStore.open(home);
    await s.mutate((vms) => { vms.push(rec('keep')); });
    const before = readFileSync(join(home, 'vms.json'), 'utf8');
    await expect(s.mutate((vms) => { vms.push(rec('lost')); throw new Error('no'); })).rejects.toThrow('no');
    expect(readFileSync(join(home, 'vms.json'), 'utf8')).toBe(before);
    expect(s.list().map((r) => r.config.name)).toEqual(['keep']);
  });

  it('queues changes within one process: 20 concurrent adds all land', async () => {
    const s = await LibraryStore.open(tempHome());
    await Promise.all(Array.from({ length: 20 }, (_, i) => s.mutate((vms) => { vms.push(rec(`vm${i}`)); })));
    expect(s.list()).toHaveLength(20);
  });

  it('sees a change another store (process) made', async () => {
    const home = tempHome();
    const a = await LibraryStore.open(home);
    const b = await LibraryStore.open(home);
    await b.mutate((vms) => { vms.push(rec('from-b')); });
    expect(a.list().map((r) => r.config.name)).toEqual(['from-b']);
    // And a's next change starts from b's content, not from its own stale copy.
    await a.mutate((vms) => { vms.push(rec('from-a')); });
    expect(b.list().map((r) => r.config.name)).toEqual(['from-b', 'from-a']);
  });

  it('moves a corrupt file aside, reports it, and never overwrites it', async () => {
    const home = tempHome();
    const garbage = '{"schema": 1, "vms": [ {"id": "x", "config": ';
    writeFileSync(join(home, 'vms.json'), garbage);
    const notices: string[] = [];
    const s = await LibraryStore.open(home, { onNotice: (n) => notices.push(n.message) });
    expect(s.list()).toEqual([]);
    expect(s.notices).toHaveLength(1);
    expect(s.notices[0]!.severity).toBe('error');
    expect(notices[0]).toMatch(/is damaged: not valid JSON .*moved to .*vms\.json\.corrupt-/);
    const aside = s.notices[0]!.movedTo!;
    expect(readFileSync(aside, 'utf8')).toBe(garbage);
    await s.mutate((vms) => { vms.push(rec('fresh')); });
    expect(readFileSync(aside, 'utf8')).toBe(garbage);
    expect(readdirSync(home).filter((f) => f.includes('corrupt'))).toHaveLength(1);
  });

  it('one invalid VM is kept aside in a quarantine file; the others load and the notice stays on disk', async () => {
    const home = tempHome();
    const bad = { id: 'a', config: { cpus: 'lots' }, createdAt: 1, updatedAt: 1 };
    const future = { ...rec('future'), config: { ...rec('future').config, machine: 'unhalt-9.9' } };
    writeFileSync(join(home, 'vms.json'), JSON.stringify({ schema: 1, vms: [bad, rec('good'), future, rec('also-good')] }));
    const s = await LibraryStore.open(home);
    expect(s.list().map((r) => r.config.name)).toEqual(['good', 'also-good']);
    const [n] = s.notices;
    expect(n!.severity).toBe('error');
    expect(n!.message).toMatch(/^2 VM records in .*vms\.json could not be loaded \(VM #1 \(a\): cpus must be a whole number.*; VM #3 \(id-future\): unknown machine type "unhalt-9\.9".*\) and were kept aside in .*vms\.json\.quarantine-.*; the other 2 VMs loaded$/);
    const q = JSON.parse(readFileSync(n!.movedTo!, 'utf8'));
    expect(q.records.map((r: { record: unknown }) => r.record)).toEqual([bad, future]);
    // The library on disk now holds the good ones; a restart loads them quietly and still says what happened.
    const again = await LibraryStore.open(home);
    expect(again.list().map((r) => r.config.name)).toEqual(['good', 'also-good']);
    expect(again.notices).toHaveLength(1);
    expect(readdirSync(home).filter((f) => f.includes('quarantine'))).toHaveLength(1);
    again.dismissNotices();
    expect((await LibraryStore.open(home)).notices).toEqual([]);
  });

  it('a damaged file\'s notice survives a restart', async () => {
    const home = tempHome();
    writeFileSync(join(home, 'vms.json'), '{"schema": 1, "vms": [');
    await LibraryStore.open(home);
    const later = await LibraryStore.open(home);
    expect(later.notices).toHaveLength(1);
    expect(later.notices[0]!.message).toMatch(/is damaged: not valid JSON .*moved to .*vms\.json\.corrupt-/);
  });

  it('refuses to grow past MAX_VMS (nothing written) and keeps the excess of an over-full file aside', async () => {
    const home = tempHome();
    const s = await LibraryStore.open(home);
    await s.mutate((vms) => { for (let i = 0; i < MAX_VMS; i++) vms.push(rec(`vm${i}`)); });
    const before = readFileSync(join(home, 'vms.json'), 'utf8');
    await expect(s.mutate((vms) => { vms.push(rec('one-too-many')); })).rejects.toThrow(`the library holds at most ${MAX_VMS} VMs; delete some before adding more`);
    expect(readFileSync(join(home, 'vms.json'), 'utf8')).toBe(before);
    expect(s.list()).toHaveLength(MAX_VMS);
    expect(s.notices).toEqual([]);
    // An over-full file (an older Unhalt had no limit on creates): the first MAX_VMS load, the rest wait aside.
    const over = JSON.parse(before);
    over.vms.push(rec('extra-1'), rec('extra-2'));
    writeFileSync(join(home, 'vms.json'), JSON.stringify(over));
    const t = await LibraryStore.open(home);
    expect(t.list()).toHaveLength(MAX_VMS);
    expect(t.notices[0]!.message).toMatch(/^2 VM records .*VM #1001 is past the limit: the library holds at most 1000 VMs/);
    const q = JSON.parse(readFileSync(t.notices[0]!.movedTo!, 'utf8'));
    expect(q.records.map((r: { record: LibraryRecord }) => r.record.config.name)).toEqual(['extra-1', 'extra-2']);
  });

  it('a library from a newer Unhalt is kept aside, not read wrongly', async () => {
    const home = tempHome();
    writeFileSync(join(home, 'vms.json'), JSON.stringify({ schema: 7, vms: [], somethingNew: true }));
    const s = await LibraryStore.open(home);
    expect(s.notices[0]!.message).toMatch(/written by a newer Unhalt \(library schema 7; this one reads up to 1\)/);
    expect(JSON.parse(readFileSync(s.notices[0]!.movedTo!, 'utf8')).schema).toBe(7);
  });

  it('migrates schema 0 and keeps the original', async () => {
    const home = tempHome();
    const v0 = {
      vms: {
        'old-one': { name: 'legacy', cpus: 2, memory: '256M', cmdline: 'scenario=echo', overcommit: { cpuPm: true }, created: '2024-05-01T10:00:00Z' },
        'old-two': { name: 'big', cpus: '4', memory: '1G', features: { 'kvm-pv-unhalt': false }, haltPollNs: 0 },
      },
    };
    writeFileSync(join(home, 'vms.json'), JSON.stringify(v0));
    const s = await LibraryStore.open(home);
    const [a, b] = s.list();
    expect(a).toMatchObject({ id: 'old-one', createdAt: Date.parse('2024-05-01T10:00:00Z') });
    expect(a!.config).toMatchObject({ name: 'legacy', cpus: 2, memoryMiB: 256, append: 'scenario=echo', cpuPm: true, machine: 'unhalt-1.0', guest: 'probe' });
    expect(b!.config).toMatchObject({ name: 'big', cpus: 4, memoryMiB: 1024, cpuFeatures: { 'kvm-pv-unhalt': false }, haltPollNs: 0 });
    expect(JSON.parse(readFileSync(join(home, 'vms.json'), 'utf8')).schema).toBe(1);
    expect(s.notices[0]).toMatchObject({ severity: 'info' });
    const backup = readdirSync(home).find((f) => f.startsWith('vms.json.schema0-'))!;
    expect(JSON.parse(readFileSync(join(home, backup), 'utf8'))).toEqual(v0);
  });

  it('a bad schema-0 file is corrupt, with the reason; a bad schema-0 record only is kept aside', () => {
    const v0 = parseLibrary(JSON.stringify({ vms: { x: { name: 'a', cpus: 1, memory: 'lots' }, y: { name: 'b', cpus: 1, memory: '64M' } } }));
    expect(v0.file.vms.map((r) => r.id)).toEqual(['y']);
    expect(v0.quarantined).toEqual([{ record: { x: { name: 'a', cpus: 1, memory: 'lots' } }, reason: expect.stringMatching(/memory "lots", not like 512M/) }]);
    expect(() => parseLibrary(JSON.stringify({ vms: [] }))).toThrow(LibraryFileError);
    expect(() => parseLibrary('[]')).toThrow(/top level is not an object/);
    expect(() => parseLibrary(JSON.stringify({ schema: 1, vms: [], extra: 1 }))).toThrow(/unknown top-level field "extra"/);
    // Record-level problems quarantine that record only.
    expect(parseLibrary(JSON.stringify({ schema: 1, vms: [rec('a', 'same'), rec('b', 'same')] })).quarantined.map((q) => q.reason)).toEqual(['VM #2 repeats the id same']);
    expect(parseLibrary(JSON.stringify({ schema: 1, vms: [rec('a', '../../etc')] })).quarantined.map((q) => q.reason)).toEqual(['VM #1 has no valid id']);
  });
});

describe('library lock', () => {
  it('a second writer is refused while the lock is held, and gets it once released', async () => {
    const home = tempHome();
    const first = await LibraryStore.open(home);
    const second = await LibraryStore.open(home, { lock: { timeoutMs: 150 } });
    const held = await FileLock.acquire(first.lockPath);
    await expect(second.mutate((vms) => { vms.push(rec('blocked')); })).rejects.toBeInstanceOf(LockBusyError);
    expect(existsSync(join(home, 'vms.json'))).toBe(false);
    held.release();
    await second.mutate((vms) => { vms.push(rec('now')); });
    expect(first.list().map((r) => r.config.name)).toEqual(['now']);
  });

  it('a waiting writer proceeds as soon as the holder releases', async () => {
    const home = tempHome();
    const s = await LibraryStore.open(home, { lock: { timeoutMs: 5000 } });
    const held = await FileLock.acquire(s.lockPath);
    setTimeout(() => held.release(), 100);
    const t = performance.now();
    await s.mutate((vms) => { vms.push(rec('after-wait')); });
    expect(performance.now() - t).toBeGreaterThanOrEqual(90);
    expect(s.list()).toHaveLength(1);
  });

  it('a lock left by a dead process is broken', async () => {
    const home = tempHome();
    const s = await LibraryStore.open(home, { lock: { timeoutMs: 500 } });
    // A real pid that is certainly gone: a child that has exited.
    const dead = spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))'], { encoding: 'utf8' });
    writeFileSync(s.lockPath, `${dead.stdout} 12345\n`);
    await s.mutate((vms) => { vms.push(rec('after-stale')); });
    expect(s.list()).toHaveLength(1);
    expect(existsSync(s.lockPath)).toBe(false);
  });

  it('a lock whose pid was reused by a younger process is stale too', () => {
    const path = join(tempHome(), 'x.lock');
    // Our own pid, but with a start time that is not ours: the recorded holder is gone.
    writeFileSync(path, `${process.pid} 1\n`);
    const lock = FileLock.tryAcquire(path);
    expect(lock).not.toBeNull();
    lock!.release();
  });

  it('a lock whose holder cannot be proven alive is broken: pid 1 with no start time, left a minute ago (issue 30 #10)', () => {
    const path = join(tempHome(), 'z.lock');
    // pid 1 lives, but "0" proves no start time: a fresh one is waited for (a taker where /proc
    // could not say writes it), one left for over a minute is a leftover and broken.
    writeFileSync(path, '1 0\n');
    expect(FileLock.tryAcquire(path)).toBeNull();
    const old = (Date.now() - 120_000) / 1000;
    utimesSync(path, old, old);
    const lock = FileLock.tryAcquire(path);
    expect(lock).not.toBeNull();
    lock!.release();
    // pid 1 with its own start time is a live holder, and is waited for.
    writeFileSync(path, `1 ${processStartTime(1)}\n`);
    expect(FileLock.tryAcquire(path)).toBeNull();
  });

  it('a directory, FIFO or symbolic link where the lock goes is named in one line, and the API says conflict (issue 30 #12)', async () => {
    const home = tempHome();
    const s = await LibraryStore.open(home, { lock: { timeoutMs: 200 } });
    mkdirSync(s.lockPath);
    const err = await s.mutate((vms) => { vms.push(rec('x')); }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(LockFileError);
    expect((err as Error).message).toBe(`the lock file ${s.lockPath} is a directory, which Unhalt never makes there (it makes and removes that file itself): remove it (rmdir ${s.lockPath}) and try again`);
    const svc = await createService({ home, lockTimeoutMs: 200 });
    try {
      const r = await rejection(svc.createVm(validateConfig({ name: 'x', guest: 'probe' })));
      expect(r).toEqual({ code: 'conflict', message: (err as Error).message });
    } finally {
      await svc.shutdown();
    }
    const other = join(tempHome(), 'v.lock');
    symlinkSync('/dev/zero', other);
    expect(() => FileLock.tryAcquire(other)).toThrow(`the lock file ${other} is a symbolic link, which Unhalt never makes there`);
    const fifo = join(tempHome(), 'f.lock');
    expect(spawnSync('mkfifo', [fifo]).status).toBe(0);
    expect(() => FileLock.tryAcquire(fifo)).toThrow(`the lock file ${fifo} is a FIFO`);
  });

  it('a live holder is respected (this process holds it)', () => {
    const path = join(tempHome(), 'y.lock');
    const a = FileLock.tryAcquire(path)!;
    expect(FileLock.tryAcquire(path)).toBeNull();
    a.release();
    expect(FileLock.tryAcquire(path)).not.toBeNull();
  });
});

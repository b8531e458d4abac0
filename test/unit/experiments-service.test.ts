// Cancel and delete through the service: a cancelled experiment is kept as "cancelled", a running
// one cannot be deleted, a finished one goes from the list and from disk (with an event). The
// runner here is a stand-in that waits for its AbortSignal (the real runner's cancel is tested
// with real VMs and QEMU in test/kvm/experiment-cancel.test.ts).
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { ApiEvent, ExperimentSpec } from '../../electron/service/api.ts';
import { createService } from '../../electron/service/service.ts';
import { rejection } from '../support/api-errors.ts';
import { removeTempHomes, tempHome } from '../support/temp-home.ts';

afterAll(removeTempHomes);

const spec: ExperimentSpec = {
  guest: 'probe', workload: 'ipi', runs: 5, vsQemu: true,
  configs: [{ name: 'A', config: 'cpus=2,halt-poll-ns=0' }, { name: 'B', config: 'cpus=2' }],
};

const waitingRunner = {
  prepareExperiment: () => undefined,
  runExperiment: (_s: ExperimentSpec, onProgress: (p: { done: number; total: number; current?: string }) => void, signal?: AbortSignal) =>
    new Promise<never>((_resolve, reject) => {
      onProgress({ done: 0, total: 20, current: 'A (unhalt) run 1/5' });
      signal!.addEventListener('abort', () => reject(new Error('the experiment was cancelled')));
    }),
};

describe('experiments: cancel and delete', () => {
  it('cancels a running experiment, refuses to delete it while it runs, deletes it after', async () => {
    const home = tempHome('exp-cancel');
    const svc = await createService({ home, loadExperimentRunner: async () => waitingRunner });
    const seen: ApiEvent[] = [];
    svc.on((e) => seen.push(e));
    const started = await svc.startExperiment(spec);
    // Every run counts in the total: 2 configs x 2 VMMs x 5 runs.
    expect(started.progress.total).toBe(20);
    expect(await rejection(svc.deleteExperiment(started.id))).toMatchObject({ code: 'conflict', message: expect.stringMatching(/is running; cancel it first/) });
    const cancelled = await svc.cancelExperiment(started.id);
    expect(cancelled).toMatchObject({ id: started.id, state: 'cancelled', error: 'cancelled by the user' });
    expect(await svc.getExperiment(started.id)).toMatchObject({ state: 'cancelled' });
    expect(await rejection(svc.cancelExperiment(started.id))).toMatchObject({ code: 'conflict', message: expect.stringMatching(/is not running \(it is cancelled\)/) });
    // A new one may start once it has stopped.
    const second = await svc.startExperiment(spec);
    await svc.cancelExperiment(second.id);

    const file = join(home, 'experiments', `${started.id}.json`);
    expect(existsSync(file)).toBe(true);
    await svc.deleteExperiment(started.id);
    expect(existsSync(file)).toBe(false);
    expect((await svc.listExperiments()).map((e) => e.id)).toEqual([second.id]);
    expect(seen).toContainEqual({ type: 'experiment-deleted', id: started.id });
    expect(await rejection(svc.deleteExperiment(started.id))).toMatchObject({ code: 'not-found' });
    expect(await rejection(svc.cancelExperiment('nope'))).toMatchObject({ code: 'not-found' });
    await svc.shutdown();
  });

  it('refuses Runs = 0 with the same message as every surface, and gives old results their verdicts', async () => {
    const home = tempHome('exp-old');
    mkdirSync(join(home, 'experiments'));
    const rows = [
      { config: 'A', runner: 'unhalt', unit: 'ns', median: 100, min: 98, max: 103, ratioToFirst: 1, ratioToReference: null, haltExitsPerS: null, pollHitRate: null, runs: [100, 98, 101, 103, 99] },
      { config: 'B', runner: 'unhalt', unit: 'ns', median: 50, min: 48, max: 53, ratioToFirst: 0.5, ratioToReference: null, haltExitsPerS: null, pollHitRate: null, runs: [50, 48, 51, 53, 49] },
    ];
    writeFileSync(join(home, 'experiments', 'old-1.json'), JSON.stringify({ id: 'old-1', createdAt: 1, spec, rows, environment: {} }));
    const svc = await createService({ home, loadExperimentRunner: async () => waitingRunner });
    expect(await rejection(svc.startExperiment({ ...spec, runs: 0 }))).toMatchObject({ code: 'invalid', message: 'runs must be a whole number from 1 to 100, got 0' });
    const old = await svc.getExperiment('old-1');
    expect(old.comparisons).toMatchObject([{ baseline: 'A', candidate: 'B', runner: 'unhalt', verdict: 'better', significant: true }]);
    await svc.shutdown();
  });
});

// Where KVM cannot be opened, an experiment or a tune that is good in itself is refused at once
// with the sentence the app's notice shows (HostInfo.kvmProblem): code "host", one line, and
// nothing is created (no record, nothing "running"). A bad request is still refused in its own
// words first. The service is pointed at a KVM device that does not exist, so this is the same
// on every host; the real runner and advisor are loaded, as the app loads them.
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { createService } from '../../electron/service/service.ts';
import { rejection } from '../support/api-errors.ts';
import { tempHome } from '../support/temp-home.ts';
import { withoutKvm } from '../support/no-kvm.ts';

withoutKvm();

const SENTENCE = /^KVM is not usable on this host: UNHALT_KVM_DEVICE names \/nonexistent\/kvm, a path that does not exist\. To fix: [^\n]+$/;

describe('without KVM, experiments and tunes are refused at once with the notice\'s sentence', () => {
  it('startExperiment and startTune: code host, the notice\'s words, nothing created', async () => {
    const home = tempHome('no-kvm-exp');
    const svc = await createService({ home });
    try {
      const notice = (await svc.host()).kvmProblem;
      expect(notice).toMatch(SENTENCE);
      const exp = await rejection(svc.startExperiment({
        guest: 'probe', workload: 'timer', runs: 5, configs: [{ name: 'A', config: 'cpus=1,halt-poll-ns=0' }, { name: 'B', config: 'cpus=1' }],
      }));
      expect(exp).toEqual({ code: 'host', message: notice });
      const vm = await svc.createVm({ name: 'adv', guest: 'probe', cpus: 1 });
      const tune = await rejection(svc.startTune(vm.id, { workload: 'timer', goal: 'latency-p50', budgetS: 60 }));
      expect(tune).toEqual({ code: 'host', message: notice });
      expect(await svc.listExperiments()).toEqual([]);
      const dir = join(home, 'experiments');
      expect(existsSync(dir) ? readdirSync(dir) : []).toEqual([]);
      // A bad request is refused in its own words, on this host too.
      expect(await rejection(svc.startExperiment({
        guest: 'probe', workload: 'nope', runs: 5, configs: [{ name: 'A', config: 'cpus=1' }, { name: 'B', config: 'cpus=1' }],
      }))).toMatchObject({ code: 'invalid', message: expect.stringMatching(/^unknown probe workload "nope"; valid: ipi, timer/) });
      expect(await rejection(svc.startTune(vm.id, { workload: 'timer', goal: 'latency-p50', budgetS: 5 })))
        .toMatchObject({ code: 'invalid', message: expect.stringMatching(/the budget must be from 10 s/) });
      // The library's VM is untouched by the refused tune.
      expect((await svc.getVm(vm.id)).status.state).toBe('stopped');
    } finally {
      await svc.shutdown();
    }
  });
});

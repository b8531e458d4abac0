// The advisor through the service, without running VMs: startTune refuses bad requests with the
// one check's words (tune.ts) and starts nothing; applyTune stores a finished tune's
// recommendation in a stopped VM's configuration (machine type kept, the record marked) and
// refuses what has nothing to apply. A real tune on KVM: test/kvm/tune.test.ts; the UI:
// test/e2e/tune.test.ts.
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { Advice } from '../../electron/experiments/advisor.ts';
import { createService } from '../../electron/service/service.ts';
import { rejection } from '../support/api-errors.ts';
import { removeTempHomes, tempHome } from '../support/temp-home.ts';

afterAll(removeTempHomes);

function tuneRecord(id: string, vmId: string, recommendation: Advice['recommendation']): object {
  const advice = {
    goal: { kind: 'latency-p50' }, goalText: 'lowest p50 (ns)', unit: 'ns', metricUnit: 'ns', better: 'lower', recommendation,
    headline: recommendation.kind === 'change' ? `${recommendation.label}: better` : 'keep the current configuration: no knob made a significant difference',
    why: [], confidence: { candidates: 8, alpha: 0.05 / 8, significant: recommendation.kind === 'change', text: '' },
    current: { label: 'current', delta: {}, stage: 'current', runs: 10, median: 60000, valueMedian: 60000 },
    points: [], curve: [], skipped: [], budget: { budgetMs: 60000, usedMs: 50000, rounds: 5, runs: 50, stoppedBy: 'budget' },
  };
  return {
    id, createdAt: Date.now(), kind: 'tune', state: 'done', progress: { done: 60, total: 60 },
    tune: { guest: 'probe', workload: 'timer', config: 'cpus=1,memory=128,machine=unhalt-1.0', goal: 'latency-p50', budgetS: 60, vmId },
    spec: { guest: 'probe', workload: 'timer', configs: [{ name: 'current', config: 'cpus=1' }], runs: 5 },
    rows: [], environment: {}, advice,
  };
}

describe('the advisor through the service', () => {
  it('refuses bad tune requests at once, in the words of the one check', async () => {
    const home = tempHome('tune-bad');
    const svc = await createService({ home });
    try {
      const vm = await svc.createVm({ name: 'adv', cpus: 1, machine: 'unhalt-1.0' });
      const bad: [unknown, RegExp][] = [
        [{ workload: 'timer', goal: 'latency-p50', budgetS: 5 }, /the budget must be from 10 s to 24 h, got 5/],
        [{ workload: 'nope', goal: 'latency-p50', budgetS: 60 }, /unknown probe workload "nope"; valid: ipi, timer/],
        [{ workload: 'timer', goal: 'fastest', budgetS: 60 }, /the goal must be one of latency-p50, latency-p99, throughput, host-cpu/],
        [{ workload: 'timer', goal: 'throughput', budgetS: 60 }, /workload timer measures a wake-up latency/],
        [{ workload: 'timer', goal: 'host-cpu', budgetS: 60 }, /needs --latency-bound N/],
        [{ workload: 'ipi', goal: 'latency-p50', budgetS: 60 }, /workload ipi needs at least 2 vCPUs; this configuration has 1/],
        [{ workload: 'timer', goal: 'latency-p50', budgetS: 60, extra: 1 }, /unknown tune field "extra"/],
      ];
      for (const [request, message] of bad) {
        expect(await rejection(svc.startTune(vm.id, request as never))).toMatchObject({ code: 'invalid', message: expect.stringMatching(message) });
      }
      expect(await svc.listExperiments()).toEqual([]);
    } finally {
      await svc.shutdown();
    }
  });

  it('applies a recommendation to a stopped VM, keeping its machine type, and records it in the tune', async () => {
    const home = tempHome('tune-apply');
    const svc = await createService({ home });
    try {
      const vm = await svc.createVm({ name: 'adv', cpus: 2, machine: 'unhalt-1.0', haltPollNs: 0 });
      const dir = join(home, 'experiments');
      mkdirSync(dir, { recursive: true });
      writeFileSync(join(dir, 'exp-tune-change.json'), JSON.stringify(tuneRecord('exp-tune-change', vm.id, { kind: 'change', label: 'halt-poll-ns=2000000,pin=0+1', delta: { haltPollNs: 2_000_000, pin: [0, 1] } })));
      writeFileSync(join(dir, 'exp-tune-keep.json'), JSON.stringify(tuneRecord('exp-tune-keep', vm.id, { kind: 'keep' })));
      const listed = await svc.listExperiments();
      expect(listed.map((x) => [x.id, x.kind])).toEqual(expect.arrayContaining([['exp-tune-change', 'tune'], ['exp-tune-keep', 'tune']]));

      const updated = await svc.applyTune('exp-tune-change', vm.id);
      expect(updated.config).toMatchObject({ name: 'adv', cpus: 2, machine: 'unhalt-1.0', haltPollNs: 2_000_000, pin: [0, 1] });
      expect((await svc.getVm(vm.id)).config.haltPollNs).toBe(2_000_000);
      const applied = (await svc.getExperiment('exp-tune-change')).applied!;
      expect(applied).toMatchObject({ vmId: vm.id, vmName: 'adv', config: 'cpus=2,memory=128,machine=unhalt-1.0,halt-poll-ns=2000000,pin=0+1' });
      expect(JSON.parse(readFileSync(join(dir, 'exp-tune-change.json'), 'utf8')).applied.vmId).toBe(vm.id);

      expect(await rejection(svc.applyTune('exp-tune-keep', vm.id))).toMatchObject({ code: 'conflict', message: 'the advice was to keep the current configuration: there is nothing to apply' });
      expect(await rejection(svc.applyTune('exp-none', vm.id))).toMatchObject({ code: 'not-found' });
      expect(await rejection(svc.applyTune('exp-tune-change', 'no-such-vm'))).toMatchObject({ code: 'not-found' });
    } finally {
      await svc.shutdown();
    }
  });
});

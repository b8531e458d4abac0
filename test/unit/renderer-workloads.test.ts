// The workloads Compare and the advisor offer and accept (renderer/src/lib/workloads.ts) are the
// server's (electron/experiments/workloads.ts): the same names in the same order per guest, each
// accepted by the server's one check, and a made-up one refused in the server's words. (That the
// module bundles without Node: test/unit/rules.test.ts.)
import { describe, expect, it } from 'vitest';
import { LINUX_WORKLOADS, WORKLOADS, workload } from '../../electron/experiments/workloads.ts';
import { savedWorkloadSummary, workloadChoices, workloadProblem } from '../../renderer/src/lib/workloads.ts';

describe('the renderer\'s workload list is the server\'s', () => {
  it('offers the same names per guest, and the field accepts exactly what the server accepts', () => {
    for (const [guest, server] of [['probe', WORKLOADS], ['linux', LINUX_WORKLOADS]] as const) {
      const offered = workloadChoices(guest).map((w) => w.name);
      expect(offered).toEqual(server.map((w) => w.name));
      for (const name of offered) {
        expect(workloadProblem(guest, name)).toBeUndefined();
        expect(workload(guest, name).name).toBe(name);
      }
    }
    for (const name of ['perf-pipe', 'perf-messaging', 'cyclictest', 'iperf3-tcp', 'stress-ng-switch', 'sockperf-tcp-rr']) {
      expect(workloadProblem('linux', name)).toBeUndefined();
    }
    for (const [guest, name] of [['linux', 'warp-drive'], ['probe', 'pipe'], ['linux', 'ipi']] as const) {
      let server = '';
      try { workload(guest, name); } catch (e) { server = (e as Error).message; }
      expect(server).toMatch(/^unknown (probe|linux) workload /);
      expect(workloadProblem(guest, name)).toBe(server);
    }
    // Typed with spaces around, as the form sends it (trimmed).
    expect(workloadProblem('linux', ' perf-pipe ')).toBeUndefined();
  });

  it('says what each needs and takes: vCPUs beyond one, the Linux workloads\' parameters with defaults', () => {
    const ipi = workloadChoices('probe').find((w) => w.name === 'ipi')!;
    expect(ipi.summary).toMatch(/; needs 2 vCPUs$/);
    expect(workloadChoices('linux').find((w) => w.name === 'perf-pipe')!.params).toBe('loops=1000000');
    expect(workloadChoices('probe').find((w) => w.name === 'timer')!.params).toBeUndefined();
  });
});

describe('a saved benchmark in the lists of Compare and the advisor', () => {
  it('says where its command runs and names the program', () => {
    expect(savedWorkloadSummary({ hostCmd: ['/usr/bin/wrk', '-c', '8'] })).toBe('your benchmark: host command /usr/bin/wrk');
    expect(savedWorkloadSummary({ guestCmd: ['stress-ng', '--cpu', '1'] })).toBe('your benchmark: guest command stress-ng');
  });
});

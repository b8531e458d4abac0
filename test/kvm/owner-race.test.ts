// One owner per UNHALT_HOME across kinds of owner (issue 12, item 1): the app's service (the
// same createService the Electron main process runs, here in this process) and `unhalt serve`
// race for one home, each then starting the same VM. Exactly one owns the home and runs the VM;
// the other is refused with the owner's identity, in either order of arrival. (Two serves
// racing: test/kvm/serve-owner.test.ts.)
import { afterAll, describe, expect, it } from 'vitest';
import { HomeBusyError } from '../../electron/service/home-owner.ts';
import { createService } from '../../electron/service/service.ts';
import { kvmAvailable } from '../support/probe.ts';
import { apiClient, startServe } from '../support/serve-child.ts';
import { removeTempHomes, tempHome } from '../support/temp-home.ts';

afterAll(removeTempHomes);

const demo = { name: 'shared', guest: 'probe', cpus: 1, memoryMiB: 64, append: 'scenario=echo' };

describe.skipIf(!kvmAvailable)('the app\'s service and `unhalt serve` on one home', () => {
  it('race for the home and the same VM: one owns and runs it, the other is refused naming it', async () => {
    const outcomes: string[] = [];
    for (let round = 0; round < 4; round++) {
      const home = tempHome('owner-race');
      // The VM both want, already in the library (made by a first, finished owner).
      const maker = await createService({ home, ownerCommand: 'maker' });
      const { id } = await maker.createVm(demo);
      await maker.shutdown();

      // Even rounds: both set off at once (this process is already running, so the app's
      // service usually gets there first); odd rounds: the app's service comes once serve is up.
      const serve = startServe(home);
      const app = async () => {
        if (round % 2 === 1) await serve.url;
        const svc = await createService({ home, ownerCommand: 'Unhalt app (test)' });
        const status = await svc.startVm(id);
        return { svc, status };
      };
      const [appResult] = await Promise.allSettled([app()]);
      const url = await serve.url;
      if (appResult.status === 'fulfilled') {
        // The app owns the home and runs the VM; serve was refused, naming this process.
        expect(appResult.value.status.state).toBe('running');
        expect(url, serve.stderr()).toBeUndefined();
        expect((await serve.exited).code).toBe(1);
        expect(serve.stderr()).toContain(`pid ${process.pid}, Unhalt app (test)`);
        expect(appResult.value.svc.runningVmIds()).toEqual([id]);
        await appResult.value.svc.shutdown();
        outcomes.push('app');
      } else {
        // serve owns it: the app's service was refused naming serve, and serve can run the VM.
        expect(appResult.reason).toBeInstanceOf(HomeBusyError);
        expect((appResult.reason as HomeBusyError).owner).toMatchObject({ pid: serve.child.pid, command: 'unhalt serve' });
        expect((appResult.reason as Error).message).toMatch(/is in use by another Unhalt process \(pid \d+, unhalt serve/);
        expect(url, serve.stderr()).toBeInstanceOf(URL);
        const api = await apiClient(url!);
        expect(await api.call('startVm', id)).toMatchObject({ result: { state: 'running' } });
        api.close();
        serve.child.kill('SIGTERM');
        expect((await serve.exited).code).toBe(0);
        outcomes.push('serve');
      }
    }
    process.stdout.write(`app's service vs serve, 4 races: won by ${outcomes.join(', ')}\n`);
  }, 180_000);
});

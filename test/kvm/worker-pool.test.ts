// The service's warm vCPU workers (worker-pool.ts keepVcpuWorkersWarm): a start takes the spares,
// they are replaced shortly after, a stop gives the VM's workers back to the pool (kept up to its
// limit, named vcpu-idle, instead of ending), the next start takes those without starting a
// thread, and the service's shutdown ends them all (each once loaded, the rule that keeps koffi's
// initialisation from killing the process), leaving no thread behind. That a VM started from
// spares runs is covered by the echo round trip here.
import { afterAll, describe, expect, it } from 'vitest';
import type { ApiEvent } from '../../electron/service/api.ts';
import { createService } from '../../electron/service/service.ts';
import { DEFAULT_IDLE_VCPU_WORKERS, spareVcpuWorkerCount } from '../../electron/vmm/vcpu/worker-pool.ts';
import { idleVcpuThreadCount, kvmAvailable, vcpuThreadCount } from '../support/probe.ts';
import { removeTempHomes, tempHome } from '../support/temp-home.ts';
import { scaled } from '../support/time-scale.ts';

afterAll(removeTempHomes);

async function eventually(what: string, ok: () => boolean, timeoutMs = scaled(20_000)): Promise<void> {
  const t0 = performance.now();
  while (!ok()) {
    if (performance.now() - t0 > timeoutMs) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe.skipIf(!kvmAvailable)('warm vCPU workers in the service', () => {
  it('a start takes the spares, they are replaced, a stop returns the VM\'s, and shutdown ends them all', async () => {
    expect(vcpuThreadCount() + idleVcpuThreadCount()).toBe(0);
    const svc = await createService({ home: tempHome('warm-pool'), spareVcpuWorkers: 2 });
    expect(spareVcpuWorkerCount()).toBe(2);
    await eventually('the spares\' threads', () => idleVcpuThreadCount() === 2);

    const events: ApiEvent[] = [];
    svc.on((e) => events.push(e));
    const vm = await svc.createVm({ name: 'warm', guest: 'probe', cpus: 2, memoryMiB: 64, append: 'scenario=echo' });
    await svc.subscribe(vm.id);
    await svc.startVm(vm.id);
    // Both vCPUs came from the spares (the refill waits until after the start).
    expect(spareVcpuWorkerCount()).toBe(0);
    const text = () => events.flatMap((e) => (e.type === 'console' && e.vmId === vm.id ? [e.data] : [])).join('');
    const prompts = () => (text().match(/probe> /g) ?? []).length;
    await eventually('the prompt', () => prompts() === 1);
    await svc.sendConsole(vm.id, 'warm-echo\r');
    await eventually('the echo', () => text().includes('unknown command: warm-echo'));
    await eventually('the spares replaced', () => spareVcpuWorkerCount() === 2 && idleVcpuThreadCount() === 2);
    expect(vcpuThreadCount()).toBe(2); // the VM's, named for their vCPUs

    // Stopped: its workers are idle in the pool (up to its limit), no thread is in a VM.
    await svc.forceStopVm(vm.id);
    expect(vcpuThreadCount()).toBe(0);
    expect(spareVcpuWorkerCount()).toBe(DEFAULT_IDLE_VCPU_WORKERS); // 2 spares + the VM's 2
    expect(idleVcpuThreadCount()).toBe(spareVcpuWorkerCount());

    // The next start takes idle workers: no thread is started (the refill finds enough idle ones).
    const idleBefore = idleVcpuThreadCount();
    await svc.startVm(vm.id);
    await eventually('the second prompt', () => prompts() === 2);
    expect(vcpuThreadCount()).toBe(2);
    expect(idleVcpuThreadCount()).toBe(idleBefore - 2);
    await svc.forceStopVm(vm.id);
    expect(idleVcpuThreadCount()).toBe(idleBefore);

    await svc.shutdown();
    expect(spareVcpuWorkerCount()).toBe(0);
    await eventually('every vCPU worker thread gone', () => vcpuThreadCount() + idleVcpuThreadCount() === 0);
  });
});

// The service's warm vCPU workers (worker-pool.ts keepVcpuWorkersWarm): a start takes the spares,
// they are replaced shortly after, and the service's shutdown ends them (each once loaded, the
// rule that keeps koffi's initialisation from killing the process), leaving no thread behind.
// That a VM started from spares runs is covered by the echo round trip here.
import { afterAll, describe, expect, it } from 'vitest';
import type { ApiEvent } from '../../electron/service/api.ts';
import { createService } from '../../electron/service/service.ts';
import { spareVcpuWorkerCount } from '../../electron/vmm/vcpu/worker-pool.ts';
import { readFileSync, readdirSync } from 'node:fs';
import { kvmAvailable } from '../support/probe.ts';
import { removeTempHomes, tempHome } from '../support/temp-home.ts';
import { scaled } from '../support/time-scale.ts';

afterAll(removeTempHomes);

/** Threads of this process that are vCPU workers (a worker thread's name is its Worker's name). */
function vcpuThreads(): number {
  let n = 0;
  for (const t of readdirSync('/proc/self/task')) {
    try {
      if (/^vcpu-\d+$/.test(readFileSync(`/proc/self/task/${t}/comm`, 'utf8').trim())) n++;
    } catch { /* the thread ended meanwhile */ }
  }
  return n;
}

async function eventually(what: string, ok: () => boolean, timeoutMs = scaled(20_000)): Promise<void> {
  const t0 = performance.now();
  while (!ok()) {
    if (performance.now() - t0 > timeoutMs) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe.skipIf(!kvmAvailable)('warm vCPU workers in the service', () => {
  it('a start takes the spares, they are replaced, and shutdown ends them all', async () => {
    expect(vcpuThreads()).toBe(0);
    const svc = await createService({ home: tempHome('warm-pool'), spareVcpuWorkers: 2 });
    expect(spareVcpuWorkerCount()).toBe(2);
    await eventually('the spares\' threads', () => vcpuThreads() === 2);

    const events: ApiEvent[] = [];
    svc.on((e) => events.push(e));
    const vm = await svc.createVm({ name: 'warm', guest: 'probe', cpus: 2, memoryMiB: 64, append: 'scenario=echo' });
    await svc.subscribe(vm.id);
    await svc.startVm(vm.id);
    // Both vCPUs came from the spares (the refill waits until after the start).
    expect(spareVcpuWorkerCount()).toBe(0);
    const text = () => events.flatMap((e) => (e.type === 'console' && e.vmId === vm.id ? [e.data] : [])).join('');
    await eventually('the prompt', () => text().includes('probe> '));
    await svc.sendConsole(vm.id, 'warm-echo\r');
    await eventually('the echo', () => text().includes('unknown command: warm-echo'));
    await eventually('the spares replaced', () => spareVcpuWorkerCount() === 2 && vcpuThreads() === 4);

    await svc.forceStopVm(vm.id);
    await svc.shutdown();
    expect(spareVcpuWorkerCount()).toBe(0);
    await eventually('every vCPU worker thread gone', () => vcpuThreads() === 0);
  });
});

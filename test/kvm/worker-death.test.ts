// A vCPU worker that dies without a word (terminated, its isolate out of memory, its thread
// gone — here: Worker.terminate() on a running vCPU's thread) ends only its VM, with the reason
// recorded; another VM in the same process keeps answering, and every fd is released. (A worker
// whose JS throws is test/kvm/faults.test.ts, "a vCPU worker that throws".)
import { existsSync } from 'node:fs';
import type { Worker } from 'node:worker_threads';
import { afterAll, describe, expect, it } from 'vitest';
import { spareVcpuWorkerCount } from '../../electron/vmm/vcpu/worker-pool.ts';
import { kvmAvailable, openFdCount, startProbe, type Watched } from '../support/probe.ts';
import { scaled } from '../support/time-scale.ts';

describe.skipIf(!kvmAvailable)('a vCPU worker that dies', () => {
  let bystander: Watched | undefined;
  afterAll(async () => { if (bystander?.vm.state === 'running') await bystander.vm.stop(); });

  it('ends only its VM, as crashed with the reason, releases its fds, and the dead worker is not reused', async () => {
    // Workers that leave a VM cleanly wait in the pool for the next one (worker-pool.ts), each
    // with the fds of its event loop: a 2-vCPU VM first, so that the pool holds as many idle
    // workers when the fds are counted as after the victim (one left: its live worker comes back).
    const warm = await startProbe({ cpus: 2, append: 'scenario=echo', name: 'warm' });
    await warm.vm.stop();
    bystander = await startProbe({ cpus: 1, append: 'scenario=echo', name: 'bystander' });
    await bystander.waitForConsole('probe> ');
    const fds = openFdCount();
    const idle = spareVcpuWorkerCount();
    const victim = await startProbe({ cpus: 2, append: 'scenario=echo', name: 'victim' });
    await victim.waitForConsole('probe> ');
    // The runtime's own Worker objects: the one test-only reach into it.
    const workers = (victim.vm as unknown as { workers: { list: Worker[] } }).workers.list;
    expect(workers).toHaveLength(2);
    const deadTid = victim.vm.vcpuThreadIds()[0]!;
    const t = performance.now();
    void workers[0]!.terminate();
    // The thread leaves KVM_RUN (and so sees the termination) at its next exit: wake the guest.
    victim.vm.sendConsole('x');
    const exit = await Promise.race([victim.vm.ended, new Promise<never>((_, reject) => setTimeout(() => reject(new Error('the VM did not end')), scaled(10_000)))]);
    process.stdout.write(`terminated vCPU worker: VM ended as ${exit.kind} in ${(performance.now() - t).toFixed(0)} ms: ${exit.message}\n`);
    expect(exit.kind).toBe('crash');
    expect(exit.message).toMatch(/^vCPU 0 worker exited unexpectedly \(exit code \d+\)$/);
    expect(exit.vcpu).toBe(0);
    expect(victim.vm.state).toBe('stopped');
    expect(openFdCount()).toBe(fds);
    // The terminated worker's thread is gone, never back in the pool; the other one is.
    expect(existsSync(`/proc/self/task/${deadTid}`)).toBe(false);
    expect(spareVcpuWorkerCount()).toBe(idle);
    // The other VM never noticed.
    const token = `alive-${Math.random().toString(36).slice(2, 8)}`;
    bystander.vm.sendConsole(`${token}\r`);
    await bystander.waitForConsole(`unknown command: ${token}`);
    expect(bystander.vm.state).toBe('running');
  }, 60_000);
});

// The vCPU start barrier (VmControl.arriveAtStart) with real threads: nobody passes before the
// last thread arrives, and a VM stopped or ended meanwhile releases the waiters without a run.
import { describe, expect, it } from 'vitest';
import { Worker } from 'node:worker_threads';
import { COMMAND, END, VmControl } from '../../electron/vmm/shared/control.ts';

type Report = { vcpu: number; passed: boolean };

function arrive(control: VmControl, vcpu: number, delayMs: number): { worker: Worker; report: Promise<Report>; arrived: Promise<void> } {
  const worker = new Worker(new URL('./helpers/barrier-arriver.ts', import.meta.url), {
    workerData: { sab: control.sab, cpus: control.cpus, vcpu, delayMs },
  });
  let onArrived!: () => void;
  const arrived = new Promise<void>((r) => { onArrived = r; });
  const report = new Promise<Report>((resolve, reject) => {
    worker.on('message', (m: { arrived?: number } & Partial<Report>) => (m.arrived !== undefined ? onArrived() : resolve(m as Report)));
    worker.on('error', reject);
  });
  return { worker, report, arrived };
}

describe('vCPU start barrier', () => {
  it('a 1-vCPU VM passes at once', () => {
    const control = new VmControl(1);
    expect(control.arriveAtStart(0)).toBe(true);
    const [t] = control.startTimeline();
    expect(t!.enteredAt).toBeGreaterThanOrEqual(t!.readyAt);
  });

  it('holds every thread until the last one is ready (the late one is 300 ms late)', async () => {
    const control = new VmControl(4);
    // The late one is started only once the others have arrived: threads start and load at
    // their own pace, so 300 ms after its own start could be before a slow early one arrives.
    const early = [0, 1, 2].map((v) => arrive(control, v, 0));
    await Promise.all(early.map((t) => t.arrived));
    const threads = [...early, arrive(control, 3, 300)];
    const reports = await Promise.all(threads.map((t) => t.report));
    expect(reports.every((r) => r.passed)).toBe(true);
    const times = control.startTimeline();
    const lastReady = Math.max(...times.map((t) => t.readyAt));
    const firstEntered = Math.min(...times.map((t) => t.enteredAt));
    expect(lastReady).toBeLessThanOrEqual(firstEntered);
    // The three early threads really waited for the late one.
    expect(lastReady - Math.min(...times.map((t) => t.readyAt))).toBeGreaterThan(200);
    await Promise.all(threads.map((t) => t.worker.terminate()));
  }, 20_000);

  for (const how of ['stop', 'end'] as const) {
    it(`a VM ${how === 'stop' ? 'stopped' : 'ended'} before every thread is ready releases the waiters without a run`, async () => {
      const control = new VmControl(3);
      const threads = [0, 1].map((v) => arrive(control, v, 0));
      await Promise.all(threads.map((t) => t.arrived));
      await new Promise((r) => setTimeout(r, 50)); // both are in Atomics.wait by now
      const t0 = performance.now();
      if (how === 'stop') control.setCommand(COMMAND.stop);
      else control.end(END.crash, 2);
      const reports = await Promise.all(threads.map((t) => t.report));
      expect(reports.map((r) => r.passed)).toEqual([false, false]);
      expect(performance.now() - t0).toBeLessThan(900); // woken, not released by the wait's timeout
      expect(control.startTimeline().every((t) => t.enteredAt === 0)).toBe(true);
      // A thread that arrives after the stop does not run either.
      expect(control.arriveAtStart(2)).toBe(false);
      await Promise.all(threads.map((t) => t.worker.terminate()));
    }, 20_000);
  }
});

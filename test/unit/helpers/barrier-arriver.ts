// Worker for start-barrier.test.ts: waits `delayMs`, arrives at the start barrier as vCPU `vcpu`
// would, and reports whether it was let through.
import { workerData, parentPort } from 'node:worker_threads';
import { VmControl } from '../../../electron/vmm/shared/control.ts';

const { sab, cpus, vcpu, delayMs } = workerData as { sab: SharedArrayBuffer; cpus: number; vcpu: number; delayMs: number };
await new Promise((r) => setTimeout(r, delayMs));
const control = new VmControl(sab, cpus);
parentPort!.postMessage({ arrived: vcpu });
parentPort!.postMessage({ vcpu, passed: control.arriveAtStart(vcpu) });

import { openSync, readSync } from 'node:fs';
import { threadCpuTimeNs, libc, addressOf } from '../native/kvm/libc.ts';
import { startProbe } from '../test/support/probe.ts';
const p = await startProbe({ cpus: 4, append: 'scenario=idle ms=30000' });
const tids = p.vm.vcpuThreadIds();
const names = ['stat', 'status', 'schedstat', 'sched'];
const fds = names.map(n => tids.map(t => openSync(`/proc/self/task/${t}/${n}`, 'r')));
const buf = Buffer.alloc(8192); const ab = new ArrayBuffer(8192); const addr = addressOf(ab);
const acc = names.map(() => 0); const accK = names.map(() => 0); let n = 0;
const timer = setInterval(() => {
  names.forEach((_, k) => { const t0 = threadCpuTimeNs(); for (const fd of fds[k]!) readSync(fd, buf, 0, 8192, 0); acc[k]! += threadCpuTimeNs() - t0;
    const t1 = threadCpuTimeNs(); for (const fd of fds[k]!) libc.preadAddress(fd, addr, 8192, 0); accK[k]! += threadCpuTimeNs() - t1; });
  n++;
}, 100);
await new Promise(r => setTimeout(r, 8000)); clearInterval(timer);
names.forEach((nm, k) => console.log(nm, 'fs', (acc[k]!/n/4000).toFixed(1), 'µs/thread; koffi', (accK[k]!/n/4000).toFixed(1)));
console.log(readSync(fds[3]![0]!, buf, 0, 8192, 0));
await p.vm.stop();

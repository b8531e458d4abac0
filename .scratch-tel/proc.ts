import { openSync, readSync } from 'node:fs';
import { libc, addressOf, threadCpuTimeNs } from '../native/kvm/libc.ts';
const tid = libc.gettid();
const fd1 = openSync(`/proc/self/task/${tid}/stat`, 'r'); const fd2 = openSync(`/proc/self/task/${tid}/status`, 'r');
const fd3 = openSync(`/proc/self/task/${tid}/schedstat`, 'r');
const b = Buffer.alloc(4096); const ab = new ArrayBuffer(4096); const addr = addressOf(ab);
function t(name: string, f: () => void) { for (let i = 0; i < 2000; i++) f(); const c0 = threadCpuTimeNs(); const N = 20000; for (let i = 0; i < N; i++) f(); console.log(name, ((threadCpuTimeNs() - c0) / N / 1000).toFixed(2), 'µs'); }
t('readSync stat', () => readSync(fd1, b, 0, 4096, 0));
t('readSync status', () => readSync(fd2, b, 0, 4096, 0));
t('readSync schedstat', () => readSync(fd3, b, 0, 4096, 0));
t('koffi stat', () => libc.preadAddress(fd1, addr, 4096, 0));
t('koffi status', () => libc.preadAddress(fd2, addr, 4096, 0));
t('koffi schedstat', () => libc.preadAddress(fd3, addr, 4096, 0));
console.log(readSync(fd3, b, 0, 4096, 0), b.toString('latin1', 0, 60));

import koffi from 'koffi';
import { Kvm } from '/work/main/native/kvm/kvm.ts';
import { libc, addressOf } from '/work/main/native/kvm/libc.ts';
const lib = koffi.load('libc.so.6');
const preadAddr = lib.func('pread', 'int64', ['int', 'uint64', 'size_t', 'int64']);
const preadPtr = lib.func('pread', 'int64', ['int', 'uint8_t *', 'size_t', 'int64']);
const kvm = Kvm.open(); const vm = kvm.createVm();
const v = vm.createVcpu(0); const fd = v.statsFd();
const buf = Buffer.alloc(1120); const ab = new ArrayBuffer(1120); const u8 = new Uint8Array(ab); const addr = addressOf(ab);
function time(name: string, f: () => void) {
  for (let i = 0; i < 20000; i++) f();
  const N = 200000; const t0 = process.hrtime.bigint(); for (let i = 0; i < N; i++) f(); const t1 = process.hrtime.bigint();
  console.log(name, (Number(t1 - t0) / N).toFixed(0), 'ns');
}
time('pread _Out_ Buffer', () => libc.pread(fd, buf, 1120, 3080));
time('pread ptr Uint8Array', () => preadPtr(fd, u8, 1120, 3080));
time('pread addr', () => preadAddr(fd, addr, 1120, 3080));
time('pread addr 8 bytes', () => preadAddr(fd, addr, 8, 3080+960));
const dv = new DataView(ab);
time('pread addr + 17 decode', () => { preadAddr(fd, addr, 1120, 3080); let s = 0; for (let k = 0; k < 17; k++) s += Number(dv.getBigUint64(k*8, true)); });
const u32 = new Uint32Array(ab);
time('pread addr + 17 decode u32 pairs', () => { preadAddr(fd, addr, 1120, 3080); let s = 0; for (let k = 0; k < 17; k++) s += u32[k*2]! + u32[k*2+1]! * 4294967296; });

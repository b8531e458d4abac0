// ioctl(fd, request, 0) as a native function of no arguments and no result: 30 bytes of x86-64
// machine code written at run time, one copy per vCPU thread with its fd, its request and the
// address of its result word built in, called through koffi. It exists for KVM_RUN, which runs
// once per exit: koffi's call path for a function without parameters skips fetching and
// converting the arguments (and the libc wrapper's errno handling), and one without a result
// skips making a JS number of it; after each exit, with caches and branch predictors cold, that
// was a quarter of an exit's user-space time (bench/exit-cpu.ts). The kernel's answer (the
// result, or -errno) lands in a word of a SharedArrayBuffer, read as plain JS memory.
//
// Where the code cannot be made executable (a W^X policy refusing mprotect PROT_EXEC, another
// architecture) ioctlStub says so and the caller keeps the ordinary binding.
import koffi from 'koffi';
import { MAP_FAILED, addressOf, libc } from './libc.ts';

const PAGE = 4096;
const PROT_READ_WRITE = 1 | 2;
const PROT_READ_EXEC = 1 | 4;
const MAP_PRIVATE_ANONYMOUS = 0x02 | 0x20;
const SYS_IOCTL_X64 = 16;

/** The type of every stub: `void stub(void)`, declared once per thread. */
const StubFunction = koffi.proto('void unhalt_ioctl_stub(void)');

export interface IoctlStub {
  /** ioctl(fd, request, 0); its result is then in `result[0]`. */
  readonly call: () => void;
  /** The result of the last call: >= 0, or -errno. */
  readonly result: Int32Array;
  /** Unmaps the code; `call` must not run afterwards. Idempotent. */
  release(): void;
}

/**
 * x86-64: mov edi, fd; mov esi, request; xor edx, edx; mov eax, SYS_ioctl; syscall;
 * mov [resultAddress], eax; ret.
 */
export function encodeIoctlStub(fd: number, request: number, resultAddress: number): Buffer {
  const code = Buffer.alloc(30);
  code[0] = 0xbf;
  code.writeInt32LE(fd, 1);
  code[5] = 0xbe;
  code.writeUInt32LE(request >>> 0, 6);
  code[10] = 0x31;
  code[11] = 0xd2;
  code[12] = 0xb8;
  code.writeUInt32LE(SYS_IOCTL_X64, 13);
  code[17] = 0x0f;
  code[18] = 0x05;
  code[19] = 0xa3; // mov moffs32, eax: a 64-bit absolute address in long mode
  code.writeBigUInt64LE(BigInt(resultAddress), 20);
  code[28] = 0xc3;
  code[29] = 0xcc; // int3: padding
  return code;
}

/** The stub for ioctl(fd, request, 0), or undefined where none can run (see the file comment). */
export function ioctlStub(fd: number, request: number): IoctlStub | undefined {
  if (process.arch !== 'x64' || process.platform !== 'linux') return undefined;
  // Shared memory: its backing store never moves, so the stub can hold its address. The stub
  // object keeps it referenced for as long as the code exists.
  const result = new Int32Array(new SharedArrayBuffer(8));
  const code = encodeIoctlStub(fd, request, addressOf(result));
  const page = libc.mmap(0, PAGE, PROT_READ_WRITE, MAP_PRIVATE_ANONYMOUS, -1, 0);
  if (typeof page !== 'number' || page === MAP_FAILED) return undefined;
  libc.copy(page, addressOf(code), code.length);
  // Writable, then executable, never both.
  if (libc.mprotect(page, PAGE, PROT_READ_EXEC) !== 0) {
    libc.munmap(page, PAGE);
    return undefined;
  }
  let mapped = true;
  return {
    call: koffi.decode(page, StubFunction) as () => void,
    result,
    release() {
      if (!mapped) return;
      mapped = false;
      libc.munmap(page, PAGE);
    },
  };
}

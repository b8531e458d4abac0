// ioctl(fd, request, 0) as a native function of no arguments: 20 bytes of x86-64 machine code
// written at run time, one copy per vCPU thread with its fd and request built in, called
// through koffi. It exists for KVM_RUN, which runs once per exit: koffi's call path for a
// function without parameters skips fetching and converting the arguments (and the libc
// wrapper's errno handling), which after each exit, with caches and branch predictors cold,
// was a quarter of an exit's user-space time (bench/exit-cpu.ts). It returns what the kernel
// does: the result, or -errno.
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

/** The type of every stub: `int stub(void)`, declared once per thread. */
const StubFunction = koffi.proto('int unhalt_ioctl_stub(void)');

export interface IoctlStub {
  /** ioctl(fd, request, 0): the result, or -errno. */
  readonly call: () => number;
  /** Unmaps the code; `call` must not run afterwards. Idempotent. */
  release(): void;
}

/** x86-64: mov edi, fd; mov esi, request; xor edx, edx; mov eax, SYS_ioctl; syscall; ret. */
export function encodeIoctlStub(fd: number, request: number): Buffer {
  const code = Buffer.alloc(20);
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
  code[19] = 0xc3;
  return code;
}

/** The stub for ioctl(fd, request, 0), or undefined where none can run (see the file comment). */
export function ioctlStub(fd: number, request: number): IoctlStub | undefined {
  if (process.arch !== 'x64' || process.platform !== 'linux') return undefined;
  const code = encodeIoctlStub(fd, request);
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
    call: koffi.decode(page, StubFunction) as () => number,
    release() {
      if (!mapped) return;
      mapped = false;
      libc.munmap(page, PAGE);
    },
  };
}

// koffi bindings of the few libc calls the VMM needs. This file and its siblings in native/kvm
// are the only code that knows the OS ABI. Pointers cross as plain numbers (user-space
// addresses fit in 47 bits): that avoids BigInt and External conversions on hot paths.
import koffi from './koffi.ts';

const lib = koffi.load('libc.so.6');

export const libc = {
  open: lib.func('int open(const char *path, int flags)'),
  close: lib.func('int close(int fd)'),
  socket: lib.func('int socket(int domain, int type, int protocol)'),
  /** ioctl with an integer (or no) argument. */
  ioctlInt: lib.func('ioctl', 'int', ['int', 'unsigned long', 'unsigned long']),
  /** ioctl whose argument points into a JS buffer (struct in/out). */
  ioctlBuf: lib.func('ioctl', 'int', ['int', 'unsigned long', '_Inout_ uint8_t *']),
  mmap: lib.func('uint64 mmap(uint64 addr, size_t len, int prot, int flags, int fd, int64 offset)'),
  munmap: lib.func('int munmap(uint64 addr, size_t len)'),
  mprotect: lib.func('int mprotect(uint64 addr, size_t len, int prot)'),
  madvise: lib.func('int madvise(uint64 addr, size_t len, int advice)'),
  mlock: lib.func('int mlock(uint64 addr, size_t len)'),
  munlock: lib.func('int munlock(uint64 addr, size_t len)'),
  pread: lib.func('int64 pread(int fd, _Out_ uint8_t *buf, size_t count, int64 offset)'),
  /** pread into a raw address (a preallocated ArrayBuffer's): no per-call buffer marshalling. */
  preadAddress: lib.func('pread', 'int64', ['int', 'uint64', 'size_t', 'int64']),
  clock_gettime: lib.func('int clock_gettime(int clock, _Out_ uint8_t *ts)'),
  /** getrandom(2) into a raw address (guest RAM's): the kernel's CSPRNG, no copy. */
  getrandomAddress: lib.func('getrandom', 'int64', ['uint64', 'size_t', 'unsigned int']),
  eventfd: lib.func('int eventfd(unsigned int initval, int flags)'),
  /** read/write of an eventfd's 8-byte counter. */
  read: lib.func('int64 read(int fd, _Out_ uint8_t *buf, size_t count)'),
  write: lib.func('int64 write(int fd, const uint8_t *buf, size_t count)'),
  /** poll(2) over a struct pollfd array in a JS buffer (8 bytes each: fd, events, revents). */
  poll: lib.func('int poll(_Inout_ uint8_t *fds, unsigned long nfds, int timeout)'),
  gettid: lib.func('int gettid()'),
  getpid: lib.func('int getpid()'),
  tgkill: lib.func('int tgkill(int tgid, int tid, int sig)'),
  sigaction: lib.func('int sigaction(int sig, const uint8_t *act, _Out_ uint8_t *old)'),
  sched_setaffinity: lib.func('int sched_setaffinity(int pid, size_t size, const uint8_t *mask)'),
  sched_getaffinity: lib.func('int sched_getaffinity(int pid, size_t size, _Out_ uint8_t *mask)'),
  dlsym: lib.func('uint64 dlsym(uint64 handle, const char *name)'),
  /** Raw memory copy between two addresses (used to read and write the mmap'd kvm_run page). */
  copy: lib.func('memcpy', 'uint64', ['uint64', 'uint64', 'size_t']),
  strerror: lib.func('const char *strerror(int errnum)'),
  flock: lib.func('int flock(int fd, int operation)'),
  /** pwrite from a raw address (guest RAM's SharedArrayBuffer: the disk back end's writes). */
  pwriteAddress: lib.func('pwrite', 'int64', ['int', 'uint64', 'size_t', 'int64']),
  fdatasync: lib.func('int fdatasync(int fd)'),
  fallocate: lib.func('int fallocate(int fd, int mode, int64 offset, int64 len)'),
  /** Ends the process at once: no exit handlers, no waiting for threads (a vCPU stuck in KVM_RUN). */
  _exit: lib.func('void _exit(int status)'),
};

export const O_RDWR = 2;
export const O_CLOEXEC = 0x80000;
export const PROT_READ = 1;
export const PROT_WRITE = 2;
export const MAP_SHARED = 1;
export const MAP_FAILED = 2 ** 64 - 1;
export const MADV_HUGEPAGE = 14;
export const MADV_DONTNEED = 4;
export const EFD_CLOEXEC = 0x80000;
export const EFD_NONBLOCK = 0x800;
export const POLLIN = 1;
export const EINTR = 4;
export const EAGAIN = 11;
export const LOCK_SH = 1;
export const LOCK_EX = 2;
export const LOCK_NB = 4;
export const FALLOC_FL_KEEP_SIZE = 1;
export const FALLOC_FL_PUNCH_HOLE = 2;

export const CLOCK_THREAD_CPUTIME_ID = 3;

const timespec = Buffer.alloc(16);

/** CPU time consumed so far by the calling thread, in ns (what a thread's own work costs). */
export function threadCpuTimeNs(): number {
  if (libc.clock_gettime(CLOCK_THREAD_CPUTIME_ID, timespec) < 0) throw new OsError('clock_gettime', errno());
  return Number(timespec.readBigInt64LE(0)) * 1e9 + Number(timespec.readBigInt64LE(8));
}

export function closeFd(fd: number): void {
  libc.close(fd);
}

/**
 * Calls a libc binding on a thread-pool thread (koffi's asynchronous call) and resolves with its
 * return value and errno (koffi carries the worker thread's errno over to the callback). For
 * calls that can sleep in the kernel — a KVM ioctl waiting out an SRCU grace period — which the
 * main thread must not wait for.
 */
export function callOffThread(fn: unknown, ...args: unknown[]): Promise<{ ret: number; err: number }> {
  return new Promise((resolve, reject) => {
    (fn as { async(...a: unknown[]): void }).async(...args, (e: unknown, ret: number | bigint) => {
      if (e) reject(e instanceof Error ? e : new Error(String(e)));
      else resolve({ ret: Number(ret), err: Number(ret) < 0 ? koffi.errno() : 0 });
    });
  });
}

/**
 * close(2) on a thread-pool thread (koffi's asynchronous call). Closing a VM's last fd destroys
 * the VM in the kernel — its memory slots, page tables, irqchip — which takes tens of ms for a
 * large guest; the main thread must not wait for it. A close cannot usefully fail here.
 */
export async function closeFdInBackground(fd: number): Promise<void> {
  await callOffThread(libc.close, fd);
}

export function errno(): number {
  return koffi.errno();
}

/** Address of a JS ArrayBuffer / SharedArrayBuffer's backing store (stable for its life). */
export function addressOf(buffer: ArrayBufferLike | ArrayBufferView): number {
  const view = ArrayBuffer.isView(buffer)
    ? new Uint8Array(buffer.buffer, buffer.byteOffset, buffer.byteLength)
    : new Uint8Array(buffer);
  return Number(koffi.address(view));
}

/**
 * virtio-rng's host calls (electron/vmm/devices/virtio/virtio-rng.ts EntropyIo): getrandom(2)
 * straight into guest RAM. The one binding, for the I/O thread and for tests that serve the queue.
 */
export const getrandomIo = Object.freeze({
  getrandomAddress: (address: number, length: number): number => Number(libc.getrandomAddress(address, length, 0)),
  ramAddress: guestRamAddress,
});

/** Address of guest RAM's first byte (a GuestRam's bytes): what host calls into guest RAM are given. */
export function guestRamAddress(ram: { bytes: Uint8Array }): number {
  return addressOf(ram.bytes);
}

export class OsError extends Error {
  readonly errno: number;
  readonly call: string;
  constructor(call: string, err: number, detail?: string) {
    super(`${call} failed: ${describeErrno(err)}${detail ? ` (${detail})` : ''}`);
    this.name = 'OsError';
    this.errno = err;
    this.call = call;
  }
}

const ERRNO_NAMES: Record<number, string> = {
  1: 'EPERM', 2: 'ENOENT', 4: 'EINTR', 5: 'EIO', 9: 'EBADF', 11: 'EAGAIN', 12: 'ENOMEM',
  13: 'EACCES', 14: 'EFAULT', 16: 'EBUSY', 17: 'EEXIST', 19: 'ENODEV', 22: 'EINVAL',
  20: 'ENOTDIR', 21: 'EISDIR', 24: 'EMFILE', 25: 'ENOTTY', 28: 'ENOSPC', 38: 'ENOSYS', 95: 'EOPNOTSUPP',
};

export function describeErrno(err: number): string {
  const name = ERRNO_NAMES[err] ?? `errno ${err}`;
  return `${name}: ${libc.strerror(err)}`;
}

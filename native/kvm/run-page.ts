// A vCPU's kvm_run area (the mmap of its fd: the exit header, the PIO data page, ...) mapped over
// pages of a SharedArrayBuffer, so that every thread reads and writes it as plain JS memory: no
// FFI copy per exit. An ArrayBuffer over foreign memory is not an option (Electron's V8 memory
// cage forbids it, see guest-memory.ts); the other way round is: the buffer's own pages,
// page-aligned and wholly inside it, are replaced by the kvm_run mapping (MAP_FIXED).
//
// The rule that makes this safe: the pages go back to ordinary anonymous memory (unmapRunPage)
// before the buffer can be freed, because the buffer's memory belongs to the allocator, which
// would hand it out again. The owning Vcpu keeps the buffer referenced until its close() does
// exactly that; a worker holding the buffer afterwards sees zeroes, never the kernel's page.
import { MAP_FAILED, OsError, addressOf, errno, libc } from './libc.ts';

const PAGE = 4096;
const PROT_READ_WRITE = 1 | 2;
const MAP_SHARED = 0x01;
const MAP_PRIVATE = 0x02;
const MAP_FIXED = 0x10;
const MAP_ANONYMOUS = 0x20;

export interface RunPage {
  /** Shared with the vCPU's worker: the mapping is at `offset` inside it, `size` bytes long. */
  sab: SharedArrayBuffer;
  offset: number;
  size: number;
  /** The mapping's address (page-aligned). */
  address: number;
}

/** Maps `size` bytes (a multiple of the page size) of the vCPU fd's kvm_run into a fresh buffer. */
export function mapRunPage(vcpuFd: number, size: number): RunPage {
  if (size <= 0 || size % PAGE !== 0) throw new RangeError(`kvm_run mmap size must be a whole number of pages, got ${size}`);
  const sab = new SharedArrayBuffer(size + PAGE);
  const base = addressOf(sab);
  const offset = (PAGE - (base % PAGE)) % PAGE;
  const address = base + offset;
  const got = libc.mmap(address, size, PROT_READ_WRITE, MAP_SHARED | MAP_FIXED, vcpuFd, 0);
  if (got !== address) {
    const err = errno();
    // A failed MAP_FIXED leaves the old pages (or none); put plain memory back either way.
    restore(address, size, sab);
    throw new OsError('mmap kvm_run', got === MAP_FAILED || typeof got !== 'number' ? err : 0);
  }
  return { sab, offset, size, address };
}

/** Gives the buffer its ordinary memory back (zeroed); the kvm_run mapping is gone. */
export function unmapRunPage(page: RunPage): void {
  restore(page.address, page.size, page.sab);
}

/** Buffers whose pages could not be given back: kept alive forever, so the allocator never reuses them. */
const neverFreed: SharedArrayBuffer[] = [];

function restore(address: number, size: number, sab?: SharedArrayBuffer): boolean {
  const got = libc.mmap(address, size, PROT_READ_WRITE, MAP_PRIVATE | MAP_FIXED | MAP_ANONYMOUS, -1, 0);
  if (got === address) return true;
  if (sab) neverFreed.push(sab);
  return false;
}

// The KVM_RUN stub (native/kvm/syscall-stub.ts) run for real on this host, without KVM: it is
// ioctl(fd, request, 0) and leaves the kernel's answer in its result word, -errno on failure.
import { closeSync, openSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { encodeIoctlStub, ioctlStub } from '../../native/kvm/syscall-stub.ts';

const EBADF = 9;
const ENOTTY = 25;
const KVM_RUN = 0xae80;

describe.skipIf(process.arch !== 'x64' || process.platform !== 'linux')('ioctl stub', () => {
  it('is mov edi, fd; mov esi, request; xor edx, edx; mov eax, 16; syscall; mov [result], eax; ret', () => {
    expect([...encodeIoctlStub(7, KVM_RUN, 0x7f00_1234_5678)]).toEqual([
      0xbf, 7, 0, 0, 0, 0xbe, 0x80, 0xae, 0, 0, 0x31, 0xd2, 0xb8, 16, 0, 0, 0, 0x0f, 0x05,
      0xa3, 0x78, 0x56, 0x34, 0x12, 0x00, 0x7f, 0, 0, 0xc3, 0xcc,
    ]);
    expect([...encodeIoctlStub(-1, KVM_RUN, 0).subarray(1, 5)]).toEqual([0xff, 0xff, 0xff, 0xff]);
  });

  it('returns -EBADF for a closed fd and -ENOTTY for a file that knows no ioctl, again and again', () => {
    const fd = openSync('/dev/null', 'r');
    closeSync(fd);
    const bad = ioctlStub(fd, KVM_RUN);
    expect(bad).toBeDefined();
    for (let i = 0; i < 3; i++) {
      bad!.result[0] = 12345;
      bad!.call();
      expect(bad!.result[0]).toBe(-EBADF);
    }
    bad!.release();

    const nullFd = openSync('/dev/null', 'r');
    try {
      const stub = ioctlStub(nullFd, KVM_RUN)!;
      stub.call();
      expect(stub.result[0]).toBe(-ENOTTY);
      stub.release();
      stub.release(); // idempotent
    } finally {
      closeSync(nullFd);
    }
  });
});

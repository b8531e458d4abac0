// The KVM_RUN stub (native/kvm/syscall-stub.ts) run for real on this host, without KVM: it is
// ioctl(fd, request, 0) and answers as the kernel does, -errno on failure, whatever the fd.
import { closeSync, openSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { encodeIoctlStub, ioctlStub } from '../../native/kvm/syscall-stub.ts';

const EBADF = 9;
const ENOTTY = 25;
const KVM_RUN = 0xae80;

describe.skipIf(process.arch !== 'x64' || process.platform !== 'linux')('ioctl stub', () => {
  it('is mov edi, fd; mov esi, request; xor edx, edx; mov eax, 16; syscall; ret', () => {
    expect([...encodeIoctlStub(7, KVM_RUN)]).toEqual([
      0xbf, 7, 0, 0, 0, 0xbe, 0x80, 0xae, 0, 0, 0x31, 0xd2, 0xb8, 16, 0, 0, 0, 0x0f, 0x05, 0xc3,
    ]);
    expect([...encodeIoctlStub(-1, KVM_RUN).subarray(1, 5)]).toEqual([0xff, 0xff, 0xff, 0xff]);
  });

  it('returns -EBADF for a closed fd and -ENOTTY for a file that knows no ioctl, again and again', () => {
    const fd = openSync('/dev/null', 'r');
    closeSync(fd);
    const bad = ioctlStub(fd, KVM_RUN);
    expect(bad).toBeDefined();
    for (let i = 0; i < 3; i++) expect(bad!.call()).toBe(-EBADF);
    bad!.release();

    const nullFd = openSync('/dev/null', 'r');
    try {
      const stub = ioctlStub(nullFd, KVM_RUN)!;
      expect(stub.call()).toBe(-ENOTTY);
      stub.release();
      stub.release(); // idempotent
    } finally {
      closeSync(nullFd);
    }
  });
});

// The KVM ABI numbers the VMM hard-codes (native/kvm/abi.ts), checked against the kernel's own
// headers: a C program built with <linux/kvm.h> prints every ioctl number and capability number
// we name, and each must be the same. (A wrong number is an ioctl the kernel refuses, or worse,
// one it takes for another.)
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { CAP, IOCTL, SIZEOF } from '../../native/kvm/abi.ts';

const HEADER = '/usr/include/linux/kvm.h';
const dir = mkdtempSync(join(tmpdir(), 'unhalt-kvm-abi-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** The struct behind each SIZEOF entry, as the kernel names it. */
const STRUCTS: Record<keyof typeof SIZEOF, string> = {
  regs: 'struct kvm_regs', sregs: 'struct kvm_sregs', fpu: 'struct kvm_fpu', lapic: 'struct kvm_lapic_state',
  cpuidEntry2: 'struct kvm_cpuid_entry2', msrEntry: 'struct kvm_msr_entry', userspaceMemoryRegion: 'struct kvm_userspace_memory_region',
  irqLevel: 'struct kvm_irq_level', pitConfig: 'struct kvm_pit_config', enableCap: 'struct kvm_enable_cap',
  segment: 'struct kvm_segment', ioeventfd: 'struct kvm_ioeventfd', msi: 'struct kvm_msi', clockData: 'struct kvm_clock_data',
};

describe.skipIf(!existsSync(HEADER))('native/kvm/abi.ts against <linux/kvm.h>', () => {
  const lines = [
    ...Object.keys(IOCTL).map((n) => `printf("ioctl ${n} %lu\\n", (unsigned long)(${n}));`),
    ...Object.keys(CAP).map((n) => `printf("cap ${n} %lu\\n", (unsigned long)(KVM_CAP_${n}));`),
    ...Object.entries(STRUCTS).map(([k, s]) => `printf("sizeof ${k} %lu\\n", (unsigned long)sizeof(${s}));`),
  ];
  const src = join(dir, 'abi.c');
  writeFileSync(src, `#include <stdio.h>\n#include <linux/kvm.h>\nint main(void) {\n${lines.join('\n')}\nreturn 0;\n}\n`);
  const cc = spawnSync('gcc', ['-o', join(dir, 'abi'), src], { encoding: 'utf8' });
  const out = cc.status === 0 ? spawnSync(join(dir, 'abi'), { encoding: 'utf8' }).stdout : '';
  const kernel = new Map(out.split('\n').filter(Boolean).map((l) => { const [kind, name, v] = l.split(' '); return [`${kind} ${name}`, Number(v)]; }));

  it('the headers know every name we use (the C program builds)', () => {
    expect(cc.status, cc.stderr).toBe(0);
  });

  it('every ioctl number is the kernel\'s', () => {
    expect({ ...IOCTL }).toEqual(Object.fromEntries(Object.keys(IOCTL).map((n) => [n, kernel.get(`ioctl ${n}`)])));
  });

  it('every capability number is the kernel\'s', () => {
    expect({ ...CAP }).toEqual(Object.fromEntries(Object.keys(CAP).map((n) => [n, kernel.get(`cap ${n}`)])));
  });

  it('every struct size is the kernel\'s', () => {
    const names = Object.keys(STRUCTS) as (keyof typeof SIZEOF)[];
    expect(Object.fromEntries(names.map((n) => [n, SIZEOF[n]]))).toEqual(Object.fromEntries(names.map((n) => [n, kernel.get(`sizeof ${n}`)])));
  });
});

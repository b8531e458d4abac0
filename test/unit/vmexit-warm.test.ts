// vmexit.flat's warm runs (electron/kvm-unit-tests/vmexit.ts): the guest runs the exits it is
// given in its table's order, so a warm-up exit only helps where the table puts it first.
import { describe, expect, it } from 'vitest';
import { exitCycles, VMEXIT_ALL, VMEXIT_EXITS, vmexitTest, warmUpFor } from '../../electron/kvm-unit-tests/vmexit.ts';

describe('vmexit warm-up', () => {
  it('warms an exit with the warm-up exits the table runs before it, and none before cpuid', () => {
    expect(warmUpFor('cpuid')).toEqual([]);
    expect(warmUpFor('vmcall')).toEqual(['cpuid']);
    expect(warmUpFor('inl_from_pmtimer')).toEqual(['cpuid']);
    expect(warmUpFor('inl_from_qemu')).toEqual(['cpuid', 'inl_from_pmtimer']);
    expect(warmUpFor('ipi')).toEqual(['cpuid', 'inl_from_pmtimer']);
    expect(warmUpFor('no_such_exit')).toEqual([]);
  });

  it('puts the warm-up into the test arguments only when asked', () => {
    expect(vmexitTest('inl_from_qemu').args).toBe('inl_from_qemu');
    expect(vmexitTest('inl_from_qemu', true).args).toBe('cpuid inl_from_pmtimer inl_from_qemu');
    expect(vmexitTest('ipi', true)).toMatchObject({ smp: 2, args: 'cpuid inl_from_pmtimer ipi' });
  });

  it('knows every default exit, and reads the timed one among the warm-ups', () => {
    for (const e of VMEXIT_EXITS) expect(VMEXIT_ALL).toContain(e);
    expect(new Set(VMEXIT_ALL).size).toBe(VMEXIT_ALL.length);
    const out = 'cpuid 548296\ninl_from_pmtimer 250388\ninl_from_qemu 199092\r\n';
    expect(exitCycles(out).get('inl_from_qemu')).toBe(199092);
  });
});

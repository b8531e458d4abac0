// Golden guest ABI per machine type: CPUID 0x40000000/0x40000001 and topology on a fixed
// simulated host. A change that alters an existing machine type's values fails here: add a new
// machine type instead.
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { resolveKnobs, resolveMachineWithoutKvm } from '../../electron/vmm/config/resolve.ts';
import { validateConfig } from '../../electron/vmm/config/vm-config.ts';
import { buildCpuid } from '../../electron/vmm/cpu/cpuid.ts';
import { MACHINE_TYPES, NEWEST_MACHINE, machineType, resolveMachineName } from '../../electron/vmm/machine/machine-types.ts';
import { boardPortUser } from '../../electron/vmm/devices/board.ts';
import { simulatedHost } from '../support/simulated-host.ts';

const GOLDEN: Record<string, { eax: number; edx: number }> = {
  // kvmclock(0,3,24) nopiodelay(1) asyncpf(4) steal-time(5) pv-eoi(6) pv-tlb-flush(9) pv-ipi(11)
  // poll-control(12) pv-sched-yield(13) asyncpf-int(14)
  'unhalt-1.0': { eax: 0x01007a7b, edx: 0 },
  // ... plus pv-unhalt(7)
  'unhalt-1.1': { eax: 0x01007afb, edx: 0 },
  // the same features as 1.1 (its board gains fw_cfg and the PM timer: GOLDEN_BOARD)
  'unhalt-1.2': { eax: 0x01007afb, edx: 0 },
};

/** The devices each version adds to the board (its ports; the ACPI bytes are golden in acpi.test.ts). */
const GOLDEN_BOARD: Record<string, { fwCfg: boolean; pmTimer: boolean }> = {
  'unhalt-1.0': { fwCfg: false, pmTimer: false },
  'unhalt-1.1': { fwCfg: false, pmTimer: false },
  'unhalt-1.2': { fwCfg: true, pmTimer: true },
};

function guestCpuid(machine: string, cpus: number, vcpuId: number, extra: Record<string, unknown> = {}) {
  const host = simulatedHost();
  const r = resolveKnobs(validateConfig({ machine, cpus, ...extra }), host);
  const entries = buildCpuid(host.supportedCpuid, { vcpuId, cpus, kvmFeatures: r.kvmFeatures, kvmHints: r.kvmHints, tscDeadline: host.tscDeadline, mwait: r.mwait });
  const get = (fn: number, i = 0) => entries.find((e) => e.function === fn && e.index === i)!;
  return { get, r };
}

describe('machine types', () => {
  it('has golden values for every machine type (add a golden row with each new type)', () => {
    expect(MACHINE_TYPES.map((m) => m.name)).toEqual(Object.keys(GOLDEN));
  });

  for (const [name, golden] of Object.entries(GOLDEN)) {
    it(`${name} keeps its guest ABI`, () => {
      const { get } = guestCpuid(name, 4, 2);
      expect(get(0x40000000)).toMatchObject({ eax: 0x40000001, ebx: 0x4b4d564b, ecx: 0x564b4d56, edx: 0x4d });
      expect(get(0x40000001)).toMatchObject({ eax: golden.eax, ebx: 0, ecx: 0, edx: golden.edx });
      expect(get(1).ebx >>> 24).toBe(2);
      expect((get(1).ebx >>> 16) & 0xff).toBe(4);
      expect(get(0xb, 1)).toMatchObject({ eax: 2, ebx: 4, edx: 2 });
      expect(get(4, 0).eax >>> 26).toBe(3);
      expect((get(1).ecx >>> 3) & 1).toBe(0); // no MWAIT without cpu-pm
    });
  }

  it('has a golden board for every machine type (add a row with each new type)', () => {
    expect(MACHINE_TYPES.map((m) => m.name)).toEqual(Object.keys(GOLDEN_BOARD));
  });

  for (const [name, board] of Object.entries(GOLDEN_BOARD)) {
    it(`${name} keeps its board devices, and only a version that adds some puts them in the spec`, () => {
      expect({ ...machineType(name)!.board }).toEqual(board);
      const kernel = fileURLToPath(import.meta.url); // any existing file: a dry resolution only checks it exists
      const { spec } = resolveMachineWithoutKvm(validateConfig({ machine: name, cpus: 2, kernel }));
      if (board.fwCfg || board.pmTimer) expect(spec.board).toEqual(board);
      else expect(spec).not.toHaveProperty('board');
      // A configured isa-debug-exit may not sit on a port the version's board has.
      expect(boardPortUser(0x510, 2, spec.board)).toBe(board.fwCfg ? 'fwCfg (ports 0x510-0x511)' : undefined);
      expect(boardPortUser(0x608, 4, spec.board)).toBe(board.pmTimer ? 'pmTimer (ports 0x608-0x60b)' : undefined);
    });
  }

  it('the alias resolves to the newest version and is never stored', () => {
    expect(resolveMachineName('unhalt')).toBe(NEWEST_MACHINE);
    expect(validateConfig({ machine: 'unhalt' }).machine).toBe(NEWEST_MACHINE);
    expect(validateConfig({}).machine).toBe(NEWEST_MACHINE);
  });

  it('explicit features override the machine type defaults', () => {
    const { get, r } = guestCpuid('unhalt-1.0', 2, 0, { cpuFeatures: { 'kvm-pv-unhalt': true, 'kvm-steal-time': false, 'kvm-hint-dedicated': true } });
    expect(get(0x40000001).eax).toBe((0x01007a7b | 0x80) & ~0x20);
    expect(get(0x40000001).edx).toBe(1);
    expect(r.features.find((f) => f.name === 'kvm-pv-unhalt')).toMatchObject({ value: true, source: 'explicit' });
  });

  it('cpu-pm=on turns a default pv-unhalt off and says so; disables HLT, PAUSE, CSTATE exits', () => {
    const { get, r } = guestCpuid('unhalt-1.1', 2, 0, { cpuPm: true });
    expect(get(0x40000001).eax & 0x80).toBe(0);
    expect(r.features.find((f) => f.name === 'kvm-pv-unhalt')).toMatchObject({ value: false, source: 'cpu-pm' });
    expect(r.notes.join()).toMatch(/cpu-pm=on turned kvm-pv-unhalt off/);
    expect(r.disableExits).toBe(0x2 | 0x4 | 0x8);
    expect(r.mwait).toBe(false);
  });

  it('advertises MWAIT only where the host lets the guest run it without exits', () => {
    const host = simulatedHost({ disableExits: 0xf });
    const r = resolveKnobs(validateConfig({ cpuPm: true }), host);
    expect(r.disableExits).toBe(0xf);
    expect(r.mwait).toBe(true);
    const e = buildCpuid(host.supportedCpuid, { vcpuId: 0, cpus: 1, kvmFeatures: r.kvmFeatures, kvmHints: r.kvmHints, tscDeadline: host.tscDeadline, mwait: r.mwait });
    expect((e.find((x) => x.function === 1)!.ecx >>> 3) & 1).toBe(1);
  });
});

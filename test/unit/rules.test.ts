// The rules every surface shares (electron/vmm/config/rules.ts and the schema's field rules):
// what the VMM resolves is what the renderer shows, each rule's message is one text, and the
// modules the renderer imports stay free of Node (they run in a browser).
import { describe, expect, it } from 'vitest';
import { existsSync, readFileSync } from 'node:fs';
import { builtinModules } from 'node:module';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { resolveKnobs } from '../../electron/vmm/config/resolve.ts';
import { CPU_PM_PV_UNHALT_CONFLICT, checkCpusFit, checkHostFit, checkKnobConflicts, checkNameFree, effectiveFeatures, vcpuLimit } from '../../electron/vmm/config/rules.ts';
import { DEFAULT_MEMORY_MIB, checkBootPath, checkCpus, validateConfig, type VmConfig } from '../../electron/vmm/config/vm-config.ts';
import { MAX_CPUS } from '../../electron/vmm/config/limits.ts';
import { initialDraft } from '../../renderer/src/views/wizard/draft.ts';
import { MACHINE_TYPES } from '../../electron/vmm/machine/machine-types.ts';
import type { HostInfo } from '../../electron/service/api.ts';
import { buildHostInfo } from '../../electron/service/host-info.ts';
import { keyKnobs } from '../../renderer/src/lib/config.ts';
import { simulatedHost } from '../support/simulated-host.ts';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));

describe('the cpu-pm / pv-unhalt rule is one rule', () => {
  const host = simulatedHost();
  const hostInfo = { machineTypes: MACHINE_TYPES.map((m) => ({ name: m.name, defaults: { ...m.defaults } })) } as unknown as HostInfo;
  for (const m of MACHINE_TYPES) {
    for (const cpuPm of [false, true]) {
      for (const explicit of [undefined, false] as const) {
        it(`${m.name}, cpu-pm=${cpuPm ? 'on' : 'off'}, kvm-pv-unhalt ${explicit === undefined ? 'default' : 'off'}: the card shows what the guest gets`, () => {
          const c: VmConfig = validateConfig({ machine: m.name, cpuPm, cpuFeatures: explicit === undefined ? {} : { 'kvm-pv-unhalt': explicit } });
          const resolved = resolveKnobs(c, host).features.find((f) => f.name === 'kvm-pv-unhalt')!;
          const shown = keyKnobs(hostInfo, c).find((k) => k.label === 'pv-unhalt')!;
          expect(shown.value).toBe(resolved.value ? 'on' : 'off');
        });
      }
    }
  }

  it('cpu-pm=on turns a default kvm-pv-unhalt off, and refuses an explicit one, in the same words everywhere', () => {
    const defaults = { 'kvm-pv-unhalt': true };
    expect(effectiveFeatures({ cpuPm: true, cpuFeatures: {} }, defaults).find((f) => f.name === 'kvm-pv-unhalt'))
      .toEqual({ name: 'kvm-pv-unhalt', value: false, source: 'cpu-pm' });
    const both = { cpuPm: true, cpuFeatures: { 'kvm-pv-unhalt': true } };
    expect(() => checkKnobConflicts(both)).toThrow(CPU_PM_PV_UNHALT_CONFLICT);
    expect(() => resolveKnobs(validateConfig(both), host)).toThrow(CPU_PM_PV_UNHALT_CONFLICT);
  });
});

describe('what the wizard shows as unavailable is what a start refuses, in the same words', () => {
  const reasonOf = (host: ReturnType<typeof simulatedHost>, option: string) => buildHostInfo([], () => host).options.find((o) => o.option === option)!;
  const errorOf = (raw: Record<string, unknown>, host: ReturnType<typeof simulatedHost>) => {
    try {
      resolveKnobs(validateConfig(raw), host);
      return '';
    } catch (e) {
      return (e as Error).message;
    }
  };
  it('cpu-pm without HLT exits to disable', () => {
    const host = simulatedHost({ disableExits: 0x4 });
    expect(reasonOf(host, 'cpu-pm')).toMatchObject({ available: false });
    expect(errorOf({ cpuPm: true }, host)).toBe(reasonOf(host, 'cpu-pm').reason);
  });
  it('halt-poll-ns without KVM_CAP_HALT_POLL', () => {
    const host = simulatedHost({ haltPoll: false });
    expect(errorOf({ haltPollNs: 0 }, host)).toBe(reasonOf(host, 'halt-poll-ns').reason);
  });
  it('a machine type whose default feature the host lacks, and the feature itself', () => {
    const host = simulatedHost({ kvmFeatures: 0x01007efb & ~(1 << 7) });
    const machine = reasonOf(host, 'machine:unhalt-1.1');
    const feature = reasonOf(host, 'feature:kvm-pv-unhalt');
    expect(machine.available).toBe(false);
    expect(errorOf({ machine: 'unhalt-1.1' }, host)).toContain(machine.reason!);
    expect(errorOf({ machine: 'unhalt-1.0', cpuFeatures: { 'kvm-pv-unhalt': true } }, host)).toBe(`kvm-pv-unhalt=on was asked for, but ${feature.reason}; turn it off`);
  });
});

describe('host fit, names and paths', () => {
  const limits = { maxVcpus: 8, memoryMiB: 4096, hostCpus: [0, 1] };
  it.each([
    [{ cpus: 9, memoryMiB: 128 }, "cpus=9 is more than this host's KVM allows (8)"],
    [{ cpus: 1, memoryMiB: 5000 }, 'memory 5000 MiB is more than this host has (4096 MiB)'],
    [{ cpus: 1, memoryMiB: 128, pin: [0, 7] }, 'pin: host CPU 7 does not exist or is not available to Unhalt (available: 0,1)'],
  ])('%j is refused: %s', (c, message) => {
    expect(() => checkHostFit(c, limits)).toThrow(message);
  });

  it('passes what fits, and skips the vCPU limit when KVM could not be asked', () => {
    expect(() => checkHostFit({ cpus: 8, memoryMiB: 4096, pin: [1] }, limits)).not.toThrow();
    expect(() => checkHostFit({ cpus: 200, memoryMiB: 128 }, { ...limits, maxVcpus: undefined })).not.toThrow();
  });

  it('the vCPU limit is one number: the one vcpuLimit names is the one the checks refuse above', () => {
    const refusal = (cpus: number, maxVcpus: number | undefined) => {
      try { checkCpusFit(checkCpus(cpus), maxVcpus); return ''; } catch (e) { return (e as Error).message; }
    };
    // [KVM's limit, the limit that applies]: a host below the machine's, above it, none to ask.
    for (const [maxVcpus, max] of [[64, 64], [710, MAX_CPUS], [undefined, MAX_CPUS]] as const) {
      const limit = vcpuLimit(maxVcpus);
      expect(limit.max).toBe(max);
      expect(limit.why).toContain(`up to ${max} vCPUs`);
      expect(refusal(max, maxVcpus)).toBe('');
      expect(refusal(max + 1, maxVcpus)).toContain(String(max));
    }
    expect(vcpuLimit(undefined).why).toMatch(/KVM cannot be asked here, so its own limit is checked at start$/);
  });

  it('a new VM\'s memory is one number per guest: the schema\'s default and the wizard\'s', () => {
    for (const guest of ['probe', 'linux'] as const) {
      expect(validateConfig({ guest }).memoryMiB).toBe(DEFAULT_MEMORY_MIB[guest]);
      expect(initialDraft(null, guest, new Set()).memoryMiB).toBe(String(DEFAULT_MEMORY_MIB[guest]));
    }
  });

  it('a name is taken whatever its case or spacing', () => {
    expect(() => checkNameFree('Web  1', ['web 1'])).toThrow('a VM named "web 1" already exists; choose another name');
    expect(() => checkNameFree('web 2', ['web 1'])).not.toThrow();
  });

  it('boot paths are absolute in every stored configuration', () => {
    expect(checkBootPath('/boot/vmlinuz', 'kernel')).toBe('/boot/vmlinuz');
    expect(() => checkBootPath('./kernel', 'kernel')).toThrow('kernel must be an absolute path (its full path on the host, starting with /), got "./kernel"');
    expect(() => validateConfig({ initrd: 'initrd.img' })).toThrow(/^initrd must be an absolute path/);
  });
});

describe('what the renderer imports from outside renderer/ runs in a browser', () => {
  /** Modules outside renderer/ meant for it (their views come later): held to the same rule now. */
  const RENDERER_READY = ['electron/experiments/halt-poll-model.ts'];
  const NODE = new Set([...builtinModules, ...builtinModules.map((m) => `node:${m}`)]);
  /** Every file reachable by value imports (not `import type`) from `file`. */
  function reachable(file: string, seen = new Set<string>()): Set<string> {
    if (seen.has(file)) return seen;
    seen.add(file);
    const text = readFileSync(file, 'utf8');
    for (const m of text.matchAll(/^\s*(?:import|export)\s+(?!type\b)[^'";]*?from\s+'([^']+)'/gm)) {
      const spec = m[1]!;
      if (!spec.startsWith('.')) continue;
      const target = resolve(dirname(file), spec);
      if (existsSync(target)) reachable(target, seen);
    }
    return seen;
  }

  it('no module the renderer reaches imports Node or native code', () => {
    const entry = join(ROOT, 'renderer/src/main.tsx');
    const files = [...reachable(entry)].filter((f) => !f.startsWith(join(ROOT, 'renderer/')));
    // The shared rules are among them: that is the point of this test.
    expect(files.map((f) => relative(ROOT, f))).toEqual(expect.arrayContaining([
      'electron/service/api.ts', 'electron/vmm/config/rules.ts', 'electron/vmm/config/vm-config.ts', 'electron/vmm/config/knob-syntax.ts',
      'electron/experiments/workloads.ts',
    ]));
    expect(nodeImports(files)).toEqual([]);
  });

  it('nor do the pure modules written for it that it does not import yet', () => {
    const files = RENDERER_READY.flatMap((f) => [...reachable(join(ROOT, f))]);
    expect(nodeImports(files)).toEqual([]);
  });

  /** Each value import of Node or native code among the files, as "file imports spec". */
  function nodeImports(files: readonly string[]): string[] {
    const offenders: string[] = [];
    for (const f of files) {
      const text = readFileSync(f, 'utf8');
      for (const m of text.matchAll(/^\s*(?:import|export)\s+(?!type\b)[^'";]*?from\s+'([^']+)'/gm)) {
        const spec = m[1]!;
        if (NODE.has(spec) || spec === 'koffi' || spec.includes('native/')) offenders.push(`${relative(ROOT, f)} imports ${spec}`);
      }
    }
    return offenders;
  }
});

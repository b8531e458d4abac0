// The exports (electron/vmm/export/) knob by knob: every knob lands on the target's own option
// where one exists, and every knob without one is named in the header with what to do instead.
// Running the exports (QEMU boots the probe, libvirt validates and starts it) is in test/qemu/.
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { machineFeatures } from '../../electron/vmm/config/resolve.ts';
import { ConfigError, validateConfig } from '../../electron/vmm/config/vm-config.ts';
import { exportConfig, type ExportFormat } from '../../electron/vmm/export/export.ts';
import { qemuArgs } from '../../electron/vmm/export/qemu.ts';
import { exportPlan, shellQuote } from '../../electron/vmm/export/plan.ts';
import { toYaml } from '../../electron/vmm/export/yaml.ts';
import { FEATURE_NAMES } from '../../electron/vmm/machine/features.ts';
import { parseYamlSubset, yamlViaPython } from '../support/yaml-subset.ts';

const boot = { kernelPath: '/srv/kernels/probe.elf', cmdline: 'scenario=ipi rounds=200' };
const exp = (format: ExportFormat, raw: Record<string, unknown>, hostKind: 'pvm' | 'hardware' = 'hardware') =>
  exportConfig(format, { config: validateConfig(raw), boot, hostKind }).text;

/** Configurations that together touch every knob. */
const CONFIGS: Record<string, Record<string, unknown>> = {
  plain: { name: 'plain', cpus: 2 },
  old: { name: 'old', cpus: 1, machine: 'unhalt-1.0' },
  tuned: { name: 'Tuned VM', cpus: 4, memoryMiB: 256, cpuPm: true, memLock: true, haltPollNs: 1_000_000, pin: [0, 1] },
  features: { name: 'feat', cpus: 2, cpuFeatures: { 'kvm-steal-time': false, 'kvm-hint-dedicated': true, kvmclock: false, 'kvm-pv-eoi': false } },
};

/** Each text read by the strict subset parser, and by PyYAML (one process for all) to the same value where it is installed. */
function kubevirtDocs(texts: string[]): any[] {
  const docs = texts.map(parseYamlSubset);
  const full = yamlViaPython(texts);
  if (full) expect(full.values).toEqual(docs);
  return docs;
}
const kubevirtDoc = (text: string): any => kubevirtDocs([text])[0];

describe('QEMU command line', () => {
  it('writes every paravirt feature on -cpu with its value in this VM (machine defaults, explicit, cpu-pm)', () => {
    for (const raw of Object.values(CONFIGS)) {
      const config = validateConfig(raw);
      const args = qemuArgs(exportPlan({ config, boot, hostKind: 'hardware' }));
      const cpu = args[args.indexOf('-cpu') + 1]!.split(',');
      expect(cpu[0]).toBe('host');
      // Every feature, kvm-msi-ext-dest-id too (never offered, and written =off so "every feature" holds).
      for (const f of machineFeatures(config).features) expect(cpu).toContain(`${f.name}=${f.value ? 'on' : 'off'}`);
      expect(cpu).toContain('kvm-msi-ext-dest-id=off');
      expect(cpu).toHaveLength(1 + FEATURE_NAMES.length);
      expect(args[args.indexOf('-smp') + 1]).toBe(String(config.cpus));
      expect(args[args.indexOf('-m') + 1]).toBe(String(config.memoryMiB));
    }
  });

  it('maps cpu-pm and mem-lock to -overcommit, and names halt polling and pinning as having no QEMU option', () => {
    const tuned = exp('qemu', CONFIGS.tuned!);
    expect(tuned).toContain('-overcommit cpu-pm=on,mem-lock=on');
    expect(tuned).toContain('kvm-pv-unhalt=off'); // cpu-pm=on turned the 1.1 default off, and says so
    expect(tuned).toMatch(/# Note: cpu-pm=on turned kvm-pv-unhalt off/);
    expect(tuned).toMatch(/# Knobs QEMU has no option for:\n#\s+halt-poll-ns=1000000: .*\n#.*\/sys\/module\/kvm\/parameters\/halt_poll_ns/);
    expect(tuned).toMatch(/#\s+pin: QEMU does not pin vCPU threads \(vCPU 0 on host CPU 0, vCPU 1 on host CPU 1, vCPU 2 on host CPU 0, vCPU 3 on host CPU 1\)/);
    const plain = exp('qemu', CONFIGS.plain!);
    expect(plain).not.toContain('-overcommit');
    expect(plain).toContain('# Every knob of this VM has a QEMU option.');
    expect(plain).toContain('kvm-pv-unhalt=on');
    expect(exp('qemu', CONFIGS.old!)).toContain('kvm-pv-unhalt=off');
  });

  it('turns arch-capabilities off only for a PVM host, and quotes what the shell would split', () => {
    expect(exp('qemu', CONFIGS.plain!, 'pvm')).toContain('-cpu host,arch-capabilities=off,');
    expect(exp('qemu', CONFIGS.plain!, 'hardware')).not.toContain('arch-capabilities');
    expect(exp('qemu', CONFIGS.tuned!)).toContain("-name 'guest=Tuned VM,debug-threads=on'");
    for (const s of ['plain', 'two words', "it's", 'a"b$c`d\\e', 'scenario=ipi rounds=2; rm -rf /']) {
      const r = spawnSync('sh', ['-c', `printf %s ${shellQuote(s)}`], { encoding: 'utf8' });
      expect(r.stdout).toBe(s);
    }
  });

  it('says in its header which kind of host it was made for, in every format', () => {
    for (const format of ['qemu', 'libvirt', 'kubevirt'] as const) {
      const pvm = exp(format, CONFIGS.plain!, 'pvm');
      const hw = exp(format, CONFIGS.plain!, 'hardware');
      expect(pvm, format).toContain('Made for a PVM host: arch-capabilities is off, or -cpu host aborts there (harmless elsewhere).');
      expect(hw, format).toContain('Made for a hardware-backed KVM host (VMX/SVM): on a PVM host -cpu host aborts (MSR 0x10a); export for a PVM host to run it there.');
      expect(pvm, format).not.toContain('hardware-backed');
      expect(hw, format).not.toContain('Made for a PVM host');
    }
  });

  it('refuses a configuration that contradicts itself, as a start would', () => {
    expect(() => exp('qemu', { cpuPm: true, cpuFeatures: { 'kvm-pv-unhalt': true } })).toThrow(ConfigError);
    expect(() => exp('qemu', { cpuPm: true, cpuFeatures: { 'kvm-pv-unhalt': true } })).toThrow(/contradicts cpu-pm=on/);
  });
});

describe('libvirt domain', () => {
  it('uses libvirt\'s own elements: pvspinlock, apic eoi, kvm hints, the kvmclock timer, vcpupin, locked memory', () => {
    const tuned = exp('libvirt', CONFIGS.tuned!);
    expect(tuned).toContain("<pvspinlock state='off'/>");
    expect(tuned).toContain('<memoryBacking>\n    <locked/>\n  </memoryBacking>');
    expect(tuned).toMatch(/<cputune>\n {4}<vcpupin vcpu='0' cpuset='0'\/>\n {4}<vcpupin vcpu='1' cpuset='1'\/>\n {4}<vcpupin vcpu='2' cpuset='0'\/>\n {4}<vcpupin vcpu='3' cpuset='1'\/>\n {2}<\/cputune>/);
    expect(tuned).toContain("<qemu:arg value='-overcommit'/>\n    <qemu:arg value='cpu-pm=on'/>");
    expect(tuned).toMatch(/<!-- Knobs libvirt and QEMU have no option for: -->\n<!-- {3}halt-poll-ns=1000000: [^\n]*-->\n<!--[^\n]*\/sys\/module\/kvm\/parameters\/halt_poll_ns/);
    const feat = exp('libvirt', CONFIGS.features!);
    expect(feat).toContain("<apic eoi='off'/>");
    expect(feat).toContain("<hint-dedicated state='on'/>");
    expect(feat).toContain("<timer name='kvmclock' present='no'/>");
    expect(feat).toContain("<qemu:arg value='host-x86_64-cpu.kvm-steal-time=off'/>");
    const plain = exp('libvirt', CONFIGS.plain!);
    expect(plain).toContain("<pvspinlock state='on'/>");
    expect(plain).not.toContain('qemu:commandline');
    // kvm-msi-ext-dest-id needs no -global: host-passthrough leaves it off, and the header says so.
    expect(plain).toContain('<!--   Off as host-passthrough leaves them (with the in-kernel irqchip): kvm-msi-ext-dest-id=off. -->');
    expect(plain).not.toContain('host-x86_64-cpu.kvm-msi-ext-dest-id');
    expect(plain).not.toContain('<cputune>');
  });

  it('escapes text for XML and keeps "--" out of comments', () => {
    const x = exportConfig('libvirt', {
      config: validateConfig({ name: 'x' }), boot: { kernelPath: '/k/a&b<c>.elf', cmdline: "a='1' --x \"q\"" }, hostKind: 'hardware',
    }).text;
    expect(x).toContain('<kernel>/k/a&amp;b&lt;c&gt;.elf</kernel>');
    expect(x).toContain('<cmdline>a=&apos;1&apos; --x &quot;q&quot;</cmdline>');
    for (const m of x.matchAll(/<!--(.*?)-->/g)) expect(m[1]).not.toContain('--');
  });
});

describe('KubeVirt VirtualMachine', () => {
  it('parses as YAML and has every field KubeVirt\'s schema requires', () => {
    const raws = Object.values(CONFIGS);
    const docs = kubevirtDocs(raws.map((raw) => exp('kubevirt', raw)));
    for (const [i, raw] of raws.entries()) {
      const doc = docs[i];
      expect(doc.apiVersion).toBe('kubevirt.io/v1');
      expect(doc.kind).toBe('VirtualMachine');
      expect(doc.metadata.name).toMatch(/^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/); // DNS-1123 label
      expect(['Always', 'RerunOnFailure', 'Manual', 'Halted', 'Once']).toContain(doc.spec.runStrategy);
      const domain = doc.spec.template.spec.domain; // VirtualMachineSpec.template, its spec.domain: required
      expect(typeof domain.devices).toBe('object'); // DomainSpec.devices: required
      expect(domain.firmware.kernelBoot.container.image).toMatch(/\S/); // KernelBootContainer.image: required
      for (const f of domain.cpu.features ?? []) expect(typeof f.name).toBe('string'); // CPUFeature.name: required
      expect(domain.cpu.sockets * domain.cpu.cores * domain.cpu.threads).toBe(raw.cpus);
      expect(domain.memory.guest).toBe(`${(raw.memoryMiB as number | undefined) ?? 128}Mi`);
      expect(domain.firmware.kernelBoot.kernelArgs).toBe(boot.cmdline);
    }
  }, 30_000);

  it('maps pv-unhalt, eoi and kvmclock to fields, pinning to dedicated CPUs, and lists what has no field', () => {
    const tunedText = exp('kubevirt', CONFIGS.tuned!);
    const tuned = kubevirtDoc(tunedText).spec.template.spec.domain;
    expect(tuned.features.pvspinlock.enabled).toBe(false);
    expect(tuned.cpu.dedicatedCpuPlacement).toBe(true);
    expect(tuned.resources.limits.memory).toBe(tuned.resources.requests.memory); // Guaranteed QoS
    expect(tunedText).toMatch(/# {3}cpu-pm=on: KubeVirt has no -overcommit cpu-pm option/);
    expect(tunedText).toMatch(/# {3}mem-lock=on: KubeVirt cannot lock guest memory/);
    expect(tunedText).toMatch(/# {3}halt-poll-ns=1000000: [^\n]*\n#[^\n]*\/sys\/module\/kvm\/parameters\/halt_poll_ns/);
    expect(tunedText).toMatch(/# {3}pin \(vCPU 0 on host CPU 0, [^)]*\): KubeVirt cannot pin to named host CPUs/);
    const featText = exp('kubevirt', CONFIGS.features!);
    const feat = kubevirtDoc(featText).spec.template.spec.domain;
    expect(feat.features.apic.endOfInterrupt).toBe(false);
    expect(feat.clock.timer.kvm.present).toBe(false);
    expect(featText).toMatch(/# {3}kvm-steal-time=off, kvm-hint-dedicated=on: KubeVirt has no field for these/);
    expect(featText).toMatch(/; off as host-passthrough leaves them: kvm-msi-ext-dest-id\.\n/);
    expect(exp('kubevirt', CONFIGS.plain!)).toMatch(/; off as host-passthrough leaves them: kvm-msi-ext-dest-id, kvm-hint-dedicated\.\n/);
    const plain = kubevirtDoc(exp('kubevirt', CONFIGS.plain!, 'pvm')).spec.template.spec.domain;
    expect(plain.features.pvspinlock.enabled).toBe(true);
    expect(plain.cpu.dedicatedCpuPlacement).toBeUndefined();
    expect(plain.cpu.features).toEqual([{ name: 'arch-capabilities', policy: 'disable' }]);
  }, 30_000);

  it('the YAML writer quotes what YAML would read as something else, and the test parser refuses what it cannot read', () => {
    const v = { on: 'yes', 'a b': ['1', 2, true, null, { k: [] }], n: {}, 'x:y': '#not a comment' };
    const text = toYaml(v, ['header']);
    expect(parseYamlSubset(text)).toEqual(v);
    const full = yamlViaPython([text]);
    if (full) expect(full.values[0]).toEqual(v);
    for (const bad of ['a: plain', 'a:\n\tb: "x"', 'a: "x"\na: "y"', 'a:\n  - "x"\n  b: "y"', 'a: {"b": 1}', 'a: &x "y"', '  a: "x"\nb: "y"']) {
      expect(() => parseYamlSubset(bad), bad).toThrow();
    }
  }, 30_000);
});

describe('docs/export.md', () => {
  it('has a row for every paravirt feature and every knob', () => {
    const doc = readFileSync(new URL('../../docs/export.md', import.meta.url), 'utf8');
    for (const name of [...FEATURE_NAMES, 'cpu-pm', 'mem-lock', 'halt-poll-ns', 'pin', 'cpus', 'memory', 'machine']) {
      expect(doc, name).toMatch(new RegExp(`^\\| \`${name}\``, 'm'));
    }
  });
});

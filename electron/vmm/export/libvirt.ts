// A VM as a libvirt domain (QEMU/KVM driver), for `virsh define`. libvirt has its own elements
// for some knobs (<pvspinlock>, <apic eoi>, <kvm><hint-dedicated|poll-control|pv-ipi>, the
// kvmclock timer, <cputune><vcpupin>, <memoryBacking><locked/>); host-passthrough gives the guest
// every other KVM paravirt feature the host offers, which is what a feature that is on needs.
// What libvirt has no element for goes through its documented QEMU pass-through
// (<qemu:commandline>, which libvirt reports as "tainted: custom-argv"), and what no QEMU option
// covers either (halt polling) is said in the header comment.
import {
  commentLine, describePins, type ExportPlan, featureValue, haltPollAdvice, machineTypeNote, madeForLine, passthroughDefault, shellQuote,
} from './plan.ts';
import { ConfigError, diskMode } from '../config/vm-config.ts';
import { macForVm, type NetConfig } from '../config/net-config.ts';
import { qemuDeviceOption } from '../config/device-config.ts';

const QEMU_NS = 'http://libvirt.org/schemas/domain/qemu/1.0';
/** Features with a libvirt element of their own (the rest ride on host-passthrough). */
const LIBVIRT_ELEMENT: Record<string, string> = {
  kvmclock: "<clock><timer name='kvmclock'>",
  'kvm-pv-eoi': "<apic eoi>",
  'kvm-pv-unhalt': '<pvspinlock>',
  'kvm-hint-dedicated': '<kvm><hint-dedicated>',
  'kvm-poll-control': '<kvm><poll-control>',
  'kvm-pv-ipi': '<kvm><pv-ipi>',
};
/** QEMU's CPU type behind host-passthrough: its properties are what -global can set. */
const HOST_CPU_TYPE = 'host-x86_64-cpu';

export function libvirtXml(plan: ExportPlan): string {
  const c = plan.config;
  refuseNonXml(plan);
  const on = (name: string) => (featureValue(plan, name) ? 'on' : 'off');
  // A feature with no libvirt element follows host-passthrough; where this VM wants it otherwise,
  // QEMU's -global on the CPU type sets it.
  const globals = plan.features.filter((f) => !(f.name in LIBVIRT_ELEMENT) && f.value !== passthroughDefault(f.name));
  // Off in this VM and left off by host-passthrough (kvm-msi-ext-dest-id): nothing to write, said in the header.
  const leftOff = plan.features.filter((f) => !(f.name in LIBVIRT_ELEMENT) && !f.value && !passthroughDefault(f.name));
  const qemuArgs: string[] = [];
  if (c.cpuPm) qemuArgs.push('-overcommit', 'cpu-pm=on');
  for (const f of globals) qemuArgs.push('-global', `${HOST_CPU_TYPE}.${f.name}=${f.value ? 'on' : 'off'}`);
  // libvirt has no element for isa-debug-exit: QEMU's -device, passed through.
  const devices = (c.devices ?? []).map(qemuDeviceOption);
  for (const d of devices) qemuArgs.push('-device', d);

  const header = [
    `VM "${c.name}" exported by Unhalt for libvirt (QEMU/KVM): virsh define FILE, then virsh start ${shellQuote(c.name)}.`,
    ...machineTypeNote(plan, 'q35 (libvirt expands "q35" to the newest pc-q35-X.Y at define time and keeps it)'),
    ...plan.notes.map((n) => `Note: ${n}.`),
    `Paravirt features: ${Object.keys(LIBVIRT_ELEMENT).map((n) => `${n} as ${LIBVIRT_ELEMENT[n]}`).join(', ')};`,
    '  the others through host-passthrough (on where the host offers them).',
    ...(leftOff.length ? [`  Off as host-passthrough leaves them (with the in-kernel irqchip): ${leftOff.map((f) => `${f.name}=off`).join(', ')}.`] : []),
    ...(globals.length ? [`  Without a libvirt element and not as host-passthrough sets them, so through <qemu:commandline> -global: ${globals.map((f) => `${f.name}=${f.value ? 'on' : 'off'}`).join(', ')}.`] : []),
    ...(c.cpuPm ? ['cpu-pm=on: libvirt has no element for -overcommit cpu-pm=on; it is passed in <qemu:commandline> (libvirt then reports the domain as tainted: custom-argv).'] : []),
    ...devices.map((d) => `device ${d}: libvirt has no element for it; it is passed in <qemu:commandline> as -device (tainted: custom-argv). A guest's write of V ends QEMU with status (V << 1) | 1, which virsh does not pass on: read the guest's verdict on its console.`),
    ...(c.memLock ? ['mem-lock=on: <memoryBacking><locked/>; give the domain a <memtune><hard_limit> so libvirt can size RLIMIT_MEMLOCK (it needs the right to raise it).'] : []),
    ...(plan.pins ? [`pin: <cputune><vcpupin> (${describePins(plan.pins)}).`] : []),
    ...(c.haltPollNs !== undefined ? ['Knobs libvirt and QEMU have no option for:', ...haltPollAdvice(c.haltPollNs).map((l) => `  ${l}`)] : []),
    ...(c.net?.mode === 'user' && c.net.hostfwd.length ? [
      'hostfwd: libvirt\'s user interface forwards ports only with the passt back end (libvirt 9.0 or newer, <backend type=\'passt\'/>),',
      '  used below; with passt the guest gets the host\'s own address by DHCP instead of 10.0.2.15.',
    ] : []),
    ...(c.net?.mode === 'tap' ? [`tap=${c.net.tap}: an ethernet interface on the existing tap (managed='no': libvirt neither creates nor removes it).`] : []),
    madeForLine(plan),
    `ttyS0 is a pty (virsh console ${shellQuote(c.name)}); ttyS1, the guest's agent channel, goes to a file.`,
  ];

  const x: string[] = [];
  x.push(...header.map((l) => `<!-- ${xmlComment(l)} -->`));
  x.push(`<domain type='kvm'${qemuArgs.length ? ` xmlns:qemu='${QEMU_NS}'` : ''}>`);
  x.push(`  <name>${esc(c.name)}</name>`);
  x.push(`  <memory unit='MiB'>${c.memoryMiB}</memory>`);
  if (c.memLock) x.push('  <memoryBacking>', '    <locked/>', '  </memoryBacking>');
  x.push(`  <vcpu placement='static'>${c.cpus}</vcpu>`);
  if (plan.pins) {
    x.push('  <cputune>', ...plan.pins.map((cpu, i) => `    <vcpupin vcpu='${i}' cpuset='${cpu}'/>`), '  </cputune>');
  }
  x.push('  <os>', "    <type arch='x86_64' machine='q35'>hvm</type>", `    <kernel>${esc(plan.boot.kernelPath)}</kernel>`);
  if (plan.boot.initrdPath) x.push(`    <initrd>${esc(plan.boot.initrdPath)}</initrd>`);
  if (plan.boot.cmdline) x.push(`    <cmdline>${esc(plan.boot.cmdline)}</cmdline>`);
  x.push('  </os>');
  x.push('  <features>', '    <acpi/>', `    <apic eoi='${on('kvm-pv-eoi')}'/>`, `    <pvspinlock state='${on('kvm-pv-unhalt')}'/>`,
    '    <kvm>', `      <hint-dedicated state='${on('kvm-hint-dedicated')}'/>`, `      <poll-control state='${on('kvm-poll-control')}'/>`,
    `      <pv-ipi state='${on('kvm-pv-ipi')}'/>`, '    </kvm>', '  </features>');
  if (plan.hostKind === 'pvm') {
    x.push("  <cpu mode='host-passthrough' check='none' migratable='off'>", "    <feature policy='disable' name='arch-capabilities'/>", '  </cpu>');
  } else {
    x.push("  <cpu mode='host-passthrough' check='none' migratable='off'/>");
  }
  x.push("  <clock offset='utc'>", `    <timer name='kvmclock' present='${featureValue(plan, 'kvmclock') ? 'yes' : 'no'}'/>`, '  </clock>');
  // A reset ends the VM in Unhalt too.
  x.push('  <on_poweroff>destroy</on_poweroff>', '  <on_reboot>destroy</on_reboot>', '  <on_crash>destroy</on_crash>');
  const agentLog = plan.agentLog ?? `/var/log/libvirt/qemu/${plan.slug}.ttyS1.log`;
  x.push('  <devices>',
    // Unhalt's board has no USB and no balloon; SeaBIOS also starts much faster without USB.
    "    <controller type='usb' model='none'/>",
    "    <serial type='pty'>",
    ...(plan.consoleLog ? [`      <log file='${esc(plan.consoleLog)}' append='off'/>`] : []),
    "      <target type='isa-serial' port='0'/>",
    '    </serial>',
    "    <serial type='file'>", `      <source path='${esc(agentLog)}'/>`, "      <target type='isa-serial' port='1'/>", '    </serial>',
    "    <console type='pty'>", "      <target type='serial' port='0'/>", '    </console>',
    "    <memballoon model='none'/>",
    ...(c.rng ? ["    <rng model='virtio'>", "      <backend model='random'>/dev/urandom</backend>", '    </rng>'] : []),
    ...(c.disks ?? []).flatMap((d, i) => ["    <disk type='file' device='disk'>", "      <driver name='qemu' type='raw'/>",
      `      <source file='${esc(d.path)}'/>`, `      <target dev='vd${String.fromCharCode(97 + i)}' bus='virtio'/>`,
      // <transient/>: libvirt's snapshot=on (the guest's writes go to an overlay deleted when the domain stops).
      ...(diskMode(d) === 'read-only' ? ['      <readonly/>'] : diskMode(d) === 'snapshot' ? ['      <transient/>'] : []), '    </disk>']),
    ...(c.net ? libvirtInterface(c.net, macForVm(c.name)) : []),
    '  </devices>');
  if (qemuArgs.length) x.push('  <qemu:commandline>', ...qemuArgs.map((a) => `    <qemu:arg value='${esc(a)}'/>`), '  </qemu:commandline>');
  x.push('</domain>');
  return `${x.join('\n')}\n`;
}

/** The <interface> of a network: user (slirp, or passt when ports are forwarded) or an existing tap. */
function libvirtInterface(n: NetConfig, mac: string): string[] {
  const common = [`      <mac address='${mac}'/>`, "      <model type='virtio'/>"];
  if (n.mode === 'tap') return ["    <interface type='ethernet'>", `      <target dev='${esc(n.tap)}' managed='no'/>`, ...common, '    </interface>'];
  const forwards = n.hostfwd.flatMap((f) => [
    `      <portForward proto='${f.protocol}' address='${esc(f.hostAddress)}'>`, `        <range start='${f.hostPort}' to='${f.guestPort}'/>`, '      </portForward>',
  ]);
  return ["    <interface type='user'>", ...common, ...(forwards.length ? ["      <backend type='passt'/>", ...forwards] : []), '    </interface>'];
}

/**
 * Text for an XML 1.0 element or attribute: the five special characters as entities, and tab, line
 * feed and carriage return as character references (in an attribute a parser would turn them into
 * spaces; a path with a newline must stay that path). The other C0 controls XML 1.0 cannot hold at
 * all, not even as references: such a string is refused (libvirtXmlProblem says which field).
 */
function esc(s: string): string {
  return s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/'/g, '&apos;').replace(/"/g, '&quot;')
    .replace(/[\t\n\r]/g, (ch) => `&#${ch.charCodeAt(0)};`);
}

/** Characters XML 1.0 cannot hold in any form (C0 controls but tab, LF, CR; U+FFFE/U+FFFF; lone surrogates). */
const NOT_XML = /[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

/** A string of the VM's that XML 1.0 cannot hold (a file name with a control character) is refused, named. */
function refuseNonXml(plan: ExportPlan): void {
  const c = plan.config;
  const fields: [string, string | undefined][] = [
    ['name', c.name], ['kernel', plan.boot.kernelPath], ['initrd', plan.boot.initrdPath], ['kernel command line', plan.boot.cmdline],
    ['console log', plan.consoleLog], ['agent log', plan.agentLog],
    ...(c.disks ?? []).map((d, i): [string, string] => [`disk ${i + 1}`, d.path]),
    ...(c.net?.mode === 'tap' ? [['tap device', c.net.tap] as [string, string]] : []),
  ];
  for (const [field, value] of fields) {
    const m = value === undefined ? null : NOT_XML.exec(value);
    if (m) {
      const code = m[0].charCodeAt(0).toString(16).toUpperCase().padStart(4, '0');
      throw new ConfigError(`libvirt's XML cannot hold the ${field} ${JSON.stringify(value!.slice(0, 80))}: it has the character U+${code}, which XML 1.0 allows in no form; rename it, or export --format qemu`);
    }
  }
}

/** XML comments may not contain "--" nor end in "-". */
function xmlComment(s: string): string {
  let t = commentLine(s);
  while (t.includes('--')) t = t.replace(/--/g, '- -');
  return t.endsWith('-') ? `${t} ` : t;
}

// Export to where fleets run: a configuration (a saved VM, or any configuration a tuning advisor
// recommends) as a QEMU command line, a libvirt domain or a KubeVirt VirtualMachine. Pure:
// configuration and boot files in, text out. The CLI (`unhalt export`), the service API
// (exportConfig) and the UI all call this; docs/export.md has the knob-by-knob mapping.
import { kubevirtYaml } from './kubevirt.ts';
import { libvirtXml } from './libvirt.ts';
import { type ExportInput, exportPlan } from './plan.ts';
import { qemuScript } from './qemu.ts';
import { EXPORT_FORMATS, EXPORT_HOSTS, type ExportedText, type ExportFormat, type ExportHost } from './types.ts';

export { EXPORT_FORMATS, EXPORT_HOSTS, type ExportedText, type ExportFormat, type ExportHost, type ExportInput };

const WRITERS = {
  qemu: { write: qemuScript, extension: 'qemu.sh', mediaType: 'text/x-shellscript' },
  libvirt: { write: libvirtXml, extension: 'libvirt.xml', mediaType: 'application/xml' },
  kubevirt: { write: kubevirtYaml, extension: 'kubevirt.yaml', mediaType: 'application/yaml' },
} as const satisfies Record<ExportFormat, unknown>;

export function isExportFormat(value: unknown): value is ExportFormat {
  return typeof value === 'string' && (EXPORT_FORMATS as readonly string[]).includes(value);
}

export function isExportHost(value: unknown): value is ExportHost {
  return typeof value === 'string' && (EXPORT_HOSTS as readonly string[]).includes(value);
}

/** The message for a host kind that is not one (isExportHost false), naming the option it came in (`--for-host`, forHost). */
export function exportHostProblem(value: unknown, option: string): string {
  const got = typeof value === 'string' ? `"${value.slice(0, 40)}"` : JSON.stringify(value)?.slice(0, 40) ?? String(value);
  return `${option} must be ${EXPORT_HOSTS.join(' or ')} (the kind of host the export is for), got ${got}`;
}

/** Throws ConfigError for a configuration that contradicts itself. */
export function exportConfig(format: ExportFormat, input: ExportInput): ExportedText {
  const plan = exportPlan(input);
  const w = WRITERS[format];
  return { format, text: w.write(plan), fileName: `${plan.slug}.${w.extension}`, mediaType: w.mediaType };
}

// The export's public types, in a file with no imports: the service API (and so the renderer,
// which must not load Node modules) names them.

export const EXPORT_FORMATS = ['qemu', 'libvirt', 'kubevirt'] as const;
export type ExportFormat = (typeof EXPORT_FORMATS)[number];

/** The kinds of host an export can be made for (`--for-host`, the API's forHost, the UI's choice). */
export const EXPORT_HOSTS = ['pvm', 'hardware'] as const;
export type ExportHost = (typeof EXPORT_HOSTS)[number];

/** How each kind of host is named in an export's header and in the UI. */
export const EXPORT_HOST_LABELS: Record<ExportHost, string> = {
  pvm: 'PVM host',
  hardware: 'hardware-backed KVM host (VMX/SVM)',
};

export interface ExportedText {
  format: ExportFormat;
  text: string;
  /** A file name to save it under (the VM's name as a slug, the format, the usual extension). */
  fileName: string;
  mediaType: string;
}

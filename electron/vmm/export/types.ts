// The export's public types, in a file with no imports: the service API (and so the renderer,
// which must not load Node modules) names them.

export const EXPORT_FORMATS = ['qemu', 'libvirt', 'kubevirt'] as const;
export type ExportFormat = (typeof EXPORT_FORMATS)[number];

export interface ExportedText {
  format: ExportFormat;
  text: string;
  /** A file name to save it under (the VM's name as a slug, the format, the usual extension). */
  fileName: string;
  mediaType: string;
}

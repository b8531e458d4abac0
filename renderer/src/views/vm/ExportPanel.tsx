// Export to where fleets run: the VM's configuration as a QEMU command line, a libvirt domain or
// a KubeVirt VirtualMachine (exportConfig; docs/export.md), for a PVM or a hardware-backed KVM
// host (this host's kind until another is picked), to copy or save. Knobs a target has no option
// for are listed in the text's own header, and so is the kind of host: what is copied says it too.
import { useEffect, useId, useState } from 'react';
import { EXPORT_HOSTS, EXPORT_HOST_LABELS, type ExportedConfigDto, type ExportFormatDto, type ExportHostDto, type VmRecord } from '../../../../electron/service/api.ts';
import { api, errorMessage, useApp } from '../../state/app.ts';
import { downloadText } from '../../lib/export.ts';

const FORMATS: { format: ExportFormatDto; label: string; hint: string }[] = [
  { format: 'qemu', label: 'QEMU command line', hint: 'a shell script: sh FILE' },
  { format: 'libvirt', label: 'libvirt domain XML', hint: 'virsh define FILE' },
  { format: 'kubevirt', label: 'KubeVirt VirtualMachine', hint: 'kubectl apply -f FILE' },
];

export function ExportPanel({ vm }: { vm: VmRecord }) {
  const id = useId();
  const [open, setOpen] = useState(false);
  const [format, setFormat] = useState<ExportFormatDto>('qemu');
  const thisHost = useApp((s) => s.host?.kind);
  // The kind of host the export is for: this host's until the user picks one (as `--for-host`).
  const [picked, setPicked] = useState<ExportHostDto | null>(null);
  const forHost = picked ?? thisHost;
  const [result, setResult] = useState<{ ok: true; value: ExportedConfigDto } | { ok: false; error: string } | null>(null);
  const [status, setStatus] = useState<string | null>(null);
  // The configuration as saved: re-exported whenever it (or the format) changes.
  const configKey = JSON.stringify(vm.config);
  useEffect(() => {
    if (!open || !forHost) return;
    let current = true;
    setResult(null);
    setStatus(null);
    api.exportConfig(vm.config, format, forHost).then(
      (value) => { if (current) setResult({ ok: true, value }); },
      (e: unknown) => { if (current) setResult({ ok: false, error: errorMessage(e) }); },
    );
    return () => { current = false; };
  }, [open, format, forHost, configKey]);

  const copy = async (text: string) => {
    try {
      await navigator.clipboard.writeText(text);
      setStatus('Copied to the clipboard.');
    } catch (e) {
      setStatus(`Could not copy (${errorMessage(e)}); select the text and copy it, or save it.`);
    }
  };
  const save = (r: ExportedConfigDto) => {
    downloadText(r.fileName, r.text, r.mediaType);
    setStatus(`Saved as ${r.fileName}.`);
  };

  if (!open) {
    return (
      <section className="panel export-panel" aria-label="Export">
        <div className="panel-head">
          <h2>Export</h2>
          <span className="muted small">to QEMU, libvirt or KubeVirt</span>
          <div className="panel-actions">
            <button type="button" className="btn" aria-expanded={false} onClick={() => setOpen(true)}>Export…</button>
          </div>
        </div>
      </section>
    );
  }
  const value = result?.ok ? result.value : undefined;
  return (
    <section className="panel export-panel" aria-labelledby={`${id}-title`}>
      <div className="panel-head">
        <h2 id={`${id}-title`}>Export</h2>
        <div className="panel-actions">
          <button type="button" className="btn small" aria-expanded onClick={() => setOpen(false)}>Close</button>
        </div>
      </div>
      <fieldset className="export-formats">
        <legend className="muted small">Format</legend>
        {FORMATS.map((f) => (
          <label key={f.format} className="radio">
            <input type="radio" name={`${id}-format`} value={f.format} checked={format === f.format} onChange={() => setFormat(f.format)} />
            {f.label} <span className="muted small">({f.hint})</span>
          </label>
        ))}
      </fieldset>
      <fieldset className="export-formats export-hosts">
        <legend className="muted small">For</legend>
        {EXPORT_HOSTS.map((h) => (
          <label key={h} className="radio">
            <input type="radio" name={`${id}-host`} value={h} checked={forHost === h} onChange={() => setPicked(h)} />
            {`A ${EXPORT_HOST_LABELS[h]}`}{h === thisHost ? <span className="muted small"> (this host)</span> : null}
          </label>
        ))}
      </fieldset>
      {result && !result.ok && <p className="error" role="alert">{result.error}</p>}
      {!result && <p className="muted small" role="status">Exporting…</p>}
      {value && (
        <>
          <pre className="cmdline export-text" data-testid="export-text" data-format={value.format} tabIndex={0}
            aria-label={`${FORMATS.find((f) => f.format === value.format)!.label} of ${vm.config.name}`}><code>{value.text}</code></pre>
          <div className="toolbar">
            <button type="button" className="btn small" onClick={() => void copy(value.text)}>Copy to clipboard</button>
            <button type="button" className="btn small" onClick={() => save(value)}>Save {value.fileName}</button>
          </div>
        </>
      )}
      {status && <p className="hint" role="status">{status}</p>}
    </section>
  );
}

// The wizard's Storage part (step 3, "Storage & network"): virtio-blk disks as raw image files, in order (the first is
// the guest's vda). Each disk is a path, checked by the schema's disk rule as typed (validate.ts)
// and by the service when the field is left (checkBootFiles: the allowed folders and the image
// rules — a qcow2 comes back with its qemu-img convert command), a read-only switch, a snapshot
// checkbox (snapshot=on: the guest's writes are thrown away; diskMode says read-only wins, so it is
// off and disabled while the disk is read-only), and, for a file that does not exist yet, "Create image" (createDiskImage: an empty sparse raw image of the
// size given, in an allowed folder, never over a file). A qcow2 can be converted in place
// (convertDiskImage: qemu-img, its progress shown as it runs); the disk then takes the raw copy.
import { useEffect, useId, useRef, useState } from 'react';
import { api, errorMessage, useApp } from '../../state/app.ts';
import { MAX_DISKS } from '../../../../electron/vmm/config/limits.ts';
import type { StepProps } from './step-props.ts';
import { diskMode } from '../../../../electron/vmm/config/vm-config.ts';
import { draftDiskToConfig, type DraftDisk } from './draft.ts';

type Verdict = { ok: true; note?: string } | { ok: false; message: string };

export function StorageFields(props: StepProps) {
  const { draft, update, problem, touch, editing } = props;
  const id = useId();
  const [verdicts, setVerdicts] = useState<Record<string, Verdict>>({});
  const [sizes, setSizes] = useState<Record<number, string>>({});
  const [busy, setBusy] = useState<number | null>(null);
  const asked = useRef(new Map<string, Promise<void>>());
  // Which conversion belongs to which disk (by index), and what its events say.
  const [converting, setConverting] = useState<Record<number, string>>({});
  const conversions = useApp((s) => s.conversions);
  const disks = draft.disks;
  const setDisk = (i: number, patch: Partial<DraftDisk>) => update({ disks: disks.map((d, j) => (j === i ? { ...d, ...patch } : d)) });
  // The mode (diskMode) decides what the service checks: write access for read-write only.
  const key = (d: DraftDisk) => JSON.stringify([d.path.trim(), diskMode(d)]);

  /** The service's verdict on one disk as it stands (asked once per path and mode). */
  const check = (d: DraftDisk, force = false) => {
    const k = key(d);
    if (!d.path.trim().startsWith('/') || (!force && asked.current.has(k))) return;
    const p = api.checkBootFiles({ disks: [draftDiskToConfig(d)] }).then(
      () => setVerdicts((v) => ({ ...v, [k]: { ok: true } })),
      (e) => setVerdicts((v) => ({ ...v, [k]: { ok: false, message: errorMessage(e) } })),
    );
    asked.current.set(k, p);
  };

  const create = async (i: number) => {
    const d = disks[i]!;
    setBusy(i);
    try {
      await api.createDiskImage(d.path.trim(), Number(sizes[i] ?? '1024'));
      const k = key(d);
      asked.current.delete(k);
      setVerdicts((v) => ({ ...v, [k]: { ok: true, note: `Created an empty ${sizes[i] ?? '1024'} MiB raw image.` } }));
      props.recheck(); // the summary's check named the missing file: ask again
    } catch (e) {
      setVerdicts((v) => ({ ...v, [key(d)]: { ok: false, message: errorMessage(e) } }));
    } finally {
      setBusy(null);
    }
  };

  const convert = async (i: number) => {
    const d = disks[i]!;
    setBusy(i);
    try {
      const c = await api.convertDiskImage(d.path.trim());
      setConverting((m) => ({ ...m, [i]: c.id }));
    } catch (e) {
      setVerdicts((v) => ({ ...v, [key(d)]: { ok: false, message: errorMessage(e) } }));
    } finally {
      setBusy(null);
    }
  };
  // A finished conversion: the disk takes the raw image (checked like any path).
  useEffect(() => {
    for (const [i, id] of Object.entries(converting)) {
      const c = conversions[id];
      if (c?.state !== 'done' || disks[Number(i)]?.path.trim() !== c.source) continue;
      const next = { ...disks[Number(i)]!, path: c.target };
      setDisk(Number(i), { path: c.target });
      check(next, true);
    }
  }, [conversions, converting]);

  const schemaProblem = problem('disks');
  return (
    <fieldset className="field storage">
      <legend>Storage</legend>
      {disks.length === 0 && <p className="hint">No disks: the guest boots from its kernel and initrd alone.</p>}
      {disks.map((d, i) => {
        const verdict = verdicts[key(d)];
        const missing = verdict && !verdict.ok && /: no such file$/.test(verdict.message);
        const qcow2 = verdict && !verdict.ok && /: is a qcow2 image;/.test(verdict.message);
        const conv = converting[i] ? conversions[converting[i]!] : undefined;
        const base = `${id}-disk-${i}`;
        return (
          <div className="disk-row" key={i} data-disk={i}>
            <div className="field">
              <label htmlFor={`${base}-path`}>Disk {i + 1} (vd{String.fromCharCode(97 + i)}): raw image file</label>
              <input id={`${base}-path`} value={d.path} placeholder="/full/path/to/disk.img" autoComplete="off" spellCheck={false}
                aria-invalid={verdict && !verdict.ok ? true : undefined} aria-describedby={verdict && !verdict.ok ? `${base}-error` : undefined}
                onChange={(e) => { editing('disks'); setDisk(i, { path: e.target.value }); }}
                onBlur={() => { touch('disks'); check(d); }} />
              {verdict && !verdict.ok && <p className="field-error" id={`${base}-error`} role="alert">{verdict.message}</p>}
              {verdict?.ok && verdict.note && <p className="hint" role="status">{verdict.note}</p>}
            </div>
            {qcow2 && (!conv || conv.state === 'failed') && (
              <button type="button" className="btn small" data-action="convert-image" disabled={busy === i} onClick={() => void convert(i)}>
                Convert to a raw image (qemu-img)
              </button>
            )}
            {conv && (
              <div className="field-row" role="status">
                <progress max={100} value={conv.percent} aria-label={`Converting disk ${i + 1}`} />
                <span className={conv.state === 'failed' ? 'field-error' : 'hint'}>
                  {conv.state === 'running' ? `Converting to ${conv.target}: ${conv.percent}%`
                    : conv.state === 'done' ? `Converted to ${conv.target}.` : `Conversion failed: ${conv.message}`}
                </span>
              </div>
            )}
            <label className="toggle inline">
              <input type="checkbox" role="switch" checked={d.readonly}
                onChange={(e) => { const next = { ...d, readonly: e.target.checked }; setDisk(i, { readonly: e.target.checked }); check(next); }} />
              <span><strong>Read-only</strong> <span className="choice-help">the guest can read it, never write it (several VMs may share it)</span></span>
            </label>
            <label className="toggle inline">
              <input type="checkbox" checked={diskMode(d) === 'snapshot'} disabled={diskMode(d) === 'read-only'}
                onChange={(e) => { const next = { ...d, snapshot: e.target.checked }; setDisk(i, { snapshot: e.target.checked }); check(next); }} />
              <span><strong>Throw away the guest's writes (snapshot)</strong> <span className="choice-help">
                {diskMode(d) === 'read-only' ? 'a read-only disk is never written anyway'
                  : 'the guest writes as usual, to a scratch copy that goes when the VM stops; the image file is never changed'}
              </span></span>
            </label>
            {missing && (
              <div className="field-row">
                <label htmlFor={`${base}-size`}>Size of a new image (MiB)</label>
                <input id={`${base}-size`} className="num" inputMode="numeric" value={sizes[i] ?? '1024'} autoComplete="off"
                  onChange={(e) => setSizes((s) => ({ ...s, [i]: e.target.value }))} />
                <button type="button" className="btn small" data-action="create-image" disabled={busy === i} onClick={() => void create(i)}>
                  {busy === i ? 'Creating…' : 'Create image'}
                </button>
              </div>
            )}
            <button type="button" className="btn small" data-action="remove-disk" onClick={() => update({ disks: disks.filter((_, j) => j !== i) })}>
              Remove disk {i + 1}
            </button>
          </div>
        );
      })}
      {schemaProblem && <p className="field-error" role="alert">{schemaProblem}</p>}
      <button type="button" className="btn small" data-action="add-disk" disabled={disks.length >= MAX_DISKS}
        onClick={() => update({ disks: [...disks, { path: '', readonly: false, snapshot: false }] })}>
        Add a disk
      </button>
      <p className="hint">
        virtio-blk, raw images only (convert a qcow2 with qemu-img convert -f qcow2 -O raw); the file is locked while the VM runs,
        and must lie in a folder Unhalt may give to a guest.
      </p>
    </fieldset>
  );
}

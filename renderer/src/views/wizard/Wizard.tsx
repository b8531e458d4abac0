// The VM creation wizard: one step per group of knobs, a summary with the equivalent
// `unhalt run` command line (describeConfig), then createVm. In edit mode (`edit`: a stopped VM)
// the same steps start from that VM's configuration and the last one saves it (updateVm). Every
// field keeps what the user typed and is judged on blur and on Next by the rules the API applies
// (validate.ts), with the message at the field.
import { useEffect, useMemo, useRef, useState } from 'react';
import type { HostInfo, VmRecord } from '../../../../electron/service/api.ts';
import { checkMemoryMiB } from '../../../../electron/vmm/config/vm-config.ts';
import { api, useApp, navigate, createVm, updateVm, errorMessage } from '../../state/app.ts';
import { initialDraft, draftToConfig, withLateHost } from './draft.ts';
import { configToDraft } from './from-config.ts';
import type { Draft } from './draft.ts';
import type { DescribeResult, StepProps } from './step-props.ts';
import { typedNumber } from './typed-text.ts';
import { bootFilesOf, draftProblems, type FieldId, type FileVerdict } from './validate.ts';
import { BasicsStep, ResourcesStep, StorageNetworkStep, MachineStep, FeaturesStep, OvercommitStep, HaltPollStep, PinStep, SummaryStep } from './steps.tsx';

/** A step's fields: fixed ones, and (ownsPrefix) those made per row, such as a forward's `net.0.hostPort`. */
const STEPS: { id: string; title: string; Component: (p: StepProps) => React.ReactElement; fields: FieldId[]; ownsPrefix?: string }[] = [
  { id: 'basics', title: 'Basics', Component: BasicsStep, fields: ['name', 'kernel', 'initrd'] },
  { id: 'resources', title: 'CPUs & memory', Component: ResourcesStep, fields: ['cpus', 'memoryMiB'] },
  { id: 'storage', title: 'Storage & network', Component: StorageNetworkStep, fields: ['disks'], ownsPrefix: 'net.' },
  { id: 'machine', title: 'Machine type', Component: MachineStep, fields: [] },
  { id: 'features', title: 'Paravirt features', Component: FeaturesStep, fields: ['cpuFeatures'] },
  { id: 'overcommit', title: 'Overcommit', Component: OvercommitStep, fields: ['cpuPm'] },
  { id: 'halt-poll', title: 'Halt polling', Component: HaltPollStep, fields: ['haltPollNs', 'guestHaltPollNs'] },
  { id: 'pinning', title: 'Pinning', Component: PinStep, fields: ['pin'] },
  { id: 'summary', title: 'Summary', Component: SummaryStep, fields: [] },
];

/** describeConfig on every change (debounced): the command line, notes, warnings or the error. */
function useDescribe(config: unknown, nonce: number): DescribeResult {
  const [state, setState] = useState<DescribeResult>({ resolved: null, error: null, pending: true });
  const json = JSON.stringify(config);
  const seq = useRef(0);
  useEffect(() => {
    const my = ++seq.current;
    setState((s) => ({ ...s, pending: true }));
    const timer = setTimeout(() => {
      api.describeConfig(JSON.parse(json)).then(
        (resolved) => { if (my === seq.current) setState({ resolved, error: null, pending: false }); },
        (e) => { if (my === seq.current) setState({ resolved: null, error: errorMessage(e), pending: false }); },
      );
    }, 200);
    return () => clearTimeout(timer);
  }, [json, nonce]);
  return state;
}

/**
 * The service's verdict on the boot files the draft names (checkBootFiles), asked once per
 * distinct set of paths: `verdict` for the current paths (null while unknown), and `settle()`
 * for Next, which must not pass a file the service has not judged yet.
 */
function useFileVerdict(files: { kernel?: string; initrd?: string }, memoryMiB: number | undefined) {
  const none = files.kernel === undefined && files.initrd === undefined;
  const key = JSON.stringify([files.kernel ?? null, files.initrd ?? null, memoryMiB ?? null]);
  const cache = useRef(new Map<string, Promise<FileVerdict>>());
  const [verdicts, setVerdicts] = useState<Record<string, FileVerdict>>({});
  const ask = (k: string): Promise<FileVerdict> => {
    let p = cache.current.get(k);
    if (!p) {
      const [kernel, initrd, mib] = JSON.parse(k) as [string | null, string | null, number | null];
      const memory = mib === null ? {} : { memoryMiB: mib };
      const one = (files: { kernel?: string; initrd?: string }) => api.checkBootFiles({ ...files, ...memory }).then(() => undefined, errorMessage);
      p = Promise.all([kernel === null ? undefined : one({ kernel }), initrd === null ? undefined : one({ initrd })]).then(([k1, i1]) => {
        const v: FileVerdict = {};
        if (k1) v.kernel = k1;
        if (i1) v.initrd = i1;
        return v;
      });
      cache.current.set(k, p);
      void p.then((v) => setVerdicts((all) => ({ ...all, [k]: v })));
    }
    return p;
  };
  useEffect(() => {
    if (none) return;
    const t = setTimeout(() => void ask(key), 250);
    return () => clearTimeout(t);
  }, [key]);
  return { verdict: none ? {} : verdicts[key] ?? null, settle: () => (none ? Promise.resolve({}) : ask(key)) };
}

export function Wizard({ guest, edit }: { guest?: 'probe' | 'linux'; edit?: VmRecord }) {
  const host = useApp((s) => s.host);
  const vms = useApp((s) => s.vms);
  // Names taken by other VMs (an edited VM keeps its own).
  const names = useMemo(() => new Set(vms.filter((v) => v.id !== edit?.id).map((v) => v.config.name)), [vms, edit?.id]);
  const [draft, setDraft] = useState<Draft>(() => (edit ? configToDraft(edit.config, host, names) : initialDraft(host, guest, names)));
  const [step, setStep] = useState(0);
  const [creating, setCreating] = useState(false);
  const [createError, setCreateError] = useState<string | null>(null);
  // Fields whose problem is shown: left at least once (blur), or on a step where Next was pressed.
  const [shown, setShown] = useState<ReadonlySet<FieldId>>(new Set());
  const showFields = (fields: FieldId[], on: boolean) => setShown((s) => {
    if (fields.every((f) => s.has(f) === on)) return s;
    const next = new Set(s);
    for (const f of fields) if (on) next.add(f); else next.delete(f);
    return next;
  });
  // Fields the user has set (through update) or entered (focus): host info arriving late leaves
  // them as they are; a field replaced while the user selects its text would eat their keystrokes.
  const touched = useRef(new Set<keyof Draft>());
  // Host info may arrive after the wizard opened: take its newest machine type then.
  const hostSeen = useRef(!!host || !!edit);
  useEffect(() => {
    if (host && !hostSeen.current) {
      hostSeen.current = true;
      setDraft((d) => withLateHost(d, host, guest, names, touched.current));
    }
  }, [host, guest, names]);
  const config = useMemo(() => draftToConfig(draft), [draft]);
  const [describeNonce, setDescribeNonce] = useState(0);
  const describe = useDescribe(config, describeNonce);
  const files = useFileVerdict(bootFilesOf(draft), typedNumber(draft.memoryMiB, checkMemoryMiB));
  const problems = draftProblems(draft, host, names, files.verdict);
  const update = (patch: Partial<Draft>) => {
    for (const k of Object.keys(patch) as (keyof Draft)[]) touched.current.add(k);
    setDraft((d) => ({ ...d, ...patch }));
  };
  const current = STEPS[step]!;
  /** Step i's fields that have a problem in `p`, in the order the step shows them. */
  const faults = (i: number, p = problems): FieldId[] => {
    const s = STEPS[i]!;
    const rows = s.ownsPrefix ? (Object.keys(p) as FieldId[]).filter((f) => f.startsWith(s.ownsPrefix!)) : [];
    return [...s.fields, ...rows].filter((f) => p[f]);
  };
  const blocked = (i: number, p = problems) => faults(i, p).length > 0;
  const headingRef = useRef<HTMLHeadingElement>(null);
  const panelRef = useRef<HTMLFormElement>(null);
  /** Shows a step's problems and puts the focus on the first field that has one. */
  const holdAt = (i: number, p = problems) => {
    setStep(i);
    showFields([...STEPS[i]!.fields, ...faults(i, p)], true);
    requestAnimationFrame(() => panelRef.current?.querySelector<HTMLElement>('[aria-invalid="true"]')?.focus());
  };
  const go = async (i: number) => {
    if (i > step) {
      // Moving on: every step on the way must be clean, the boot files judged by the service.
      const now = draftProblems(draft, host, names, await files.settle());
      for (let j = 0; j < i; j++) {
        if (blocked(j, now)) return holdAt(j, now);
      }
    }
    setStep(i);
    requestAnimationFrame(() => headingRef.current?.focus());
  };
  const firstBlocked = STEPS.findIndex((_, i) => blocked(i));
  const stepProps = {
    problem: (f: FieldId) => (shown.has(f) ? problems[f] : undefined),
    touch: (f: FieldId) => showFields([f], true),
    editing: (f: FieldId) => showFields([f], false),
    anyProblem: firstBlocked >= 0,
    recheck: () => setDescribeNonce((n) => n + 1),
  };
  const create = async () => {
    setCreating(true);
    setCreateError(null);
    try {
      const rec = edit ? await updateVm(edit.id, config) : await createVm(config);
      navigate({ view: 'vm', id: rec.id });
    } catch (e) {
      setCreateError(errorMessage(e));
    } finally {
      setCreating(false);
    }
  };
  const Step = current.Component;
  const last = step === STEPS.length - 1;
  return (
    <section className="view wizard" aria-labelledby="wizard-title">
      <div className="view-head">
        <h1 id="wizard-title" tabIndex={-1}>{edit ? `Edit ${edit.config.name}` : 'New virtual machine'}</h1>
      </div>
      <div className="wizard-body">
        <nav className="steps" aria-label="Wizard steps">
          <ol>
            {STEPS.map((s, i) => (
              <li key={s.id}>
                <button type="button" className="step-btn" aria-current={i === step ? 'step' : undefined}
                  data-step={s.id} onClick={() => void go(i)}>
                  <span className="step-no" aria-hidden="true">{i + 1}</span> {s.title}
                </button>
              </li>
            ))}
          </ol>
        </nav>
        {/* noValidate: the fields are judged by the API's rules, with messages at the field, not by browser bubbles. */}
        <form ref={panelRef} className="step-panel" data-step={current.id} noValidate onFocus={(e) => {
          const field = (e.target as Element).getAttribute('name');
          if (field && field in draft) touched.current.add(field as keyof Draft);
        }} onSubmit={(e) => {
          e.preventDefault();
          if (last) void create();
          else void go(step + 1);
        }}>
          <h2 ref={headingRef} tabIndex={-1}>{current.title}</h2>
          <Step draft={draft} update={update} host={host} names={names} describe={describe} {...stepProps} />
          {last && firstBlocked >= 0 && (
            <p className="error" role="alert">
              Step {firstBlocked + 1} ({STEPS[firstBlocked]!.title}) has a problem: {problems[faults(firstBlocked)[0]!]}
            </p>
          )}
          {last && createError && <p className="error" role="alert">Could not {edit ? 'save the changes' : 'create the VM'}: {createError}</p>}
          <div className="wizard-nav">
            <button type="button" className="btn" onClick={() => (step === 0 ? navigate(edit ? { view: 'vm', id: edit.id } : { view: 'library' }) : void go(step - 1))}>
              {step === 0 ? 'Cancel' : 'Back'}
            </button>
            {last ? (
              <button type="submit" className="btn primary" data-action={edit ? 'save' : 'create'}
                disabled={creating || !!describe.error || describe.pending || firstBlocked >= 0}>
                {edit ? (creating ? 'Saving…' : 'Save changes') : creating ? 'Creating…' : 'Create VM'}
              </button>
            ) : (
              <button type="submit" className="btn primary" data-action="next">Next</button>
            )}
          </div>
        </form>
      </div>
    </section>
  );
}

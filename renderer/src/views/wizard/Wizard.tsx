// The VM creation wizard: one step per group of knobs, a summary with the equivalent
// `unhalt run` command line (describeConfig), then createVm. In edit mode (`edit`: a stopped VM)
// the same steps start from that VM's configuration and the last one saves it (updateVm).
import { useEffect, useMemo, useRef, useState } from 'react';
import type { HostInfo, ResolvedDto, VmRecord } from '../../../../electron/service/api.ts';
import { api, useApp, navigate, createVm, updateVm, errorMessage } from '../../state/app.ts';
import { initialDraft, draftToConfig } from './draft.ts';
import { configToDraft } from './from-config.ts';
import type { Draft } from './draft.ts';
import { BasicsStep, ResourcesStep, MachineStep, FeaturesStep, OvercommitStep, HaltPollStep, PinStep, SummaryStep } from './steps.tsx';

export interface StepProps {
  draft: Draft;
  update: (patch: Partial<Draft>) => void;
  host: HostInfo | null;
  names: Set<string>;
  describe: DescribeResult;
}

export interface DescribeResult {
  resolved: ResolvedDto | null;
  error: string | null;
  pending: boolean;
}

const STEPS: { id: string; title: string; Component: (p: StepProps) => React.ReactElement; check?: (d: Draft, names: Set<string>) => string | null }[] = [
  { id: 'basics', title: 'Basics', Component: BasicsStep, check: basicsProblem },
  { id: 'resources', title: 'CPUs & memory', Component: ResourcesStep },
  { id: 'machine', title: 'Machine type', Component: MachineStep },
  { id: 'features', title: 'Paravirt features', Component: FeaturesStep },
  { id: 'overcommit', title: 'Overcommit', Component: OvercommitStep },
  { id: 'halt-poll', title: 'Halt polling', Component: HaltPollStep },
  { id: 'pinning', title: 'Pinning', Component: PinStep },
  { id: 'summary', title: 'Summary', Component: SummaryStep },
];

function basicsProblem(d: Draft, names: Set<string>): string | null {
  const name = d.name.trim();
  if (!name) return 'Give the VM a name.';
  if (!/^[A-Za-z0-9][A-Za-z0-9 ._-]*$/.test(name)) return 'The name may use letters, digits, space, dot, dash and underscore, and must start with a letter or digit.';
  if (name.length > 64) return 'The name is longer than 64 characters.';
  if (names.has(name)) return `A VM named "${name}" already exists.`;
  if (d.guest === 'custom' && !d.kernel.trim()) return 'Choose the kernel file (a PVH ELF or a bzImage).';
  if (d.guest === 'custom' && !d.kernel.trim().startsWith('/')) return 'Give the kernel as an absolute path on the host.';
  if (d.initrd.trim() && !d.initrd.trim().startsWith('/')) return 'Give the initrd as an absolute path on the host.';
  return null;
}

/** describeConfig on every change (debounced): the command line, notes, warnings or the error. */
function useDescribe(config: unknown): DescribeResult {
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
  }, [json]);
  return state;
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
  const [showProblem, setShowProblem] = useState(false);
  // Host info may arrive after the wizard opened: take its newest machine type then.
  const hostSeen = useRef(!!host || !!edit);
  useEffect(() => {
    if (host && !hostSeen.current) {
      hostSeen.current = true;
      setDraft(initialDraft(host, guest, names));
    }
  }, [host, guest, names]);
  const config = useMemo(() => draftToConfig(draft), [draft]);
  const describe = useDescribe(config);
  const update = (patch: Partial<Draft>) => {
    setShowProblem(false);
    setDraft((d) => ({ ...d, ...patch }));
  };
  const current = STEPS[step]!;
  const problem = current.check?.(draft, names) ?? null;
  const firstBlocked = STEPS.findIndex((s) => s.check?.(draft, names));
  const headingRef = useRef<HTMLHeadingElement>(null);
  const go = (i: number) => {
    if (i > step && firstBlocked >= 0 && firstBlocked < i) {
      setStep(firstBlocked);
      setShowProblem(true);
      return;
    }
    setStep(i);
    setShowProblem(false);
    requestAnimationFrame(() => headingRef.current?.focus());
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
                  data-step={s.id} onClick={() => go(i)}>
                  <span className="step-no" aria-hidden="true">{i + 1}</span> {s.title}
                </button>
              </li>
            ))}
          </ol>
        </nav>
        <form className="step-panel" data-step={current.id} onSubmit={(e) => {
          e.preventDefault();
          if (last) void create();
          else if (problem) setShowProblem(true);
          else go(step + 1);
        }}>
          <h2 ref={headingRef} tabIndex={-1}>{current.title}</h2>
          <Step draft={draft} update={update} host={host} names={names} describe={describe} />
          {showProblem && problem && <p className="error" role="alert">{problem}</p>}
          {last && createError && <p className="error" role="alert">Could not {edit ? 'save the changes' : 'create the VM'}: {createError}</p>}
          <div className="wizard-nav">
            <button type="button" className="btn" onClick={() => (step === 0 ? navigate(edit ? { view: 'vm', id: edit.id } : { view: 'library' }) : go(step - 1))}>
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

// The tuning advisor on the VM page: pick a workload, a goal and a budget (each field checked as
// you leave it, by the rule the service applies, and from then on as you type: a message never
// appears or goes at the moment the pointer presses Start, and each field's message line keeps
// its place whether it says something or not), Start, watch the progress, Cancel; then the
// result (TuneResult: the curve, the table, why, the confidence) and Apply, which stores the
// recommendation in the VM's saved configuration (a stopped VM; a running one is refused, and
// the reason shown). The run is an experiment like the others: it is also in the Compare list.
import { useEffect, useId, useState } from 'react';
import { GOAL_KINDS, GOAL_LABELS, parseBudget, type ExperimentDetail, type GoalKind, type SavedWorkloadDto, type TuneRequest, type VmRecord } from '../../../../electron/service/api.ts';
import { benchGoal } from '../../../../electron/experiments/user-bench.ts';
import { api, errorMessage, navigate, useApp } from '../../state/app.ts';
import { savedWorkloadSummary, workloadChoices, workloadProblem } from '../../lib/workloads.ts';
import { startBlocked, startButtonProps } from '../KvmNotice.tsx';
import { TuneResult } from '../compare/TuneResult.tsx';

export function TunePanel({ vm }: { vm: VmRecord }) {
  const id = useId();
  const host = useApp((s) => s.host);
  const [open, setOpen] = useState(false);
  const guest = vm.config.guest === 'linux' ? 'linux' : 'probe';
  // A VM that boots its own kernel runs the user's saved benchmarks only (no built-in workload).
  const ownKernel = vm.config.guest === 'custom';
  const [saved, setSaved] = useState<SavedWorkloadDto[]>([]);
  useEffect(() => { api.listSavedWorkloads().then(setSaved, () => setSaved([])); }, []);
  const [workload, setWorkload] = useState(ownKernel ? '' : guest === 'linux' ? 'pipe' : 'timer');
  const [goal, setGoal] = useState<GoalKind>('latency-p50');
  const [bound, setBound] = useState('');
  const [budget, setBudget] = useState('5m');
  const [fieldErrors, setFieldErrors] = useState<Partial<Record<'workload' | 'budget' | 'bound', string>>>({});
  const [error, setError] = useState<string | null>(null);
  const [starting, setStarting] = useState(false);
  // The newest tune of this VM, running or finished (from the experiments list the service keeps current).
  const latest = useApp((s) => s.experiments.find((x) => x.kind === 'tune' && x.tune?.vmId === vm.id));
  const [detail, setDetail] = useState<ExperimentDetail | null>(null);
  useEffect(() => {
    if (!latest || latest.state === 'running') { setDetail(null); return; }
    let live = true;
    api.getExperiment(latest.id).then((d) => { if (live) setDetail(d); }, (e) => { if (live) setError(errorMessage(e)); });
    return () => { live = false; };
  }, [latest?.id, latest?.state]);

  const savedOf = (v: string) => saved.find((w) => w.name === v.trim());
  const checkWorkload = (v: string) => (savedOf(v) ? undefined
    : ownKernel ? (saved.length ? `pick one of your saved benchmarks (${saved.map((w) => w.name).join(', ')}): this VM boots its own kernel, where the built-in workloads cannot run`
      : 'this VM boots its own kernel, where the built-in workloads cannot run: save your own benchmark first (Compare, "My own command", Save as workload)')
      : workloadProblem(guest, v));
  const checkBudget = (v: string) => { try { parseBudget(v); return undefined; } catch (e) { return (e as Error).message; } };
  const checkBound = (v: string) => (goal !== 'host-cpu' ? undefined : /^[0-9]{1,12}(\.[0-9]{1,6})?$/.test(v.trim()) && Number(v) > 0 ? undefined
    : 'the latency bound must be a number above 0, in the workload\'s unit');
  // Fields left once: checked on every change from then on (so a fixed value loses its message
  // while it is typed, not on the blur that a click on Start causes).
  const [left, setLeft] = useState<Partial<Record<'workload' | 'budget' | 'bound', true>>>({});
  const leave = (field: 'workload' | 'budget' | 'bound', problem: string | undefined) => {
    setLeft((l) => (l[field] ? l : { ...l, [field]: true }));
    setFieldErrors((e) => (e[field] === problem ? e : { ...e, [field]: problem }));
  };
  const typed = (field: 'workload' | 'budget' | 'bound', problem: string | undefined) => {
    if (left[field] || fieldErrors[field]) setFieldErrors((e) => (e[field] === problem ? e : { ...e, [field]: problem }));
  };

  const start = async (ev: React.FormEvent) => {
    ev.preventDefault();
    if (startBlocked(host)) return; // the button says why (a press of Enter in a field submits too)
    const problems = { workload: checkWorkload(workload), budget: checkBudget(budget), bound: checkBound(bound) };
    setFieldErrors(problems);
    setLeft({ workload: true, budget: true, bound: true });
    if (problems.workload || problems.budget || problems.bound) return;
    const request: TuneRequest = { workload: workload.trim(), goal, budgetS: parseBudget(budget) };
    if (goal === 'host-cpu') request.latencyBound = Number(bound);
    setStarting(true);
    setError(null);
    try {
      await api.startTune(vm.id, request);
    } catch (e) {
      setError(errorMessage(e));
    } finally {
      setStarting(false);
    }
  };

  if (!open) {
    return (
      <section className="panel tune-panel" aria-label="Advisor">
        <div className="panel-head">
          <h2>Advisor</h2>
          <span className="muted small">the knob settings that serve a goal best, measured here</span>
          <div className="panel-actions">
            <button type="button" className="btn" aria-expanded={false} onClick={() => setOpen(true)}>Tune…</button>
          </div>
        </div>
      </section>
    );
  }
  const running = latest?.state === 'running' ? latest : undefined;
  // A line of its own under each field, there whether it holds a message or not: nothing below moves when one comes or goes.
  const fieldError = (field: 'workload' | 'budget' | 'bound') => fieldErrors[field]
    ? <p className="error field-msg" role="alert" id={`${id}-${field}-err`}>{fieldErrors[field]}</p>
    : <p className="field-msg" aria-hidden="true">{'\u00a0'}</p>;
  return (
    <section className="panel tune-panel" aria-labelledby={`${id}-title`}>
      <div className="panel-head">
        <h2 id={`${id}-title`}>Advisor</h2>
        <div className="panel-actions">
          <button type="button" className="btn small" aria-expanded onClick={() => setOpen(false)}>Close</button>
        </div>
      </div>
      <form className="tune-form" onSubmit={(e) => void start(e)} noValidate>
        <div className="field">
          <label htmlFor={`${id}-wl`}>Workload</label>
          <input id={`${id}-wl`} list={`${id}-wls`} value={workload} autoComplete="off" spellCheck={false}
            aria-invalid={!!fieldErrors.workload} aria-describedby={fieldErrors.workload ? `${id}-workload-err` : undefined}
            onChange={(e) => {
              setWorkload(e.target.value);
              typed('workload', checkWorkload(e.target.value));
              // The user's benchmark says its own direction: the goal follows it.
              const s = savedOf(e.target.value);
              if (s) setGoal(benchGoal(s.bench));
            }} onBlur={() => leave('workload', checkWorkload(workload))} />
          <datalist id={`${id}-wls`}>
            {(ownKernel ? [] : workloadChoices(guest)).map((w) => <option key={w.name} value={w.name}>{w.summary}</option>)}
            {saved.map((w) => <option key={`saved-${w.name}`} value={w.name}>{savedWorkloadSummary(w.bench)}</option>)}
          </datalist>
          {fieldError('workload')}
        </div>
        <div className="field">
          <label htmlFor={`${id}-goal`}>Goal</label>
          <select id={`${id}-goal`} value={goal} onChange={(e) => setGoal(e.target.value as GoalKind)}>
            {GOAL_KINDS.map((g) => <option key={g} value={g}>{GOAL_LABELS[g]}</option>)}
          </select>
        </div>
        {goal === 'host-cpu' && (
          <div className="field">
            <label htmlFor={`${id}-bound`}>Latency bound</label>
            <input id={`${id}-bound`} value={bound} inputMode="decimal" autoComplete="off" aria-invalid={!!fieldErrors.bound}
              onChange={(e) => { setBound(e.target.value); typed('bound', checkBound(e.target.value)); }} onBlur={() => leave('bound', checkBound(bound))} />
            <span className="muted small">the workload&apos;s figure every recommendation must meet, in its unit (ns for ipi and timer; at least, for rates)</span>
            {fieldError('bound')}
          </div>
        )}
        <div className="field">
          <label htmlFor={`${id}-budget`}>Budget</label>
          <input id={`${id}-budget`} value={budget} autoComplete="off" spellCheck={false} aria-invalid={!!fieldErrors.budget}
            aria-describedby={fieldErrors.budget ? `${id}-budget-err` : undefined}
            onChange={(e) => { setBudget(e.target.value); typed('budget', checkBudget(e.target.value)); }} onBlur={() => leave('budget', checkBudget(budget))} />
          <span className="muted small">such as 90s, 5m or 1h: the search never starts a round it cannot finish in time</span>
          {fieldError('budget')}
        </div>
        <button type="submit" className="btn primary" {...startButtonProps(host, starting || !!running)}>{starting ? 'Starting…' : 'Start tuning'}</button>
        {error && <p className="error" role="alert">{error}</p>}
      </form>
      {running && (
        <div className="progress-row" data-testid="tune-progress">
          <progress max={running.progress.total || 1} value={running.progress.done} aria-label="Tuning progress" />
          <span className="small">{running.progress.done} of {running.progress.total} s{running.progress.current ? ` — ${running.progress.current}` : ''}</span>
          <button type="button" className="btn small" onClick={() => { api.cancelExperiment(running.id).catch((e) => setError(errorMessage(e))); }}>Cancel tuning</button>
        </div>
      )}
      {!running && latest && latest.state !== 'done' && <p className="muted" data-testid="tune-ended">The last tune {latest.state}{latest.error ? `: ${latest.error}` : ''}.</p>}
      {!running && detail?.advice && (
        <>
          <TuneResult detail={detail} vm={vm} />
          <p className="small"><button type="button" className="link-btn" onClick={() => navigate({ view: 'compare', experimentId: detail.id })}>Open it in the experiments list</button></p>
        </>
      )}
    </section>
  );
}

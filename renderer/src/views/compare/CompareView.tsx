// A/B experiments: pick what to run on (one of our guests, or a VM of the library: each config is
// then that VM with the named knobs changed, its disks throwaway), a workload or the user's own
// benchmark, and two or more configurations; run, and read the result as a before/after table
// with ratios (to the first configuration and to QEMU / bare metal).
import { Fragment, useEffect, useId, useState } from 'react';
import { CONFIG_NAME, FEW_RUNS, MAX_CONTENTION, MAX_RUNS, type ExperimentDetail, type ExperimentSpec, type ExperimentSummary } from '../../../../electron/service/api.ts';
import { KNOB_KEYS, parseConfigString } from '../../../../electron/vmm/config/config-string.ts';
import { FEATURE_NAMES } from '../../../../electron/vmm/machine/features.ts';
import { api, useApp, navigate, errorMessage } from '../../state/app.ts';
import { ago } from '../../lib/format.ts';
import { ResultsView } from './ResultsView.tsx';
import { ConfirmAction } from '../ConfirmAction.tsx';
import { TuneResult } from './TuneResult.tsx';
import { startBlocked, startButtonProps } from '../KvmNotice.tsx';
import { savedWorkloadSummary, workloadChoices } from '../../lib/workloads.ts';
import { hasAgent } from '../../lib/agent.ts';
import type { VmConfig } from '../../../../electron/vmm/config/vm-config.ts';
import { splitCommand } from '../../../../electron/experiments/argv-split.ts';
import { describeBench } from '../../../../electron/experiments/user-bench.ts';
import { EMPTY_OWN_BENCHMARK, OwnBenchmarkFields, ownBenchmarkProblems, type OwnBenchmarkDraft } from './OwnBenchmarkFields.tsx';
import { HostCommandDialog } from './HostCommandDialog.tsx';
import type { SavedWorkloadDto } from '../../../../electron/service/api.ts';

interface ConfigRow {
  name: string;
  config: string;
}

export const PRESETS: { label: string; configs: ConfigRow[]; workload?: { probe: string; linux: string } }[] = [
  {
    label: 'cpu-pm off vs on',
    configs: [{ name: 'cpu-pm off', config: 'cpus=2,cpu-pm=off' }, { name: 'cpu-pm on', config: 'cpus=2,cpu-pm=on' }],
    workload: { probe: 'ipi', linux: 'pipe' },
  },
  {
    label: 'pv-unhalt off vs on',
    configs: [{ name: 'pv-unhalt off', config: 'cpus=2,kvm-pv-unhalt=off' }, { name: 'pv-unhalt on', config: 'cpus=2,kvm-pv-unhalt=on' }],
    workload: { probe: 'spinlock', linux: 'messaging' },
  },
  {
    label: 'halt polling 0 vs default',
    configs: [{ name: 'halt-poll 0', config: 'cpus=1,halt-poll-ns=0' }, { name: 'halt-poll default', config: 'cpus=1' }],
    workload: { probe: 'timer', linux: 'ctx' },
  },
  {
    label: 'halt polling sweep',
    configs: [0, 50_000, 200_000, 1_000_000].map((ns) => ({ name: `halt-poll ${ns / 1000}us`, config: `cpus=1,halt-poll-ns=${ns}` })),
    workload: { probe: 'timer', linux: 'ctx' },
  },
];

/** What the service would say about a configuration string (experiments/spec.ts checks it with the same parser), or undefined. */
function configStringProblem(text: string, base: Partial<VmConfig>): string | undefined {
  try {
    if (base.name !== undefined && /(^|,)\s*(disk|readonly|snapshot)\s*=/.test(text)) throw new Error('disk= is not a bench knob: the runs use the VM\'s own disks, each attached snapshot=on; drop it');
    parseConfigString(text.trim(), { ...base });
    return undefined;
  } catch (e) {
    return errorMessage(e);
  }
}

export function CompareView({ experimentId }: { experimentId?: string }) {
  const experiments = useApp((s) => s.experiments);
  const selected = experimentId ?? experiments[0]?.id;
  return (
    <section className="view compare" aria-labelledby="compare-title">
      <div className="view-head">
        <h1 id="compare-title" tabIndex={-1}>Compare configurations</h1>
      </div>
      <div className="compare-grid">
        <div className="compare-left">
          <ExperimentForm />
          <PastExperiments experiments={experiments} selected={selected} />
        </div>
        <div className="compare-right">
          {selected ? <ExperimentPanel key={selected} id={selected} summary={experiments.find((e) => e.id === selected)} />
            : <div className="panel empty-panel"><p className="muted">Run an experiment to see its results here.</p></div>}
        </div>
      </div>
    </section>
  );
}

function ExperimentForm() {
  const id = useId();
  const host = useApp((s) => s.host);
  const vms = useApp((s) => s.vms);
  const linuxBuilt = !!host?.guests.find((g) => g.kind === 'linux')?.built;
  // What the experiment runs on: one of our guests, or a VM of the library by id.
  const [target, setTarget] = useState<string>('probe');
  const vm = vms.find((v) => `vm:${v.id}` === target);
  const guest: 'probe' | 'linux' | 'custom' = vm ? vm.config.guest : (target as 'probe' | 'linux');
  const [own, setOwn] = useState(false);
  const [draft, setDraft] = useState<OwnBenchmarkDraft>(EMPTY_OWN_BENCHMARK);
  const [showOwnProblems, setShowOwnProblems] = useState(false);
  const [confirming, setConfirming] = useState<{ argv: string[]; go: (hostCmdId: string) => void } | null>(null);
  const [saved, setSaved] = useState<SavedWorkloadDto[]>([]);
  useEffect(() => { api.listSavedWorkloads().then(setSaved, () => setSaved([])); }, []);
  const [workload, setWorkload] = useState('timer');
  const [args, setArgs] = useState('');
  const [configs, setConfigs] = useState<ConfigRow[]>(PRESETS[2]!.configs);
  // The text as typed: a number field that snaps while typing corrupts what the user types.
  const [runsText, setRunsText] = useState(String(FEW_RUNS));
  const [runsError, setRunsError] = useState<string | null>(null);
  const [contentionText, setContentionText] = useState('0');
  const [contentionError, setContentionError] = useState<string | null>(null);
  const [vsQemu, setVsQemu] = useState(true);
  const [bare, setBare] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const [starting, setStarting] = useState(false);
  const setRow = (i: number, patch: Partial<ConfigRow>) => setConfigs((c) => c.map((r, j) => (j === i ? { ...r, ...patch } : r)));
  // Each config string checked as it is typed, by the parser the service checks a spec with.
  const configProblems = configs.map((c) => configStringProblem(c.config, vm ? vm.config : { guest }));
  // A VM booting its own kernel runs no built-in workload: only the user's benchmark (own or saved).
  const ownOnly = guest === 'custom';
  const measuringOwn = own || ownOnly;
  // Under QEMU too: a built-in workload, or a command on this machine (QEMU's runs have no agent channel).
  const qemuOffered = !measuringOwn || draft.where === 'host';
  const runs = /^\s*\d+\s*$/.test(runsText) ? Number(runsText) : NaN;
  const checkRuns = (): boolean => {
    const bad = !(Number.isSafeInteger(runs) && runs >= 1 && runs <= MAX_RUNS);
    setRunsError(bad ? `Runs must be a whole number from 1 to ${MAX_RUNS}.` : null);
    return !bad;
  };
  const contention = /^\s*\d+\s*$/.test(contentionText) ? Number(contentionText) : NaN;
  const checkContention = (): boolean => {
    const bad = !(Number.isSafeInteger(contention) && contention >= 0 && contention <= MAX_CONTENTION);
    setContentionError(bad ? `Busy host processes must be a whole number from 0 to ${MAX_CONTENTION}.` : null);
    return !bad;
  };
  const start = async () => {
    setError(null);
    if (startBlocked(host)) return; // the button says why (a press of Enter in a field submits too)
    if (!checkRuns() || !checkContention()) return;
    if (configs.length < 2) return setError('Add at least two configurations.');
    const bad = configs.find((c) => !CONFIG_NAME.test(c.name.trim()));
    if (bad) return setError(`Configuration name "${bad.name}": use up to 40 letters, digits, spaces and . _ + - (starting with a letter or digit).`);
    if (new Set(configs.map((c) => c.name.trim())).size !== configs.length) return setError('Two configurations have the same name.');
    const badConfig = configProblems.findIndex((p) => p !== undefined);
    if (badConfig >= 0) return setError(`Configuration "${configs[badConfig]!.name.trim()}": ${configProblems[badConfig]}`);
    // The API's form of a spec: a library VM by its id, a host command by its confirmation (experiment-api.ts).
    const spec = {
      workload: workload.trim(), configs: configs.map((c) => ({ name: c.name.trim(), config: c.config.trim() })), runs,
    } as unknown as Omit<ExperimentSpec, 'bench'> & { vm?: string; bench?: Record<string, unknown> };
    if (vm) (spec as { vm?: string }).vm = vm.id;
    else spec.guest = guest as 'probe' | 'linux';
    if (contention > 0) spec.contention = contention;
    if (measuringOwn) {
      const problems = ownBenchmarkProblems(draft);
      const first = Object.values(problems)[0];
      if (first) {
        setShowOwnProblems(true);
        return setError(`Your benchmark: ${first}`);
      }
      const argv = splitCommand(draft.command.trim());
      const bench: Record<string, unknown> = { metric: draft.metric };
      if (draft.ready) bench.ready = draft.ready;
      if (draft.unit) bench.unit = draft.unit;
      if (draft.higherIsBetter) bench.higherIsBetter = true;
      // Labelled by the name it is saved under (as unhalt bench --save-workload does), else host-cmd / guest-cmd.
      if (draft.saveAs) spec.workload = draft.saveAs;
      else delete (spec as { workload?: string }).workload;
      const run = async (hostCmdId?: string) => {
        spec.bench = hostCmdId ? { ...bench, hostCmdId } : { ...bench, guestCmd: argv };
        if (draft.saveAs) {
          try {
            await api.saveWorkload(draft.saveAs, spec.bench as never);
            setSaved(await api.listSavedWorkloads());
          } catch (e) {
            return setError(`Not saved: ${errorMessage(e)}`);
          }
        }
        await startSpec(spec as unknown as ExperimentSpec);
      };
      if (vsQemu && draft.where === 'host') spec.vsQemu = true;
      if (draft.where === 'guest') return run();
      // A command on this machine: shown in full and confirmed with the code first.
      setConfirming({ argv, go: (hostCmdId) => { setConfirming(null); void run(hostCmdId); } });
      return;
    }
    if (args.trim()) spec.workloadArgs = args.trim();
    if (vsQemu) spec.vsQemu = true;
    if (bare) spec.bare = true;
    await startSpec(spec as unknown as ExperimentSpec);
  };
  const startSpec = async (spec: ExperimentSpec) => {
    setStarting(true);
    try {
      const x = await api.startExperiment(spec);
      navigate({ view: 'compare', experimentId: x.id });
    } catch (e) {
      setError(errorMessage(e));
    } finally {
      setStarting(false);
    }
  };
  const builtIn = guest === 'custom' ? [] : workloadChoices(guest);
  const workloads = [...builtIn, ...saved.map((w) => ({ name: w.name, summary: savedWorkloadSummary(w.bench), params: undefined }))];
  const wl = workloads.find((w) => w.name === workload.trim());
  return (
    <>
    <form className="panel experiment-form" aria-labelledby={`${id}-h`} onSubmit={(e) => { e.preventDefault(); void start(); }}>
      <h2 id={`${id}-h`}>New experiment</h2>
      <div className="field-row top">
        <div className="field">
          <label htmlFor={`${id}-guest`}>Run on</label>
          <select id={`${id}-guest`} value={target} onChange={(e) => {
            const t = e.target.value;
            setTarget(t);
            const v = vms.find((x) => `vm:${x.id}` === t);
            const g = v ? v.config.guest : t;
            setWorkload(g === 'custom' ? '' : workloadChoices(g as 'probe' | 'linux')[0]?.name ?? '');
            setArgs('');
            if (v) {
              // On a VM the configs are knob changes: its own vCPU count unless a config says otherwise.
              setConfigs((cs) => cs.map((c) => ({ ...c, config: c.config.replace(/^cpus=\d+,?/, '') })));
              setVsQemu(false);
            }
            if (v && !hasAgent(v.config)) setDraft((d) => ({ ...d, where: 'host' }));
          }}>
            <option value="probe">probe (diagnostic guest)</option>
            <option value="linux" disabled={!linuxBuilt}>Linux{linuxBuilt ? '' : ' (kit not built)'}</option>
            {vms.length > 0 && (
              <optgroup label="Your VMs (each config: the VM with those knobs changed)">
                {vms.map((v) => <option key={v.id} value={`vm:${v.id}`}>{v.config.name}</option>)}
              </optgroup>
            )}
          </select>
        </div>
        {!ownOnly && (
          <div className="field" role="radiogroup" aria-label="What to measure">
            <span className="label">Measure</span>
            <label className="toggle inline">
              <input type="radio" name={`${id}-measure`} checked={!own} onChange={() => setOwn(false)} />
              <span>A workload</span>
            </label>
            <label className="toggle inline">
              <input type="radio" name={`${id}-measure`} checked={own} onChange={() => setOwn(true)} />
              <span>My own command</span>
            </label>
          </div>
        )}
      </div>
      {vm && <p className="hint" data-testid="compare-on-vm">On {vm.config.name}: every run boots it as saved with the configuration&apos;s knobs changed; its writable disks are attached snapshot=on, so the runs never change them.</p>}
      {measuringOwn ? (
        <OwnBenchmarkFields draft={draft} set={(patch) => setDraft((d) => ({ ...d, ...patch }))} guestHasAgent={vm ? hasAgent(vm.config) : guest === 'linux'} showProblems={showOwnProblems} />
      ) : (
        <>
          <div className="field grow">
            <label htmlFor={`${id}-wl`}>Workload</label>
            <input id={`${id}-wl`} list={`${id}-wls`} value={workload} autoComplete="off" spellCheck={false}
              onChange={(e) => { setWorkload(e.target.value); if (workloads.some((w) => w.name === e.target.value)) setArgs(''); }} />
            <datalist id={`${id}-wls`}>{workloads.map((w) => <option key={w.name} value={w.name}>{w.summary}</option>)}</datalist>
          </div>
          <p className="hint">{wl?.summary ?? '\u00a0'}</p>
          <div className="field">
            <label htmlFor={`${id}-args`}>Workload parameters</label>
            <input id={`${id}-args`} value={args} placeholder={wl?.params ?? 'key=value …'} autoComplete="off" spellCheck={false} onChange={(e) => setArgs(e.target.value)} />
          </div>
        </>
      )}
      <fieldset className="field">
        <legend>Configurations</legend>
        <div className="presets" role="group" aria-label="Presets">
          {PRESETS.map((p) => (
            <button key={p.label} type="button" className="btn small" onClick={() => {
              setConfigs(vm ? p.configs.map((c) => ({ ...c, config: c.config.replace(/^cpus=\d+,?/, '') })) : p.configs);
              if (p.workload && guest !== 'custom') {
                setWorkload(p.workload[guest]);
                setArgs('');
              }
            }}>{p.label}</button>
          ))}
        </div>
        <table className="config-table">
          <thead><tr><th scope="col">Name</th><th scope="col">Config string</th><th scope="col"><span className="sr-only">Remove</span></th></tr></thead>
          <tbody>
            {configs.map((c, i) => (
              <Fragment key={i}>
                <tr>
                  <td><input aria-label={`Configuration ${i + 1} name`} value={c.name} onChange={(e) => setRow(i, { name: e.target.value })} /></td>
                  <td><input aria-label={`Configuration ${i + 1} config string`} className="mono" value={c.config} spellCheck={false}
                    aria-invalid={configProblems[i] ? true : undefined} aria-describedby={configProblems[i] ? `${id}-cfg${i}-msg` : undefined}
                    placeholder="cpus=2,cpu-pm=on,halt-poll-ns=0" onChange={(e) => setRow(i, { config: e.target.value })} /></td>
                  <td><button type="button" className="icon-btn" aria-label={`Remove configuration ${i + 1}`} disabled={configs.length <= 1}
                    onClick={() => setConfigs((cs) => cs.filter((_, j) => j !== i))}>×</button></td>
                </tr>
                {configProblems[i] && (
                  <tr className="config-msg-row">
                    <td />
                    <td colSpan={2}><p id={`${id}-cfg${i}-msg`} className="error field-msg" data-testid="config-problem">{configProblems[i]}</p></td>
                  </tr>
                )}
              </Fragment>
            ))}
          </tbody>
        </table>
        <button type="button" className="btn small" onClick={() => setConfigs((c) => [...c, { name: `config ${c.length + 1}`, config: c.at(-1)?.config ?? '' }])}>
          Add configuration
        </button>
        <p className="hint" data-testid="config-keys">Keys: <span className="mono" data-testid="knob-keys">{KNOB_KEYS.join(', ')}</span>; paravirt features, on or off (kvm-pv-unhalt=on): <span className="mono" data-testid="feature-keys">{FEATURE_NAMES.join(', ')}</span>. Lists join with + (pin=0+1).</p>
      </fieldset>
      <div className="field-row">
        <div className="field">
          <label htmlFor={`${id}-runs`}>Runs each</label>
          <input id={`${id}-runs`} className="num" inputMode="numeric" value={runsText} autoComplete="off"
            aria-invalid={runsError ? true : undefined} aria-describedby={`${id}-runs-msg`}
            onChange={(e) => { setRunsText(e.target.value); if (runsError) setRunsError(null); }} onBlur={checkRuns} />
          <p id={`${id}-runs-msg`} className={runsError ? 'error field-msg' : 'hint field-msg'} role={runsError ? 'alert' : undefined}>
            {runsError ?? (Number.isSafeInteger(runs) && runs >= 1 && runs < FEW_RUNS
              ? `Fewer than ${FEW_RUNS} runs rarely show a difference as significant.` : '\u00a0')}
          </p>
        </div>
        <div className="field">
          <label htmlFor={`${id}-contention`}>Busy host processes</label>
          <input id={`${id}-contention`} className="num" inputMode="numeric" value={contentionText} autoComplete="off"
            aria-invalid={contentionError ? true : undefined} aria-describedby={`${id}-contention-msg`}
            onChange={(e) => { setContentionText(e.target.value); if (contentionError) setContentionError(null); }} onBlur={checkContention} />
          <p id={`${id}-contention-msg`} className={contentionError ? 'error field-msg' : 'hint field-msg'} role={contentionError ? 'alert' : undefined}>
            {contentionError ?? (contention > 0 ? 'CPU-bound, on the vCPUs\' host CPUs, during every run: vCPUs get preempted.' : 'Host contention: 0 = none.')}
          </p>
        </div>
        {qemuOffered && (
          <label className="toggle inline">
            <input type="checkbox" checked={vsQemu} onChange={(e) => setVsQemu(e.target.checked)} />
            <span>Also under QEMU</span>
          </label>
        )}
        {!measuringOwn && (
          <label className="toggle inline">
            <input type="checkbox" checked={bare} onChange={(e) => setBare(e.target.checked)} />
            <span>Bare-host reference</span>
          </label>
        )}
      </div>
      {qemuOffered && vsQemu && configs.some((c) => /(^|,)\s*(halt-poll-ns|pin)\s*=/.test(c.config)) && (
        <p className="hint qemu-hint" role="note">QEMU has no per-VM halt polling and does not pin vCPUs: its rows run those configs at the host&apos;s
          halt polling, unpinned, and are marked so.</p>
      )}
      {error && <p className="error" role="alert">{error}</p>}
      <button type="submit" className="btn primary" {...startButtonProps(host, starting)}>{starting ? 'Starting…' : 'Run experiment'}</button>
    </form>
    {/* Outside the form: a form of its own, whose submit must not submit this one. */}
    {confirming && <HostCommandDialog argv={confirming.argv} onConfirmed={confirming.go} onCancel={() => setConfirming(null)} />}
    </>
  );
}

function PastExperiments({ experiments, selected }: { experiments: ExperimentSummary[]; selected?: string }) {
  return (
    <section className="panel" aria-labelledby="past-h">
      <h2 id="past-h">Experiments</h2>
      {experiments.length === 0 ? <p className="muted">None yet.</p> : (
        <ul className="exp-list">
          {experiments.map((x) => (
            <li key={x.id}>
              <button type="button" className="exp-item" aria-current={x.id === selected ? 'true' : undefined}
                onClick={() => navigate({ view: 'compare', experimentId: x.id })}>
                <span className="exp-name">{x.kind === 'tune' ? 'tune · ' : ''}{x.spec.vm?.name ?? x.spec.guest} · {x.spec.workload}</span>
                <span className="exp-configs">{x.kind === 'tune' ? `advisor for ${x.tune?.vmName ?? 'a configuration'}` : x.spec.configs.map((c) => c.name).join(' vs ')}</span>
                <span className={`badge exp-${x.state}`}>{x.state === 'running' ? `${x.progress.done}/${x.progress.total}` : x.state}</span>
                <span className="muted small">{ago(x.createdAt)}</span>
              </button>
              {x.state !== 'running' && <DeleteExperiment summary={x} />}
            </li>
          ))}
        </ul>
      )}
    </section>
  );
}

/** Delete, after a confirmation (ConfirmAction's dialog), as the record goes from disk too. */
function DeleteExperiment({ summary }: { summary: ExperimentSummary }) {
  const [error, setError] = useState<string | null>(null);
  const label = `${summary.spec.workload}: ${summary.spec.configs.map((c) => c.name).join(' vs ')}`;
  return (
    <span className="exp-delete">
      <ConfirmAction label="Delete" small action="delete-experiment" ariaLabel={`Delete experiment ${label}`} danger
        confirmLabel="Delete for good" cancelLabel="Keep" question={`Delete the experiment ${label}? Its record leaves the disk for good.`}
        onConfirm={() => { api.deleteExperiment(summary.id).then(() => navigate({ view: 'compare' }), (e) => setError(errorMessage(e))); }} />
      {error && <span className="error small" role="alert">{error}</span>}
    </span>
  );
}

function ExperimentPanel({ id, summary }: { id: string; summary?: ExperimentSummary }) {
  const [detail, setDetail] = useState<ExperimentDetail | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [cancelling, setCancelling] = useState(false);
  const state = summary?.state;
  const done = summary?.progress.done;
  useEffect(() => {
    let live = true;
    api.getExperiment(id).then((d) => { if (live) { setDetail(d); setError(null); } }, (e) => { if (live) setError(errorMessage(e)); });
    return () => { live = false; };
  }, [id, state, done]);
  const x = summary ?? detail;
  if (!x) return <div className="panel">{error ? <p className="error">{error}</p> : <p className="muted">Loading…</p>}</div>;
  const frac = x.progress.total ? x.progress.done / x.progress.total : 0;
  return (
    <section className="panel experiment" aria-labelledby="exp-h" data-experiment-id={x.id} data-state={x.state}>
      <h2 id="exp-h">{x.spec.vm?.name ?? x.spec.guest} · {x.spec.workload}{x.spec.workloadArgs ? ` ${x.spec.workloadArgs}` : ''}</h2>
      <p className="muted small">
        {new Date(x.createdAt).toLocaleString()} · {x.spec.runs} run{x.spec.runs === 1 ? '' : 's'} per configuration
        {x.spec.vsQemu ? ' · with QEMU' : ''}{x.spec.bare ? ' · with a bare-host reference' : ''}{x.spec.contention ? ` · ${x.spec.contention} busy host process${x.spec.contention === 1 ? '' : 'es'}` : ''}
      </p>
      {x.spec.bench && <p className="muted small mono" data-testid="experiment-bench">benchmark: {describeBench(x.spec.bench)}</p>}
      <div className="progress-row">
        <progress max={1} value={x.state === 'done' ? 1 : frac} aria-label="Experiment progress" />
        <span className="small">
          {x.state === 'running' ? `${x.progress.done} of ${x.progress.total}${x.kind === 'tune' ? ' s' : ''}${x.progress.current ? ` — ${x.progress.current}` : ''}`
            : x.state === 'done' ? 'done' : `${x.state}${x.error ? `: ${x.error}` : ''}`}
        </span>
        {x.state === 'running' && (
          <button type="button" className="btn small" disabled={cancelling} onClick={() => {
            setCancelling(true);
            api.cancelExperiment(x.id).catch((e) => setError(errorMessage(e))).finally(() => setCancelling(false));
          }}>{cancelling ? 'Cancelling…' : 'Cancel experiment'}</button>
        )}
      </div>
      {detail?.advice && <TuneResult detail={detail} />}
      {detail && detail.rows.length > 0 ? <ResultsView detail={detail} />
        : x.state === 'running' ? <p className="muted">Results appear here when the runs finish.</p>
          : x.state === 'done' ? <p className="error">The experiment finished without results: no run reported its measurement.</p> : null}
      {error && <p className="error">{error}</p>}
    </section>
  );
}

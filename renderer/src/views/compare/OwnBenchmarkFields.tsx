// The user's own benchmark in the compare view: a command (run on the host while the VM is up —
// a load generator against a forwarded port — or in the guest through its agent), the console
// line that says the guest's service is up, the regular expression that reads the figure, its
// direction and unit, and a name to save it under for the advisor. Each field is checked as it is
// typed by the checks the service uses (user-bench.ts, argv-split.ts).
import { useId } from 'react';
import { splitCommand } from '../../../../electron/experiments/argv-split.ts';
import { SAVE_NAME, SAVE_NAME_RULE, checkArgv, checkUnit, metricRegex } from '../../../../electron/experiments/user-bench.ts';
import { errorMessage } from '../../state/app.ts';

export interface OwnBenchmarkDraft {
  command: string;
  where: 'host' | 'guest';
  metric: string;
  ready: string;
  unit: string;
  higherIsBetter: boolean;
  saveAs: string;
}

export const EMPTY_OWN_BENCHMARK: OwnBenchmarkDraft = { command: '', where: 'host', metric: '', ready: '', unit: '', higherIsBetter: false, saveAs: '' };

/** The problems of a draft, field by field, in the service's words. */
export function ownBenchmarkProblems(d: OwnBenchmarkDraft): Partial<Record<'command' | 'metric' | 'ready' | 'unit' | 'saveAs', string>> {
  const p: Partial<Record<'command' | 'metric' | 'ready' | 'unit' | 'saveAs', string>> = {};
  const check = (field: keyof typeof p, f: () => unknown) => {
    try {
      f();
    } catch (e) {
      p[field] = errorMessage(e);
    }
  };
  check('command', () => checkArgv(splitCommand(d.command.trim()), d.where));
  check('metric', () => metricRegex(d.metric));
  if (d.ready !== '') check('ready', () => new RegExp(d.ready));
  if (d.unit !== '') check('unit', () => checkUnit(d.unit));
  if (d.saveAs !== '' && !SAVE_NAME.test(d.saveAs)) p.saveAs = `For the name, ${SAVE_NAME_RULE}.`;
  return p;
}

export function OwnBenchmarkFields({ draft, set, guestHasAgent, showProblems }: {
  draft: OwnBenchmarkDraft;
  set: (patch: Partial<OwnBenchmarkDraft>) => void;
  /** The VM has our agent (the Linux guest, an imported VM with the tools disk): a guest command can run. */
  guestHasAgent: boolean;
  /** Show every field's problem (after a start was refused), not only those of fields typed in. */
  showProblems: boolean;
}) {
  const id = useId();
  const problems = ownBenchmarkProblems(draft);
  const shown = (field: keyof typeof problems, typed: boolean) => (showProblems || typed ? problems[field] : undefined);
  const field = (name: keyof typeof problems, label: string, input: React.ReactNode, hint: string, typed: boolean) => {
    const problem = shown(name, typed);
    return (
      <div className="field">
        <label htmlFor={`${id}-${name}`}>{label}</label>
        {input}
        <p id={`${id}-${name}-msg`} className={problem ? 'error field-msg' : 'hint field-msg'} data-testid={problem ? `own-${name}-problem` : undefined}>{problem ?? hint}</p>
      </div>
    );
  };
  const attrs = (name: keyof typeof problems, typed: boolean) => ({
    id: `${id}-${name}`, autoComplete: 'off', spellCheck: false,
    'aria-invalid': shown(name, typed) ? true : undefined, 'aria-describedby': `${id}-${name}-msg`,
  });
  return (
    <fieldset className="field own-benchmark" data-testid="own-benchmark">
      <legend>Your benchmark</legend>
      <div className="field-row" role="radiogroup" aria-label="Where the command runs">
        <label className="toggle inline">
          <input type="radio" name={`${id}-where`} checked={draft.where === 'host'} onChange={() => set({ where: 'host' })} />
          <span>On this machine (against a forwarded port)</span>
        </label>
        <label className="toggle inline">
          <input type="radio" name={`${id}-where`} checked={draft.where === 'guest'} disabled={!guestHasAgent} onChange={() => set({ where: 'guest' })} />
          <span>In the guest, through its agent{guestHasAgent ? '' : ' (this VM has no agent)'}</span>
        </label>
      </div>
      {field('command', 'Command', <input className="mono" {...attrs('command', draft.command !== '')} value={draft.command}
        placeholder={draft.where === 'host' ? "wrk -d 10s http://127.0.0.1:8080/" : 'perf bench sched pipe -l 100000'} onChange={(e) => set({ command: e.target.value })} />,
      "Run as typed, without a shell: quotes group words; no $VAR, globs or pipes (use sh -c '…' for those). A command on this machine is confirmed before its first run.", draft.command !== '')}
      {field('metric', 'Metric', <input className="mono" {...attrs('metric', draft.metric !== '')} value={draft.metric} placeholder="Latency: ([0-9.]+)"
        onChange={(e) => set({ metric: e.target.value })} />, 'A regular expression with one capture group: the figure, from the command\'s output (its last match).', draft.metric !== '')}
      {field('ready', 'Ready when the console prints', <input className="mono" {...attrs('ready', draft.ready !== '')} value={draft.ready} placeholder="login: "
        onChange={(e) => set({ ready: e.target.value })} />, draft.where === 'guest' ? 'Optional: the guest\'s agent must be ready in any case.' : 'Optional: without it the command starts as soon as the VM runs.', draft.ready !== '')}
      <div className="field-row">
        {field('unit', 'Unit', <input {...attrs('unit', draft.unit !== '')} value={draft.unit} placeholder="ms" onChange={(e) => set({ unit: e.target.value })} />, '\u00a0', draft.unit !== '')}
        <label className="toggle inline">
          <input type="checkbox" checked={draft.higherIsBetter} onChange={(e) => set({ higherIsBetter: e.target.checked })} />
          <span>Higher is better</span>
        </label>
      </div>
      {field('saveAs', 'Save as workload', <input className="mono" {...attrs('saveAs', draft.saveAs !== '')} value={draft.saveAs} placeholder="my-nginx"
        onChange={(e) => set({ saveAs: e.target.value })} />, 'Optional: a name the advisor and later experiments can use.', draft.saveAs !== '')}
    </fieldset>
  );
}

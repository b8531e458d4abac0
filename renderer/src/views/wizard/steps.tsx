// The wizard's steps. Options the host cannot run are disabled with the reason the host
// capability check gives (HostInfo.options).
import { useId } from 'react';
import { cpuPmTurnedOffNote, effectiveFeatures, vcpuLimit } from '../../../../electron/vmm/config/rules.ts';
import { DEFAULT_MEMORY_MIB, checkCpus, checkGuestHaltPollNs, checkHaltPollNs, checkMemoryMiB, diskModeNote } from '../../../../electron/vmm/config/vm-config.ts';
import type { StepProps } from './step-props.ts';
import { PROBE_SCENARIOS } from './draft.ts';
import { typedNumber, typedPin } from './typed-text.ts';
import { hostLimits, type FieldId } from './validate.ts';
import { available, machineDefaults, fmtNs } from '../../lib/config.ts';
import { StorageFields } from './StorageFields.tsx';
import { NetworkFields } from './NetworkFields.tsx';
import { netSummary } from './net-draft.ts';
import { formatDeviceOption } from '../../../../electron/vmm/config/device-config.ts';

function capitalize(s: string): string {
  return s ? s[0]!.toUpperCase() + s.slice(1).replace(/\.$/, '') : s;
}

function Hint({ children, id }: { children: React.ReactNode; id?: string }) {
  return <p className="hint" id={id}>{children}</p>;
}

function Unavailable({ reason }: { reason?: string }) {
  return <span className="unavailable">Not available on this host{reason ? `: ${reason.replace(/\.$/, '')}` : ''}.</span>;
}

/** The service's verdict on the configuration so far, in a reserved line (no layout jump); quiet while a field says what is wrong. */
function CheckLine({ describe, anyProblem }: Pick<StepProps, 'describe' | 'anyProblem'>) {
  const error = anyProblem ? null : describe.error;
  return (
    <p className={`check-line ${error ? 'bad' : ''}`} aria-live="polite">
      {error ? `⚠ ${error}` : describe.resolved?.warnings.length ? `⚠ ${describe.resolved.warnings[0]}` : '\u00a0'}
    </p>
  );
}

/** The equivalent `unhalt run` command line as the service describes the draft, with a Copy button. */
function CommandLine({ text, testId, stale = false }: { text: string; testId: string; stale?: boolean }) {
  return (
    <>
      {/* stale: the draft changed and the service has not answered yet; the old line is dimmed, not passed off as current. */}
      <pre className={`cmdline${stale ? ' stale' : ''}`} data-testid={testId} aria-busy={stale || undefined}><code>{text}</code></pre>
      <button type="button" className="btn small" onClick={() => void navigator.clipboard?.writeText(text)}>Copy</button>
    </>
  );
}

/** A step's live view of the command line so far (the summary shows it again, with what the guest gets). */
function CommandLinePreview({ describe, anyProblem }: Pick<StepProps, 'describe' | 'anyProblem'>) {
  const r = describe.resolved;
  return (
    <section className="cmdline-preview" aria-label="Equivalent command line">
      <h3>Equivalent command line</h3>
      {r && !anyProblem
        ? <CommandLine text={r.commandLine} testId="step-cmdline" stale={describe.pending} />
        : <p className="muted small">{anyProblem || describe.error ? 'Shown once the configuration is right.' : 'Checking…'}</p>}
    </section>
  );
}

/** A field's problem, right under it (the input names it in aria-describedby). */
function FieldError({ id, text }: { id: string; text: string | undefined }) {
  return text ? <p className="field-error" id={id} role="alert">{text}</p> : null;
}

/** The props that make a text input judged on blur, quiet while typed in, and described by its error. */
function judged(p: Pick<StepProps, 'problem' | 'touch' | 'editing'>, field: FieldId, errorId: string, hintId?: string) {
  const text = p.problem(field);
  return {
    'aria-invalid': text ? true : undefined,
    'aria-describedby': [text ? errorId : undefined, hintId].filter(Boolean).join(' ') || undefined,
    'data-field': field,
    onBlur: () => p.touch(field),
  };
}

// ---- 1. basics ----
export function BasicsStep(props: StepProps) {
  const { draft, update, host, describe, problem, editing } = props;
  const id = useId();
  const guests = host?.guests ?? [
    { kind: 'probe' as const, built: true, label: 'Probe (diagnostic guest)' },
    { kind: 'linux' as const, built: false, label: 'Linux' },
  ];
  const scenario = PROBE_SCENARIOS.find((s) => s.name === draft.probeScenario);
  return (
    <>
      <div className="field">
        <label htmlFor={`${id}-name`}>Name</label>
        <input id={`${id}-name`} name="name" value={draft.name} autoComplete="off"
          {...judged(props, 'name', `${id}-name-error`, `${id}-name-hint`)}
          onChange={(e) => { editing('name'); update({ name: e.target.value }); }} />
        <FieldError id={`${id}-name-error`} text={problem('name')} />
        <Hint id={`${id}-name-hint`}>Letters, digits, space, dot, dash, underscore.</Hint>
      </div>
      <fieldset className="field">
        <legend>Guest</legend>
        <div className="choice-list">
          {guests.map((g) => {
            const opt = available(host, `guest:${g.kind}`);
            const disabled = !opt.ok || !g.built;
            const help = g.kind === 'probe'
              ? 'Our small test guest: boots in milliseconds and runs scenarios that exercise halts, timers, IPIs and paravirt features.'
              : 'Debian\'s cloud kernel with a busybox shell and the latency agent.';
            return (
              <label key={g.kind} className={`choice ${disabled ? 'disabled' : ''}`}>
                <input type="radio" name="guest" value={g.kind} checked={draft.guest === g.kind} disabled={disabled}
                  onChange={() => update({ guest: g.kind, memoryMiB: g.kind === 'linux' ? String(Math.max(typedNumber(draft.memoryMiB, checkMemoryMiB) ?? 0, DEFAULT_MEMORY_MIB.linux)) : draft.memoryMiB })} />
                <span>
                  <strong>{g.label}</strong>
                  <span className="choice-help">{help}</span>
                  {disabled && <Unavailable reason={opt.reason ?? (g.built ? undefined : g.note ?? 'its guest kit is not built (npm run build:guests)')} />}
                  {!disabled && opt.reason && <span className="warn-text">{capitalize(opt.reason)}.</span>}
                </span>
              </label>
            );
          })}
          <label className="choice">
            <input type="radio" name="guest" value="custom" checked={draft.guest === 'custom'} onChange={() => update({ guest: 'custom' })} />
            <span>
              <strong>Own kernel</strong>
              <span className="choice-help">A PVH ELF (vmlinux), a bzImage or a multiboot kernel (kvm-unit-tests), with an optional initrd.</span>
            </span>
          </label>
        </div>
      </fieldset>
      {draft.guest === 'probe' && (
        <div className="field-row top">
          <div className="field fixed">
            <label htmlFor={`${id}-scenario`}>Scenario</label>
            <select id={`${id}-scenario`} value={draft.probeScenario}
              onChange={(e) => update({ probeScenario: e.target.value, probeArgs: PROBE_SCENARIOS.find((s) => s.name === e.target.value)?.args ?? '' })}>
              {PROBE_SCENARIOS.map((s) => <option key={s.name} value={s.name}>{s.name}</option>)}
            </select>
            <Hint>{scenario?.summary}</Hint>
          </div>
          <div className="field grow">
            <label htmlFor={`${id}-args`}>Parameters</label>
            <input id={`${id}-args`} value={draft.probeArgs} placeholder="key=value …" autoComplete="off" spellCheck={false}
              onChange={(e) => update({ probeArgs: e.target.value })} />
            <Hint>Appended to the guest command line after scenario={draft.probeScenario}.</Hint>
          </div>
        </div>
      )}
      {draft.guest !== 'probe' && (
        <>
          {draft.guest === 'custom' && (
            <div className="field">
              <label htmlFor={`${id}-kernel`}>Kernel</label>
              <input id={`${id}-kernel`} value={draft.kernel} placeholder="/path/to/vmlinux or bzImage" autoComplete="off" spellCheck={false}
                {...judged(props, 'kernel', `${id}-kernel-error`, `${id}-kernel-hint`)}
                onChange={(e) => { editing('kernel'); update({ kernel: e.target.value }); }} />
              <FieldError id={`${id}-kernel-error`} text={problem('kernel')} />
              <Hint id={`${id}-kernel-hint`}>The full path of a file on the host running Unhalt, inside a folder it may use; checked when you leave the field.</Hint>
            </div>
          )}
          <div className="field">
            <label htmlFor={`${id}-initrd`}>Initrd (optional)</label>
            <input id={`${id}-initrd`} value={draft.initrd} placeholder="/path/to/initrd" autoComplete="off" spellCheck={false}
              {...judged(props, 'initrd', `${id}-initrd-error`)}
              onChange={(e) => { editing('initrd'); update({ initrd: e.target.value }); }} />
            <FieldError id={`${id}-initrd-error`} text={problem('initrd')} />
          </div>
          <div className="field">
            <label htmlFor={`${id}-append`}>Kernel command line</label>
            <input id={`${id}-append`} value={draft.append} placeholder="console=ttyS0 …" autoComplete="off" spellCheck={false}
              onChange={(e) => update({ append: e.target.value })} />
          </div>
          {host?.kind === 'pvm' && (
            <label className="toggle">
              <input type="checkbox" checked={draft.pvmProfile} onChange={(e) => update({ pvmProfile: e.target.checked })} />
              <span>
                <strong>PVM profile</strong>
                <span className="choice-help">Add the kernel parameters that keep a stock Linux off instructions this host's emulator lacks.</span>
              </span>
            </label>
          )}
        </>
      )}
      <CheckLine describe={describe} anyProblem={props.anyProblem} />
    </>
  );
}

// ---- 2. CPUs and memory ----
export function ResourcesStep(props: StepProps) {
  const { draft, update, host, describe, problem, editing, anyProblem } = props;
  const id = useId();
  const hostCpus = host?.hostCpus.length ?? 1;
  // The same limit the field's check applies (validate.ts: the schema, then the host's KVM when known).
  const limit = vcpuLimit(hostLimits(host)?.maxVcpus);
  const maxCpus = limit.max;
  const maxMem = Math.max(16, host?.memoryMiB ?? 4096);
  // The sliders follow the text while it is a valid number and stay put while it is not.
  const cpus = typedNumber(draft.cpus, checkCpus);
  const mem = typedNumber(draft.memoryMiB, checkMemoryMiB);
  return (
    <>
      <div className="field">
        <label htmlFor={`${id}-cpus`}>vCPUs</label>
        <div className="range-row">
          <input type="range" min={1} max={Math.min(maxCpus, Math.max(16, hostCpus * 4))} value={cpus ?? 1} aria-label="vCPUs (slider)"
            onChange={(e) => { update({ cpus: e.target.value }); props.touch('cpus'); }} />
          <input id={`${id}-cpus`} type="text" inputMode="numeric" value={draft.cpus} className="num" autoComplete="off"
            {...judged(props, 'cpus', `${id}-cpus-error`, `${id}-cpus-hint`)}
            onChange={(e) => { editing('cpus'); update({ cpus: e.target.value }); }} />
        </div>
        <FieldError id={`${id}-cpus-error`} text={problem('cpus')} />
        <Hint id={`${id}-cpus-hint`}>
          This host has {hostCpus} CPU{hostCpus === 1 ? '' : 's'}{host ? `; ${limit.why}` : ''}.
          {cpus !== undefined && cpus > hostCpus && ` More vCPUs than host CPUs: the vCPUs are overcommitted — the case where PV spinlocks (pv-unhalt) and halt polling matter most.`}
        </Hint>
      </div>
      <div className="field">
        <label htmlFor={`${id}-mem`}>Memory (MiB)</label>
        <div className="range-row">
          <input type="range" min={16} max={Math.min(maxMem, 16384)} step={16} value={mem ?? 16} aria-label="Memory (slider)"
            onChange={(e) => { update({ memoryMiB: e.target.value }); props.touch('memoryMiB'); }} />
          <input id={`${id}-mem`} type="text" inputMode="numeric" value={draft.memoryMiB} className="num" autoComplete="off"
            {...judged(props, 'memoryMiB', `${id}-mem-error`, `${id}-mem-hint`)}
            onChange={(e) => { editing('memoryMiB'); update({ memoryMiB: e.target.value }); }} />
        </div>
        <FieldError id={`${id}-mem-error`} text={problem('memoryMiB')} />
        <Hint id={`${id}-mem-hint`}>
          Host memory: {maxMem >= 2048 ? `${(maxMem / 1024).toFixed(1)} GiB` : `${maxMem} MiB`}. Defaults: the probe guest {DEFAULT_MEMORY_MIB.probe} MiB, Linux {DEFAULT_MEMORY_MIB.linux} MiB.
          {mem !== undefined && mem > maxMem / 2 && ' More than half of the host\'s memory.'}
        </Hint>
      </div>
      <CheckLine describe={describe} anyProblem={anyProblem} />
    </>
  );
}

// ---- 3. storage & network ----
/**
 * The VM's devices: virtio-rng, its disks (StorageFields) and its network card (NetworkFields),
 * with the equivalent command line under them, so what was picked is seen as `--disk` / `--net`.
 */
export function StorageNetworkStep(props: StepProps) {
  const { draft, update, describe, anyProblem } = props;
  return (
    <>
      <fieldset className="field">
        <legend>Devices</legend>
        <label className="toggle">
          <input type="checkbox" role="switch" checked={draft.rng} onChange={(e) => update({ rng: e.target.checked })} />
          <span>
            <strong>virtio-rng</strong>
            <span className="choice-help">
              A random-number device on the guest's PCI bus (virtio-pci, MSI-X), fed from the host's getrandom: Linux's
              virtio_rng driver, or the probe's virtio-rng scenario, reads it.
            </span>
          </span>
        </label>
      </fieldset>
      <StorageFields {...props} />
      <NetworkFields {...props} />
      <CommandLinePreview describe={describe} anyProblem={anyProblem} />
      <CheckLine describe={describe} anyProblem={anyProblem} />
    </>
  );
}

// ---- 4. machine type ----
export function MachineStep({ draft, update, host, describe, anyProblem }: StepProps) {
  const types = host?.machineTypes ?? [];
  return (
    <>
      <Hint>
        A machine type fixes the guest ABI (the paravirt CPUID it sees). A saved VM keeps its version, so updates never change it
        under the guest; a newer version may change defaults.
      </Hint>
      <fieldset className="field">
        <legend className="sr-only">Machine type</legend>
        <div className="choice-list">
          {[...types].reverse().map((m) => {
            const opt = available(host, `machine:${m.name}`);
            return (
              <label key={m.name} className={`choice ${opt.ok ? '' : 'disabled'}`}>
                <input type="radio" name="machine" value={m.name} checked={draft.machine === m.name} disabled={!opt.ok}
                  onChange={() => update({ machine: m.name })} />
                <span>
                  <span className="choice-title"><strong>{m.name}</strong>{m.newest && <span className="tag">newest</span>}</span>
                  <span className="choice-help">{m.summary}</span>
                  <span className="choice-help">Changes: {m.changes}</span>
                  {!opt.ok && <Unavailable reason={opt.reason} />}
                  {opt.ok && opt.reason && <span className="warn-text">{capitalize(opt.reason)}.</span>}
                </span>
              </label>
            );
          })}
        </div>
      </fieldset>
      <CheckLine describe={describe} anyProblem={anyProblem} />
    </>
  );
}

// ---- 5. paravirt features ----
export function FeaturesStep({ draft, update, host, describe, problem, touch, anyProblem }: StepProps) {
  const id = useId();
  const features = host?.features ?? [];
  const defaults = machineDefaults(host, draft.machine);
  // What the guest gets, by the same rule resolve.ts applies (cpu-pm=on turns a default pv-unhalt off).
  const effective = new Map(effectiveFeatures(draft, defaults).map((f) => [f.name, f]));
  const implied = new Map(effectiveFeatures({ cpuPm: draft.cpuPm, cpuFeatures: {} }, defaults).map((f) => [f.name, f.value]));
  const set = (name: string, value: boolean) => {
    const next = { ...draft.cpuFeatures };
    // Explicit only where it differs from what the machine type and cpu-pm would give anyway.
    if (implied.get(name) === value) delete next[name];
    else next[name] = value;
    update({ cpuFeatures: next });
    touch('cpuFeatures');
  };
  const conflict = problem('cpuFeatures');
  return (
    <>
      <Hint>
        Paravirt features the guest sees in CPUID 0x40000001. Unchanged ones follow {draft.machine}'s defaults;
        the ones you change are stored explicitly.
      </Hint>
      <ul className="toggle-list">
        {features.map((f) => {
          // The option says whether the host offers it (and, where KVM cannot be asked, leaves it open).
          const opt = available(host, `feature:${f.name}`);
          const offered = opt.ok;
          const state = effective.get(f.name);
          const on = state?.value ?? false;
          const explicit = draft.cpuFeatures[f.name] !== undefined;
          const clash = f.name === 'kvm-pv-unhalt' && conflict;
          return (
            <li key={f.name}>
              <label className={`toggle ${offered ? '' : 'disabled'}`}>
                <input type="checkbox" role="switch" checked={on && offered} disabled={!offered}
                  aria-invalid={clash ? true : undefined} aria-describedby={clash ? `${id}-conflict` : undefined}
                  onChange={(e) => set(f.name, e.target.checked)} />
                <span>
                  <span className="choice-title">
                    <strong>{f.name}</strong>
                    {explicit ? <span className="tag">changed</span> : state?.source === 'cpu-pm' ? <span className="tag subtle">off by cpu-pm</span> : <span className="tag subtle">default</span>}
                  </span>
                  <span className="choice-help">{f.summary}</span>
                  {!offered && <Unavailable reason={opt.reason ?? 'the host does not offer it'} />}
                  {offered && opt.reason && !(f.name === 'kvm-pv-unhalt' && draft.cpuPm) && <span className="warn-text">{capitalize(opt.reason)}.</span>}
                  {offered && !opt.reason && f.usesHypercalls && host?.kind === 'pvm' && (
                    <span className="warn-text">Uses KVM hypercalls, which hang a vCPU on PVM hosts; the probe guest avoids them.</span>
                  )}
                  {state?.source === 'cpu-pm' && <span className="warn-text">{cpuPmTurnedOffNote(draft.machine)}.</span>}
                  {clash && <span className="field-error" id={`${id}-conflict`} role="alert">{conflict}</span>}
                </span>
              </label>
            </li>
          );
        })}
      </ul>
      {Object.keys(draft.cpuFeatures).length > 0 && (
        <button type="button" className="btn small" onClick={() => update({ cpuFeatures: {} })}>Reset to {draft.machine} defaults</button>
      )}
      <CheckLine describe={describe} anyProblem={anyProblem} />
    </>
  );
}

// ---- 6. overcommit ----
export function OvercommitStep({ draft, update, host, describe, problem, touch, anyProblem }: StepProps) {
  const id = useId();
  const pm = available(host, 'cpu-pm');
  const conflict = problem('cpuPm');
  const lock = available(host, 'mem-lock');
  return (
    <>
      <label className={`toggle ${pm.ok ? '' : 'disabled'}`}>
        <input type="checkbox" role="switch" checked={draft.cpuPm} disabled={!pm.ok}
          aria-invalid={conflict ? true : undefined} aria-describedby={conflict ? `${id}-conflict` : undefined}
          onChange={(e) => { update({ cpuPm: e.target.checked }); touch('cpuPm'); }} />
        <span>
          <strong>cpu-pm</strong>
          <span className="choice-help">
            Let the guest halt and pause without exiting to the host (KVM_CAP_X86_DISABLE_EXITS: HLT, PAUSE, C-states).
            Faster wake-ups when each vCPU has a host CPU of its own; bad when vCPUs share CPUs. Turns PV spinlocks off.
          </span>
          {host?.kind === 'pvm' && <span className="warn-text">On this PVM host an emulated HLT still exits: halt exits keep counting.</span>}
          {!pm.ok && <Unavailable reason={pm.reason} />}
          {pm.ok && pm.reason && host?.kind !== 'pvm' && <span className="warn-text">{capitalize(pm.reason)}.</span>}
          {conflict && <span className="field-error" id={`${id}-conflict`} role="alert">{conflict}</span>}
        </span>
      </label>
      <label className={`toggle ${lock.ok ? '' : 'disabled'}`}>
        <input type="checkbox" role="switch" checked={draft.memLock} disabled={!lock.ok} onChange={(e) => update({ memLock: e.target.checked })} />
        <span>
          <strong>mem-lock</strong>
          <span className="choice-help">Lock guest RAM in host memory (no swapping, no lazy faults).</span>
          {!lock.ok && <Unavailable reason={lock.reason} />}
          {lock.ok && lock.reason && <span className="warn-text">{capitalize(lock.reason)}.</span>}
        </span>
      </label>
      <CheckLine describe={describe} anyProblem={anyProblem} />
    </>
  );
}

// ---- 7. halt polling ----
const POLL_PRESETS = [0, 10_000, 50_000, 200_000, 1_000_000];

export function HaltPollStep(props: StepProps) {
  const { draft, update, host, describe, touch, anyProblem } = props;
  const id = useId();
  const ns = typedNumber(draft.haltPollNs, checkHaltPollNs);
  const opt = available(host, 'halt-poll-ns');
  const params = host?.haltPollParams ?? {};
  return (
    <>
      <Hint>
        When a vCPU halts, KVM can spin for a while before putting its thread to sleep: a wake-up that comes soon is caught
        without a sleep and a late wake-up, at the price of host CPU time.
      </Hint>
      <fieldset className="field" disabled={!opt.ok}>
        <legend className="sr-only">Halt polling</legend>
        <div className="choice-list">
          <label className="choice">
            <input type="radio" name="poll" checked={draft.haltPollMode === 'default'} onChange={() => update({ haltPollMode: 'default' })} />
            <span><strong>Host default</strong>
              <span className="choice-help">
                {params.halt_poll_ns !== undefined ? `halt_poll_ns = ${fmtNs(params.halt_poll_ns)}` : 'the kvm module\'s halt_poll_ns'}
                {params.halt_poll_ns_grow !== undefined && `, grows ×${params.halt_poll_ns_grow}`}
                {params.halt_poll_ns_shrink !== undefined && `, shrinks ÷${params.halt_poll_ns_shrink || '∞ (reset)'}`}
              </span>
            </span>
          </label>
          <label className="choice">
            <input type="radio" name="poll" checked={draft.haltPollMode === 'custom'} onChange={() => update({ haltPollMode: 'custom' })} />
            <span><strong>This VM's own maximum</strong>
              <span className="choice-help">KVM_CAP_HALT_POLL; can also be changed while the VM runs.</span>
            </span>
          </label>
        </div>
      </fieldset>
      {!opt.ok && <Unavailable reason={opt.reason} />}
      {draft.haltPollMode === 'custom' && (
        <div className="field">
          <PollNsInput props={props} field="haltPollNs" id={`${id}-ns`} label="Maximum poll time (ns)" ns={ns} />
          <div className="presets" role="group" aria-label="Presets">
            {POLL_PRESETS.map((p) => (
              <button key={p} type="button" className="btn small" aria-pressed={ns === p} onClick={() => { update({ haltPollNs: String(p) }); touch('haltPollNs'); }}>
                {fmtNs(p)}
              </button>
            ))}
          </div>
        </div>
      )}
      <GuestPollFields {...props} />
      <CheckLine describe={describe} anyProblem={anyProblem} />
    </>
  );
}

/** A poll time typed in ns, judged as it is left, with the value read back in µs or ms beside it. */
function PollNsInput({ props, field, id, label, ns }: { props: StepProps; field: 'haltPollNs' | 'guestHaltPollNs'; id: string; label: string; ns: number | undefined }) {
  const { draft, update, problem, editing } = props;
  return (
    <>
      <label htmlFor={id}>{label}</label>
      <div className="range-row">
        <input id={id} type="text" inputMode="numeric" className="num wide" value={draft[field]} autoComplete="off"
          {...judged(props, field, `${id}-error`)}
          onChange={(e) => { editing(field); update({ [field]: e.target.value }); }} />
        <span className="muted">{ns === undefined ? '' : fmtNs(ns)}</span>
      </div>
      <FieldError id={`${id}-error`} text={problem(field)} />
    </>
  );
}

/** Guest-side polling: a Linux guest's cpuidle-haltpoll, forced on by kernel parameters (none for the probe). */
function GuestPollFields(props: StepProps) {
  const { draft, update, touch } = props;
  const id = useId();
  if (draft.guest === 'probe') return null;
  const ns = typedNumber(draft.guestHaltPollNs, checkGuestHaltPollNs);
  const pollControl = draft.cpuFeatures['kvm-poll-control'];
  return (
    <fieldset className="field">
      <legend>Guest-side polling</legend>
      <label className="toggle">
        <input type="checkbox" role="switch" checked={draft.guestPoll} onChange={(e) => { update({ guestPoll: e.target.checked }); touch('guestHaltPollNs'); }} />
        <span>
          <strong>The guest polls before it halts (cpuidle-haltpoll)</strong>
          <span className="choice-help">
            Adds cpuidle_haltpoll.force=1 haltpoll.guest_halt_poll_ns to its kernel command line.
            {pollControl === false ? ' kvm-poll-control is off: host and guest both poll.' : ' With kvm-poll-control (on by default) the guest turns host polling off for its vCPUs.'}
          </span>
        </span>
      </label>
      {draft.guestPoll && (
        <>
          <PollNsInput props={props} field="guestHaltPollNs" id={`${id}-gns`} label="Guest's maximum poll time (ns)" ns={ns} />
          <p className="muted small">A kernel without the haltpoll governor (Debian's cloud kernel) ignores this maximum; the VM page's guest idle chart shows what its cpuidle states do.</p>
        </>
      )}
    </fieldset>
  );
}

// ---- 8. pinning ----
export function PinStep(props: StepProps) {
  const { draft, update, host, describe, problem, editing, touch, anyProblem } = props;
  const id = useId();
  const cpus = host?.hostCpus ?? [];
  const opt = available(host, 'pin');
  const pin = typedPin(draft.pin);
  const toggle = (c: number) => {
    const now = pin ?? [];
    update({ pin: (now.includes(c) ? now.filter((x) => x !== c) : [...now, c]).join(',') });
    touch('pin');
  };
  return (
    <>
      <Hint>vCPU threads run on the host CPUs you pick, in order: vCPU i on the i-th picked CPU, round-robin. Pick none to let the host scheduler decide.</Hint>
      {!opt.ok && <Unavailable reason={opt.reason} />}
      <fieldset className="field" disabled={!opt.ok}>
        <legend>Host CPUs</legend>
        <div className="cpu-grid">
          {cpus.map((c) => {
            const order = pin?.indexOf(c) ?? -1;
            return (
              <label key={c} className={`cpu-chip ${order >= 0 ? 'on' : ''}`}>
                <input type="checkbox" checked={order >= 0} onChange={() => toggle(c)} />
                <span>CPU {c}{order >= 0 && <small> #{order + 1}</small>}</span>
              </label>
            );
          })}
        </div>
        <div className="field">
          <label htmlFor={`${id}-list`}>Or type a list</label>
          <input id={`${id}-list`} value={draft.pin} placeholder="0,1 or 0-3" autoComplete="off" spellCheck={false}
            {...judged(props, 'pin', `${id}-list-error`)}
            onChange={(e) => { editing('pin'); update({ pin: e.target.value }); }} />
          <FieldError id={`${id}-list-error`} text={problem('pin')} />
        </div>
      </fieldset>
      {pin && pin.length > 0 && !problem('pin') && (
        <table className="mini-table">
          <caption className="sr-only">vCPU to host CPU</caption>
          <thead><tr><th scope="col">vCPU</th>{Array.from({ length: Math.min(typedNumber(draft.cpus, checkCpus) ?? 1, 16) }, (_, i) => <th key={i} scope="col">{i}</th>)}</tr></thead>
          <tbody><tr><th scope="row">host CPU</th>{Array.from({ length: Math.min(typedNumber(draft.cpus, checkCpus) ?? 1, 16) }, (_, i) => <td key={i}>{pin[i % pin.length]}</td>)}</tr></tbody>
        </table>
      )}
      <CheckLine describe={describe} anyProblem={anyProblem} />
    </>
  );
}

// ---- 9. summary ----
export function SummaryStep({ draft, host, describe }: StepProps) {
  const r = describe.resolved;
  return (
    <>
      <dl className="summary">
        <div><dt>Name</dt><dd>{draft.name}</dd></div>
        <div><dt>Guest</dt><dd>{draft.guest === 'probe' ? `probe · ${draft.probeScenario}${draft.probeArgs ? ` ${draft.probeArgs}` : ''}` : draft.guest === 'custom' ? draft.kernel : 'Linux'}</dd></div>
        <div><dt>vCPUs / memory</dt><dd>{draft.cpus} / {draft.memoryMiB} MiB</dd></div>
        <div><dt>Machine</dt><dd>{draft.machine}</dd></div>
        <div><dt>cpu-pm / mem-lock</dt><dd>{draft.cpuPm ? 'on' : 'off'} / {draft.memLock ? 'on' : 'off'}</dd></div>
        <div><dt>Halt polling</dt><dd>{draft.haltPollMode === 'default' ? `host default${host?.haltPollParams.halt_poll_ns !== undefined ? ` (${fmtNs(host.haltPollParams.halt_poll_ns)})` : ''}` : draft.haltPollNs}</dd></div>
        {draft.guestPoll && draft.guest !== 'probe' && <div><dt>Guest polling</dt><dd>cpuidle-haltpoll, up to {draft.guestHaltPollNs} ns</dd></div>}
        <div><dt>Pinning</dt><dd>{draft.pin.trim() ? draft.pin : 'not pinned'}</dd></div>
        <div><dt>Devices</dt><dd>{[...(draft.rng ? ['virtio-rng'] : []), ...draft.devices.map(formatDeviceOption)].join(', ') || 'none besides the serial ports'}</dd></div>
        <div><dt>Network</dt><dd>{netSummary(draft.net)}</dd></div>
        <div><dt>Disks</dt><dd>{draft.disks.length ? draft.disks.map((d, i) => `vd${String.fromCharCode(97 + i)} ${d.path.trim()}${diskModeNote(d) ? ` (${diskModeNote(d)})` : ''}`).join(', ') : 'none'}</dd></div>
      </dl>
      <h3>Equivalent command line</h3>
      {describe.pending && !r && !describe.error && <p className="muted">Checking…</p>}
      {describe.error && <p className="error" role="alert">{describe.error}</p>}
      {r && (
        <>
          <CommandLine text={r.commandLine} testId="cmdline" />
          {r.judgedAtStart && <p className="warn-text" data-testid="judged-at-start">⚠ {capitalize(r.judgedAtStart)}.</p>}
          {r.features.length > 0 && (
            <>
              <h3>What the guest gets</h3>
              <ul className="feature-summary">
                {r.features.map((f) => (
                  <li key={f.name} className={f.value ? 'on' : 'off'}>
                    <span aria-hidden="true">{f.value ? '●' : '○'}</span> {f.name} <span className="muted small">({f.source})</span>
                  </li>
                ))}
              </ul>
              {r.disableExits.length > 0 && <p className="muted small">Exits disabled: {r.disableExits.join(', ')}</p>}
            </>
          )}
          {r.notes.length > 0 && <ul className="notes">{r.notes.map((n, i) => <li key={i}>{n}</li>)}</ul>}
          {r.warnings.length > 0 && <ul className="warnings">{r.warnings.map((n, i) => <li key={i}>⚠ {n}</li>)}</ul>}
        </>
      )}
    </>
  );
}

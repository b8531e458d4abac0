// What the guest idle and steal charts say beside their lines: the guest's cpuidle set-up (from
// its agent's ready line) and why a chart is empty (pure; unit-tested without a browser).
import type { VmRecord } from '../../../electron/service/api.ts';
import { durationText } from '../../../electron/experiments/halt-poll-model.ts';
import { hasAgent } from '../lib/agent.ts';
import type { GuestIdleFacts } from './guest-idle.ts';

/** "guest: cpuidle-haltpoll driver, haltpoll governor, guest_halt_poll_ns 200 µs"; undefined before the agent says. */
export function guestIdleNote(f: GuestIdleFacts | null): string | undefined {
  if (!f || f.cpuidle === null) return undefined;
  if (!f.cpuidle) return 'guest: no cpuidle driver (its halts are not counted)';
  const driver = f.haltpoll ? 'cpuidle-haltpoll driver' : 'a cpuidle driver other than cpuidle-haltpoll';
  if (f.haltpollGov) return `guest: ${driver}, haltpoll governor${f.guestHaltPollNs === null ? '' : `, guest_halt_poll_ns ${durationText(f.guestHaltPollNs)}`}`;
  const why = f.guestHaltPollNs === null ? 'this kernel has no haltpoll governor' : 'not the haltpoll governor';
  return `guest: ${driver}, the kernel's default governor (${why}: guest_halt_poll_ns does not apply)`;
}

type Chart = 'guest-idle' | 'steal';

/** Why a guest-side chart is empty, in this VM's situation (LiveChart's emptyText). */
export function guestChartEmpty(chart: Chart, vm: Pick<VmRecord, 'config' | 'status'>, f: GuestIdleFacts | null): string {
  const what = chart === 'guest-idle' ? 'guest idle' : 'steal time';
  if (!hasAgent(vm.config)) return `no ${what}: this VM has no Unhalt agent on ttyS1 to read it from the guest (the built-in Linux has one, and a VM imported with the tools disk)`;
  if (f && f.cpuidle === null) return `no ${what}: this guest's agent is older than the app and does not report it (rebuild the Linux kit: npm run build:linux)`;
  if (chart === 'guest-idle' && f?.cpuidle === false) {
    return 'the guest kernel idles without a cpuidle driver: boot it with cpuidle_haltpoll.force=1 (the VM\'s guest-halt-poll-ns knob) to see its states';
  }
  if (chart === 'steal' && f?.stealTime === false) return 'no steal time: the guest has no kvm-steal-time (a paravirt feature of the VM)';
  const agent = vm.status.agent;
  if (agent === 'probing' || agent === 'ready') return `waiting for the agent's probe (a line per vCPU each second while this page is open)`;
  if (vm.status.state === 'stopped') return `no ${what}: start the VM; its agent's probe then reports here`;
  return `no ${what} yet: the guest's agent has not reported on ttyS1 (it starts late in a distribution's boot)`;
}

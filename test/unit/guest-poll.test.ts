// guest-halt-poll-ns as the guest receives it: kernel parameters after its own command line, the
// same in every export and in --dry-run, and said per kvm-poll-control (who still polls).
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { describeResolution } from '../../electron/cli/describe.ts';
import { resolveBoot, resolveMachineWithoutKvm } from '../../electron/vmm/config/resolve.ts';
import { guestPollArgs, validateConfig } from '../../electron/vmm/config/vm-config.ts';
import { qemuArgs } from '../../electron/vmm/export/qemu.ts';
import { exportPlan } from '../../electron/vmm/export/plan.ts';

const dir = mkdtempSync(join(tmpdir(), 'unhalt-guest-poll-'));
const kernel = join(dir, 'vmlinuz');
writeFileSync(kernel, 'not really a kernel: only its path and size matter here');
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('guest-side halt polling on the kernel command line', () => {
  it('comes after the user\'s own append (the kernel keeps the last of a module parameter given twice)', () => {
    const c = validateConfig({ guest: 'custom', kernel, append: 'console=ttyS0 cpuidle_haltpoll.force=0', guestHaltPollNs: 50000 });
    expect(resolveBoot(c, 'hardware').cmdline).toBe('console=ttyS0 cpuidle_haltpoll.force=0 cpuidle_haltpoll.force=1 haltpoll.guest_halt_poll_ns=50000');
    expect(guestPollArgs(0)).toBe('cpuidle_haltpoll.force=1 haltpoll.guest_halt_poll_ns=0');
  });

  it('is absent without the knob: the guest kernel idles as it chooses', () => {
    const c = validateConfig({ guest: 'custom', kernel, append: 'console=ttyS0' });
    expect(resolveBoot(c, 'hardware').cmdline).toBe('console=ttyS0');
  });

  it('--dry-run says who polls: kvm-poll-control on (the default) turns host polling off, off leaves both', () => {
    const on = validateConfig({ guest: 'custom', kernel, guestHaltPollNs: 200000 });
    const text = describeResolution(on, resolveMachineWithoutKvm(on));
    expect(text).toMatch(/command line: {2}cpuidle_haltpoll\.force=1 haltpoll\.guest_halt_poll_ns=200000/);
    expect(text).toContain('guest polling: cpuidle-haltpoll forced, guest_halt_poll_ns 200000 (the kernel parameters above); kvm-poll-control on: the guest turns host polling off for its vCPUs');
    expect(text).toContain('--guest-halt-poll-ns 200000');
    const both = validateConfig({ guest: 'custom', kernel, guestHaltPollNs: 200000, cpuFeatures: { 'kvm-poll-control': false } });
    expect(describeResolution(both, resolveMachineWithoutKvm(both))).toContain('kvm-poll-control off: host and guest both poll');
    const none = validateConfig({ guest: 'custom', kernel });
    expect(describeResolution(none, resolveMachineWithoutKvm(none))).not.toContain('guest polling:');
  });

  it('a QEMU export boots the guest with the same parameters', () => {
    const c = validateConfig({ guest: 'custom', kernel, append: 'console=ttyS0', guestHaltPollNs: 1000 });
    const out = qemuArgs(exportPlan({ config: c, boot: resolveBoot(c, 'hardware'), hostKind: 'hardware' })).join(' ');
    expect(out).toContain('console=ttyS0 cpuidle_haltpoll.force=1 haltpoll.guest_halt_poll_ns=1000');
  });
});

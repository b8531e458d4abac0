// --device isa-debug-exit on this host's KVM, through the real `unhalt run` process: a guest's
// write of V to it ends the run with QEMU's status (V << 1) | 1, as kvm-unit-tests expect of
// `-device isa-debug-exit,iobase=0xf4,iosize=4`; without the device 0xf4 stays a clean power off;
// the device sits at its own iobase instead of 0xf4; a bad --device is refused before anything
// starts. The guests are a few instructions written as a PVH kernel (support/debug-exit-guest.ts)
// and the probe guest, which powers off through ACPI before it would reach 0xf4.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { runCli } from '../support/cli.ts';
import { writeDebugExitKernel } from '../support/debug-exit-guest.ts';
import { kvmAvailable } from '../support/probe.ts';
import { validateConfig } from '../../electron/vmm/config/vm-config.ts';
import { resolveMachine } from '../../electron/vmm/config/resolve.ts';
import { probeHost } from '../../electron/vmm/machine/host-caps.ts';
import { VirtualMachine } from '../../electron/vmm/vm.ts';

const dir = mkdtempSync(join(tmpdir(), 'unhalt-debug-exit-'));
const home = mkdtempSync(join(tmpdir(), 'unhalt-debug-exit-home-'));
const env = { UNHALT_HOME: home };
const KUT_DEVICE = 'isa-debug-exit,iobase=0xf4,iosize=4';

function kernel(name: string, port: number, value: number, width: 1 | 2 | 4 = 4): string {
  const path = join(dir, `${name}.elf`);
  writeDebugExitKernel(path, port, value, width);
  return path;
}

const run = (args: string[]) => runCli(['run', '--memory', '32', ...args], { env });
/** The lines on stderr besides the host's own notes (PVM's hypercall warning). */
const said = (stderr: string) => stderr.split('\n').filter((l) => l !== '' && !/^unhalt: (warning|note): /.test(l));

describe.skipIf(!kvmAvailable)('unhalt run --device isa-debug-exit', () => {
  it('a write of V ends the run with (V << 1) | 1: 0 -> 1, 1 -> 3, 38 -> 77, 0x80 -> 1 (8 bits), and says so in one line', async () => {
    for (const [value, status] of [[0, 1], [1, 3], [38, 77], [0x80, 1]] as const) {
      const r = await run(['--guest', 'custom', '--kernel', kernel(`v${value}`, 0xf4, value), '--device', KUT_DEVICE]);
      expect(r.code, r.stderr).toBe(status);
      expect(said(r.stderr)).toEqual([`unhalt: the guest wrote 0x${value.toString(16)} to isa-debug-exit (exit status ${status})`]);
    }
  }, 120_000);

  it('QEMU\'s defaults (iobase 0x501, iosize 2) with a 16-bit write; the board\'s own 0xf4 is then a quiet port', async () => {
    const r = await run(['--guest', 'custom', '--kernel', kernel('w16', 0x501, 0x26, 2), '--device', 'isa-debug-exit']);
    expect(r.code, r.stderr).toBe(77);
    // The device moved: a write to 0xf4 reaches nothing, so the guest halts until --timeout.
    const quiet = await run(['--guest', 'custom', '--kernel', kernel('f4', 0xf4, 1), '--device', 'isa-debug-exit,iobase=0x501', '--timeout', '1.5']);
    expect(quiet.code, quiet.stderr).toBe(124);
  }, 60_000);

  it('without the device, a write to 0xf4 is a clean power off (exit 0), as before', async () => {
    const r = await run(['--guest', 'custom', '--kernel', kernel('plain', 0xf4, 1)]);
    expect(r.code, r.stderr).toBe(0);
    expect(said(r.stderr)).toEqual([]);
  }, 30_000);

  it('the probe guest with kvm-unit-tests\' device still powers off through ACPI first: exit 0, its output as ever', async () => {
    const r = await runCli(['run', '--append', 'scenario=hello', '--device', KUT_DEVICE], { env });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/hello/i);
  }, 30_000);

  it('the VMM reports the end as debug-exit with the value', async () => {
    const { spec } = resolveMachine(validateConfig({ guest: 'custom', kernel: kernel('vmm', 0xf4, 0xdead), memoryMiB: 32, devices: [{ type: 'isa-debug-exit', iobase: 0xf4, iosize: 4 }] }), probeHost());
    expect(spec.debugExit).toEqual({ iobase: 0xf4, iosize: 4 });
    const vm = await VirtualMachine.start(spec);
    const end = await vm.ended;
    expect(end).toMatchObject({ kind: 'debug-exit', value: 0xdead, vcpu: 0, message: 'the guest wrote 0xdead to isa-debug-exit (exit status 91)' });
  }, 30_000);

  const refused: [string, string[], RegExp][] = [
    ['an unknown device', ['--device', 'pci-testdev'], /^unhalt: device "pci-testdev" is not known; the devices known: isa-debug-exit\[,iobase=N\]\[,iosize=1\|2\|4\]/],
    ['a bad iosize', ['--device', 'isa-debug-exit,iobase=0xf4,iosize=3'], /^unhalt: isa-debug-exit: iosize must be 1, 2 or 4, got 3$/],
    ['a bad number', ['--device', 'isa-debug-exit,iobase=f4'], /^unhalt: isa-debug-exit: iobase must be a number \(decimal, or hex with 0x\), got "f4"$/],
    ['a second isa-debug-exit', ['--device', KUT_DEVICE, '--device', 'isa-debug-exit'], /^unhalt: isa-debug-exit is given twice: a VM has at most one; give it once$/],
    ['a port of the board', ['--device', 'isa-debug-exit,iobase=0x3f8'], /^unhalt: isa-debug-exit at 0x3f8 \(iosize 2\) overlaps the board's com1 \(ports 0x3f8-0x3ff\); give another iobase/],
  ];
  for (const [what, args, message] of refused) {
    it(`refuses ${what}: exit 1, one line on stderr, nothing run`, async () => {
      const r = await runCli(['run', '--append', 'scenario=hello', ...args], { env });
      expect(r.code).toBe(1);
      expect(r.stdout).toBe('');
      expect(said(r.stderr)).toHaveLength(1);
      expect(said(r.stderr)[0]).toMatch(message);
    }, 30_000);
  }
});

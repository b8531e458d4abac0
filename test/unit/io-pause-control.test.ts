// The I/O thread's half of the pause handshake in the VM's control block (VmControl: the
// acknowledgement io-worker.ts gives, what VirtualMachine.pause waits for) and the PollSet's
// unwatched entries that keep a paused device's notifications on its eventfd.
import { describe, expect, it } from 'vitest';
import { COMMAND, VmControl } from '../../electron/vmm/shared/control.ts';
import { PollSet } from '../../native/kvm/poll-set.ts';
import { createEventFd, EventFdWriter, takeEventFd } from '../../native/kvm/eventfd.ts';
import { closeFd } from '../../native/kvm/libc.ts';

describe('the I/O thread pause acknowledgement', () => {
  it('counts only for the latest pause: one given before a resume and a new pause does not', () => {
    const c = new VmControl(1);
    expect(c.ioPaused).toBe(false);
    c.setCommand(COMMAND.pause);
    expect(c.ioPaused).toBe(false); // asked, not yet acknowledged
    c.acknowledgeIoPause(c.changes);
    expect(c.ioPaused).toBe(true);
    const firstPause = c.changes;
    c.setCommand(COMMAND.run);
    expect(c.ioPaused).toBe(false);
    c.setCommand(COMMAND.pause);
    expect(c.ioPaused).toBe(false); // the first pause's acknowledgement is stale
    c.acknowledgeIoPause(firstPause);
    expect(c.ioPaused).toBe(false);
    c.acknowledgeIoPause(c.changes);
    expect(c.ioPaused).toBe(true);
  });

  it('an acknowledgement read before the command changed (CHANGES read first) never vouches for the new command', () => {
    const c = new VmControl(1);
    const seenBefore = c.changes; // the I/O thread read CHANGES, then the main thread paused
    c.setCommand(COMMAND.pause);
    c.acknowledgeIoPause(seenBefore);
    expect(c.ioPaused).toBe(false);
  });

  it('wakes a main thread waiting for the paused count', async () => {
    const c = new VmControl(1);
    c.setCommand(COMMAND.pause);
    const waited = c.pausedCountChange(60_000);
    c.acknowledgeIoPause(c.changes);
    await waited; // resolves well before its timeout
    expect(c.ioPaused).toBe(true);
  });

  it('the stop word is the main thread\'s to set', () => {
    const c = new VmControl(2);
    expect(c.ioStopRequested).toBe(false);
    c.requestIoStop();
    expect(new VmControl(c.sab, 2).ioStopRequested).toBe(true);
  });
});

describe('PollSet.watch', () => {
  it('an unwatched eventfd is skipped by poll and keeps its count; watched again it is ready with all of it', () => {
    const wake = createEventFd();
    const dev = createEventFd();
    try {
      const set = new PollSet([wake, dev]);
      const w = new EventFdWriter();
      set.watch(1, false);
      w.signal(dev);
      w.signal(dev);
      expect(set.wait(0)).toBe(0);
      expect(set.ready(1)).toBe(false);
      w.signal(wake);
      expect(set.wait(0)).toBe(1);
      expect(set.ready(0)).toBe(true);
      expect(set.ready(1)).toBe(false);
      takeEventFd(wake);
      set.reset();
      set.watch(1, true);
      expect(set.wait(0)).toBe(1);
      expect(set.ready(1)).toBe(true);
      expect(takeEventFd(dev)).toBe(2);
      expect(() => set.watch(2, true)).toThrow(RangeError);
    } finally {
      closeFd(wake);
      closeFd(dev);
    }
  });
});

// The window title of each view (renderer/src/lib/page-title.ts): the view's heading, then the
// app, so tabs and windows (a VM each) can be told apart.
import { describe, expect, it } from 'vitest';
import { pageTitle } from '../../renderer/src/lib/page-title.ts';

const vms = [{ id: 'a', config: { name: 'web 1' } }, { id: 'b', config: { name: 'db' } }];

describe('page titles', () => {
  it('names the view, and the VM on a VM\'s pages', () => {
    expect(pageTitle({ view: 'library' }, vms)).toBe('Virtual machines — Unhalt');
    expect(pageTitle({ view: 'new' }, vms)).toBe('New virtual machine — Unhalt');
    expect(pageTitle({ view: 'new', guest: 'linux' }, vms)).toBe('New virtual machine — Unhalt');
    expect(pageTitle({ view: 'vm', id: 'a' }, vms)).toBe('web 1 — Unhalt');
    expect(pageTitle({ view: 'vm', id: 'b' }, vms)).toBe('db — Unhalt');
    expect(pageTitle({ view: 'edit', id: 'b' }, vms)).toBe('Edit db — Unhalt');
    expect(pageTitle({ view: 'compare' }, vms)).toBe('Compare configurations — Unhalt');
    expect(pageTitle({ view: 'compare', experimentId: 'x' }, vms)).toBe('Compare configurations — Unhalt');
  });

  it('says what the page says for a VM that is not (yet) known', () => {
    expect(pageTitle({ view: 'vm', id: 'zz' }, [], false)).toBe('Loading… — Unhalt');
    expect(pageTitle({ view: 'vm', id: 'zz' }, vms)).toBe('VM not found — Unhalt');
  });
});

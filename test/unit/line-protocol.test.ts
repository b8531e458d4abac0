import { describe, expect, it } from 'vitest';
import { AgentLineReader, parseAgentLine, type AgentEvent } from '../../electron/vmm/agent/line-protocol.ts';

describe('ttyS1 line protocol', () => {
  it('parses good lines', () => {
    expect(parseAgentLine('@u1 boot cpus_found=4 cpus_up=4')).toEqual({ event: 'boot', fields: { cpus_found: 4, cpus_up: 4 } });
    expect(parseAgentLine('@u1 ipi p50_ns=1200 delta=-5\r')).toEqual({ event: 'ipi', fields: { p50_ns: 1200, delta: -5 } });
    expect(parseAgentLine('@u1 poweroff')).toEqual({ event: 'poweroff', fields: {} });
  });

  it('ignores non-protocol text and flags malformed lines', () => {
    expect(parseAgentLine('hello world')).toBe('ignored');
    for (const bad of ['@u1 ', '@u1 BOOT x=1', '@u1 boot x', '@u1 boot x=1.5', '@u1 boot x=abc', '@u1 boot =3',
      `@u1 boot x=${'9'.repeat(25)}`, `@u1 ${'a'.repeat(40)}`, `@u1 boot ${'k=1 '.repeat(200)}`, '@u1 boot __proto__=1x']) {
      expect(parseAgentLine(bad), bad).toBe('malformed');
    }
  });

  it('reassembles lines split across chunks, counts malformed ones, bounds long lines', () => {
    const events: AgentEvent[] = [];
    const r = new AgentLineReader((e) => events.push(e));
    const enc = new TextEncoder();
    r.push(enc.encode('@u1 a x=1\n@u1 b y='));
    r.push(enc.encode('2\ngarbage\n@u1 bad line\n'));
    r.push(enc.encode(`@u1 long ${'z'.repeat(10_000)}`));
    r.push(enc.encode('more\n@u1 c z=3\n'));
    expect(events.map((e) => e.event)).toEqual(['a', 'b', 'c']);
    expect(events[1]!.fields.y).toBe(2);
    expect(r.malformed).toBe(2);
  });

  it('never throws on random bytes', () => {
    const r = new AgentLineReader(() => {});
    for (let i = 0; i < 2000; i++) {
      const bytes = Uint8Array.from({ length: 1 + Math.floor(Math.random() * 200) }, () => Math.floor(Math.random() * 256));
      expect(() => r.push(bytes)).not.toThrow();
    }
  });
});

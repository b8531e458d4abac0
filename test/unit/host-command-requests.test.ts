// A host command's confirmation from the API needs the code shown to the person at this machine
// (host-command-requests.ts): the answer to a request never holds it, a wrong code counts against
// three tries, a code works once and for five minutes, requests cannot pile up, and a service with
// nowhere to show a code confirms nothing.
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { CODE_TTL_MS, HostCommandRequests } from '../../electron/service/host-command-requests.ts';
import { createService } from '../../electron/service/service.ts';
import { rejection } from '../support/api-errors.ts';
import { removeTempHomes, tempHome } from '../support/temp-home.ts';

afterAll(removeTempHomes);

const codeOf = (text: string) => /type the code (\d{3}) (\d{3})/.exec(text)!.slice(1).join('');

describe('host command requests', () => {
  it('the code goes out of band only; right once, wrong three times ends it; it expires', () => {
    let t = 1_000;
    const shown: string[] = [];
    const r = new HostCommandRequests((s) => shown.push(s), () => t);
    const a = r.request(['wrk', '-d', '10s', 'http://127.0.0.1:8080/']);
    expect(JSON.stringify(a)).not.toContain(codeOf(shown[0]!));
    expect(shown[0]).toContain("run this command on this machine: wrk -d 10s http://127.0.0.1:8080/");
    const code = codeOf(shown[0]!);
    const wrong = code === '123456' ? '654321' : '123456';
    expect(() => r.confirm(a.requestId, wrong)).toThrow('wrong code: type the 6 digits Unhalt showed where it runs (2 tries left)');
    expect(r.confirm(a.requestId, code)).toEqual(['wrk', '-d', '10s', 'http://127.0.0.1:8080/']);
    expect(() => r.confirm(a.requestId, code)).toThrow(/^no such host command request/);

    const b = r.request(['true']);
    const bCode = codeOf(shown[1]!);
    expect(() => r.confirm(b.requestId, 'x')).toThrow('(2 tries left)');
    expect(() => r.confirm(b.requestId, 'y')).toThrow('(1 try left)');
    expect(() => r.confirm(b.requestId, 'z')).toThrow('wrong code 3 times: the request is void; ask again for a new code');
    expect(() => r.confirm(b.requestId, bCode)).toThrow(/^no such host command request/);

    const c = r.request(['true']);
    t += CODE_TTL_MS;
    expect(() => r.confirm(c.requestId, codeOf(shown[2]!))).toThrow(/^no such host command request/);
    expect(() => r.confirm({}, 1)).toThrow(/^no such host command request/);
  });

  it('shows control characters and bidi overrides as escapes: what the terminal shows is what runs', () => {
    const shown: string[] = [];
    const r = new HostCommandRequests((s) => shown.push(s));
    r.request(['rm', '-rf', '/tmp/x\r\x1b[2Kecho harmless', '\u202egnp.exe']);
    expect(shown[0]).not.toMatch(/[\r\x1b\u202e]/);
    expect(shown[0]).toContain('\\u000d\\u001b[2Kecho harmless');
    expect(shown[0]).toContain('\\u202egnp.exe');
  });

  it('at most 8 wait at once; a bad vector is refused before any code is made', () => {
    const shown: string[] = [];
    const r = new HostCommandRequests((s) => shown.push(s));
    for (let i = 0; i < 8; i++) r.request(['echo', String(i)]);
    expect(() => r.request(['echo', 'ninth'])).toThrow(/^8 host commands already wait for their codes/);
    expect(() => r.request('sh -c id')).toThrow(/must be a list of one or more strings/);
    expect(shown).toHaveLength(8);
  });

  it('a service with nowhere to show a code confirms nothing', async () => {
    const svc = await createService({ home: tempHome('no-announce') });
    try {
      expect(await rejection(svc.requestHostCommand(['true']))).toMatchObject({ code: 'host', message: expect.stringMatching(/nowhere to show a confirmation code/) });
      expect(await rejection(svc.confirmHostCommand('x', '000000'))).toMatchObject({ code: 'host' });
    } finally {
      await svc.shutdown();
    }
  });

  it('a damaged confirmed-commands file is never written over: the confirmation is refused naming it', async () => {
    const home = tempHome('damaged-commands');
    const file = join(home, 'host-commands.json');
    writeFileSync(file, '{"commands": [ truncated');
    let shown = '';
    const svc = await createService({ home, announce: (text) => { shown = text; } });
    try {
      const { requestId } = await svc.requestHostCommand(['true']);
      const r = await rejection(svc.confirmHostCommand(requestId, codeOf(shown)));
      expect(r.code).toBe('conflict');
      expect(r.message).toMatch(new RegExp(`^${file.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')} cannot be read \\(.*\\); move it away and confirm the command again \\(nothing was written\\)$`));
      expect(readFileSync(file, 'utf8')).toBe('{"commands": [ truncated');
    } finally {
      await svc.shutdown();
    }
  });
});

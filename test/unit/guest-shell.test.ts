// The Linux checks' shell helper (test/support/guest-shell.ts) against a real shell process: it
// answers what is typed, and a wait on a process that has ended fails at once with the reason
// rather than at its deadline (which under the nested lane's emulation is tens of minutes).
import { spawn } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { processConsole, shell, waitForOutput } from '../support/guest-shell.ts';

function startShell() {
  const child = spawn('sh', ['-s'], { stdio: ['pipe', 'pipe', 'pipe'] });
  let out = '';
  child.stdout.on('data', (d) => { out += d; });
  child.stderr.on('data', (d) => { out += d; });
  const closed = new Promise<void>((resolve) => child.on('close', () => resolve()));
  // Enter is typed as \r, which a guest's tty turns into \n; a pipe does not, so this one does.
  const guest = { ...processConsole(child, () => out), send: (s: string) => { child.stdin!.write(s.replace(/\r/g, '\n')); } };
  return { child, closed, guest };
}

describe('guest-shell', () => {
  it('types a command and returns what follows it, not earlier output', async () => {
    const { child, closed, guest } = startShell();
    await shell(guest, 'echo first=1', /first=1/, 10_000);
    const text = await shell(guest, 'echo second=$((1+1))', /second=\d/, 10_000);
    expect(text).toContain('second=2');
    expect(text).not.toContain('first=1');
    child.stdin!.end();
    await closed;
  });

  it('a wait on a guest that has ended fails at once, saying how it ended', async () => {
    const { child, closed, guest } = startShell();
    child.stdin!.write('echo bye; exit 3\n');
    await closed;
    const t0 = performance.now();
    await expect(waitForOutput(guest, /never printed/, 0, 600_000)).rejects.toThrow(/no \/never printed\/: unhalt run ended \(exit code 3\); console: "bye\\n"/);
    expect(performance.now() - t0).toBeLessThan(5_000);
    // What it printed before it ended still counts.
    expect(await waitForOutput(guest, /bye/, 0, 600_000)).toContain('bye');
  });
});

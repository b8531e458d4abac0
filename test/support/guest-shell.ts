// Typing into a guest's shell and waiting for its answer, for the Linux checks: the guest is a VM
// of this process (watch()) or an `unhalt run` child process. A wait ends at once, saying why,
// when the guest has ended: its deadlines are scaled by the host clock (tens of minutes under
// the nested lane's emulation), and a guest that triple-faulted or powered off can never answer.
import type { ChildProcess } from 'node:child_process';
import { consoleMirror } from './console-mirror.ts';
import type { Watched } from './probe.ts';

/** A guest console one can read and type into, and how it ended (undefined while it runs). */
export interface GuestConsole {
  console(): string;
  send(s: string): void;
  ended(): string | undefined;
}

/** A VM of this process, as watch() follows it. */
export function vmConsole(g: Watched): GuestConsole {
  return {
    console: () => g.console(),
    send: (s) => g.vm.sendConsole(s),
    ended: () => { const e = g.ended(); return e === undefined ? undefined : `the VM ended (${e})`; },
  };
}

/** An `unhalt run` child whose stdout and stderr are `out()`, its stdin the guest's console. */
export function processConsole(child: ChildProcess, out: () => string): GuestConsole {
  // 'close', not 'exit': only then has all of its output been read (a last answer included).
  let closed = false;
  const stdout = consoleMirror(`unhalt run, pid ${child.pid}, stdout`);
  const stderr = consoleMirror(`unhalt run, pid ${child.pid}, stderr`);
  child.stdout?.on('data', (d) => stdout.write(d));
  child.stderr?.on('data', (d) => stderr.write(d));
  child.once('close', (code, signal) => {
    closed = true;
    stdout.write(`\n[unhalt run ended: ${signal ?? `exit code ${code}`}]`);
    stdout.end();
    stderr.end();
  });
  return {
    console: out,
    send: (s) => { child.stdin!.write(s); },
    ended: () => (closed ? `unhalt run ended (${child.signalCode ?? `exit code ${child.exitCode}`})` : undefined),
  };
}

/** Waits for `pattern` in what the console prints from offset `from` on; returns that text. */
export async function waitForOutput(g: GuestConsole, pattern: RegExp, from: number, ms: number, what = `${pattern}`): Promise<string> {
  const end = performance.now() + ms;
  for (;;) {
    const text = g.console().slice(from);
    if (pattern.test(text)) return text;
    const ended = g.ended();
    // One more look after the end: the answer may have come with the guest's last bytes.
    if (ended !== undefined && !pattern.test(g.console().slice(from))) {
      throw new Error(`no ${what}: ${ended}; console: ${JSON.stringify(g.console().slice(-400))}`);
    }
    if (performance.now() > end) throw new Error(`no ${what} within ${ms / 1000} s: ${JSON.stringify(text.slice(-400))}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Types `cmd` and waits for `pattern` in what follows (not in earlier output). */
export function shell(g: GuestConsole, cmd: string, pattern: RegExp, ms: number): Promise<string> {
  const from = g.console().length;
  g.send(`${cmd}\r`);
  return waitForOutput(g, pattern, from, ms, `${pattern} after ${JSON.stringify(cmd)}`);
}

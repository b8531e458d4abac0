// Test support: run the real `unhalt` command line in a child process.
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { scaled } from './time-scale.ts';

export const UNHALT_BIN = fileURLToPath(new URL('../../bin/unhalt.mjs', import.meta.url));

export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

export function runCli(args: string[], opts: { input?: string; env?: NodeJS.ProcessEnv; inputAfter?: string; prefix?: string[]; killAfterMs?: number; cwd?: string } = {}): Promise<CliResult> {
  return new Promise((resolve, reject) => {
    const cmd = opts.prefix ? opts.prefix[0]! : process.execPath;
    const argv = opts.prefix ? [...opts.prefix.slice(1), process.execPath, UNHALT_BIN, ...args] : [UNHALT_BIN, ...args];
    const child = spawn(cmd, argv, { env: { ...process.env, ...opts.env }, stdio: ['pipe', 'pipe', 'pipe'], ...(opts.cwd ? { cwd: opts.cwd } : {}) });
    let stdout = '';
    let stderr = '';
    let inputSent = false;
    const sendInput = () => {
      if (inputSent || opts.input === undefined) return;
      inputSent = true;
      child.stdin.end(opts.input);
    };
    child.stdout.on('data', (d) => {
      stdout += d;
      // Type only once the guest shows it is listening (input sent earlier may be lost on UART reset).
      if (opts.inputAfter !== undefined && stdout.includes(opts.inputAfter)) sendInput();
    });
    child.stderr.on('data', (d) => { stderr += d; });
    // Never leak a child past a failed test: kill it after a generous deadline.
    const killer = setTimeout(() => child.kill('SIGKILL'), opts.killAfterMs ?? scaled(90_000));
    child.on('error', reject);
    child.on('close', (code) => { clearTimeout(killer); resolve({ code, stdout, stderr }); });
    if (opts.input === undefined) child.stdin.end();
    else if (opts.inputAfter === undefined) sendInput();
  });
}

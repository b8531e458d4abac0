// The host's side of the agent's `exec` command (docs/guest-contract.md): the request line for an
// argument vector, and the answer gathered from its `exec_out` and `exec` events. Pure, apart from
// any VM: backend-user-cmd.ts sends the line with VirtualMachine.sendAgent; tests drive it with the
// agent built for the host (`unhalt-agent --stdio`).
import type { AgentEvent } from '../vmm/agent/line-protocol.ts';

/** `exec hex=ARGV timeout_ms=N\n`: each argument's UTF-8 bytes and a NUL, as hex. */
export function execLine(argv: readonly string[], timeoutMs: number): string {
  const bytes = Buffer.concat(argv.map((a) => Buffer.from(`${a}\0`, 'utf8')));
  return `exec hex=${bytes.toString('hex')} timeout_ms=${Math.max(1, Math.round(timeoutMs))}\n`;
}

export interface ExecResult {
  /** The command's stdout and stderr together (its last 64 KiB when it printed more). */
  output: string;
  status: number;
  signal: number;
  timedOut: boolean;
  outBytes: number;
}

/** The most output kept from one exec (the agent itself sends its last 64 KiB). */
const MAX_KEPT = 256 * 1024;

/** Gathers one `exec`'s answer from the agent's events; `done` once its `exec` line came. */
export class GuestExec {
  result?: ExecResult;
  /** Why the agent refused the request (`exec_error`), in one line. */
  refused?: string;
  private chunks: Uint8Array[] = [];
  private kept = 0;
  private nextSeq = 0;
  private gap = false;

  /** Takes an agent event; true when it ended the exec (its result or a refusal). */
  onEvent(e: AgentEvent): boolean {
    if (this.result || this.refused) return false;
    if (e.event === 'exec_out' && e.data) {
      if (e.fields.seq !== this.nextSeq) this.gap = true;
      this.nextSeq = (e.fields.seq ?? this.nextSeq) + 1;
      this.chunks.push(e.data);
      this.kept += e.data.length;
      // The agent sends at most 64 KiB; a guest that sends more (a hostile one) is cut to the tail.
      while (this.kept > MAX_KEPT && this.chunks.length > 1) {
        this.kept -= this.chunks.shift()!.length;
        this.gap = true;
      }
      return false;
    }
    if (e.event === 'error' && e.fields.unknown_command === 1) {
      this.refused = 'the guest\'s agent has no exec command (it is older than this Unhalt): rebuild the tools disk (npm run build:linux) and boot with it';
      return true;
    }
    if (e.event === 'exec_error') {
      this.refused = e.fields.bad_args ? 'the guest\'s agent refused the command line (bad_args): is its agent older than this Unhalt? (rebuild the tools disk: npm run build:linux)'
        : `the guest's agent could not start the command (errno ${e.fields.errno ?? '?'})`;
      return true;
    }
    if (e.event !== 'exec') return false;
    const output = Buffer.concat(this.chunks).toString('utf8');
    const f = e.fields;
    this.result = { output: this.gap ? `[part of the output was lost on ttyS1]\n${output}` : output, status: f.status ?? -1, signal: f.signal ?? 0, timedOut: f.timed_out === 1, outBytes: f.out_bytes ?? 0 };
    return true;
  }
}

// The bare-metal back end: the host build of a Linux workload (no VM at all), the reference of
// the ratio column.
import { spawn } from 'node:child_process';
import type { AgentEvent } from '../vmm/agent/line-protocol.ts';
import { parseAgentLine } from '../vmm/agent/line-protocol.ts';
import { LINUX_HOST_BUILD_HINT, LINUX_HOST_WORKLOAD } from '../vmm/guests-linux.ts';
import { onAbort, type RunOutcome } from './backend.ts';
import type { Workload } from './workloads.ts';

/** The host build of a Linux workload at its default size on hardware: ~10 s (pipe, 1M loops); generous. */
export const BARE_BUDGET_MS = 300_000;

/**
 * The bare-metal reference: the host build of the same C workload with the same arguments
 * (assets/guests/linux/host/unhalt-workload), its `@u1` lines read from stdout.
 */
export async function runBare(work: Workload, args: string[], binary: string = LINUX_HOST_WORKLOAD, timeoutMs = BARE_BUDGET_MS, signal?: AbortSignal): Promise<RunOutcome> {
  const t0 = performance.now();
  let timedOut = false;
  const out = await new Promise<{ code: number | null; signal: string | null; stdout: string; stderr: string; error?: string }>((resolve) => {
    let stdout = '';
    let stderr = '';
    const child = spawn(binary, [work.name, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    child.stdout.on('data', (d) => { if (stdout.length < 1 << 20) stdout += d; });
    child.stderr.on('data', (d) => { if (stderr.length < 1 << 16) stderr += d; });
    const timer = setTimeout(() => { timedOut = true; child.kill('SIGKILL'); }, timeoutMs);
    const unlisten = onAbort(signal, () => child.kill('SIGKILL'));
    child.on('error', (e) => { clearTimeout(timer); unlisten(); resolve({ code: null, signal: null, stdout, stderr, error: e.message }); });
    child.on('close', (code, sig) => { clearTimeout(timer); unlisten(); resolve({ code, signal: sig, stdout, stderr }); });
  });
  const wallMs = performance.now() - t0;
  if (out.error) return { value: null, fields: {}, wallMs, error: `cannot run ${binary}: ${out.error} (${LINUX_HOST_BUILD_HINT})` };
  let result: AgentEvent | undefined;
  for (const line of out.stdout.split('\n')) {
    const e = parseAgentLine(line);
    if (typeof e === 'object' && e.event === work.event && !result) result = e;
  }
  if (!result || out.code !== 0) {
    const why = timedOut ? `stopped after ${(timeoutMs / 1000).toFixed(timeoutMs >= 10_000 ? 0 : 1)} s, its deadline`
      : out.stderr.trim().split('\n')[0] || (out.signal ? `killed by ${out.signal}` : `exit status ${out.code}`);
    return { value: null, fields: {}, wallMs, error: `bare ${work.name} failed: ${why}` };
  }
  return { value: work.value(result), fields: result.fields, wallMs };
}

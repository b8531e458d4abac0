// "Run X n times alternately with Y and give me the verdict": the call a search loop (a tuning
// advisor) makes, over runExperiment and the statistics. To stop early or go on, a loop can call
// it again and pool the runs: compareSamples(allX, allY, better) over result.rows[*].runs gives
// the verdict of everything measured so far.
import { runExperiment } from './runner.ts';
import type { Comparison, ExperimentProgress, ExperimentResult, ExperimentSpec } from './types.ts';

export interface PairSpec extends Omit<ExperimentSpec, 'configs' | 'vsQemu' | 'bare'> {
  baseline: { name: string; config: string };
  candidate: { name: string; config: string };
}

export interface PairResult {
  /** The candidate against the baseline under Unhalt; undefined when either gave no value. */
  verdict: Comparison | undefined;
  /** Each side's values, in run order (for pooling over calls). */
  baselineRuns: number[];
  candidateRuns: number[];
  result: ExperimentResult;
}

export async function compareConfigs(spec: PairSpec, onProgress?: (p: ExperimentProgress) => void, signal?: AbortSignal): Promise<PairResult> {
  const { baseline, candidate, ...rest } = spec;
  const result = await runExperiment({ ...rest, configs: [baseline, candidate] }, onProgress, signal);
  const runsOf = (name: string) => result.rows.find((r) => r.runner === 'unhalt' && r.config === name)?.runs ?? [];
  return {
    verdict: result.comparisons?.find((c) => c.runner === 'unhalt' && c.baseline === baseline.name && c.candidate === candidate.name),
    baselineRuns: runsOf(baseline.name),
    candidateRuns: runsOf(candidate.name),
    result,
  };
}

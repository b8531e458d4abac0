// Experiment types, shared with the service API (electron/service/api.ts re-exports them).
export interface ExperimentSpec {
  guest: 'probe' | 'linux';
  workload: string;
  workloadArgs?: string;
  configs: { name: string; config: string }[];
  runs: number;
  vsQemu?: boolean;
  bare?: boolean;
}

export interface ExperimentResultRow {
  config: string;
  runner: string;
  unit: string;
  median: number;
  min: number;
  max: number;
  ratioToFirst: number | null;
  ratioToReference: number | null;
  haltExitsPerS: number | null;
  pollHitRate: number | null;
  runs: number[];
  /** A second figure's median where the workload has one (pipe: µs/op beside total ms). */
  secondary?: { unit: string; median: number };
}

export interface RunRecord {
  config: string;
  runner: 'unhalt' | 'qemu' | 'bare';
  run: number;
  value: number | null;
  /** Everything the guest reported for the workload. */
  fields: Record<string, number>;
  haltExits?: number;
  haltExitsPerS?: number;
  pollHitRate?: number | null;
  hostCpuNs?: number;
  wallMs: number;
  error?: string;
}

export interface ExperimentProgress {
  done: number;
  total: number;
  current?: string;
}

export interface ExperimentResult {
  spec: ExperimentSpec;
  rows: ExperimentResultRow[];
  raw: RunRecord[];
  environment: Record<string, unknown>;
  notes: string[];
}

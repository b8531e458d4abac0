// Types of build-workloads.mjs (plain JavaScript: the build scripts run under plain Node).
export declare const WORKLOADS_DIR: string;
export declare const AGENT_SRC: string;
export declare const HOST_OUT_DIR: string;
export declare function workloadInputs(): string[];
export declare class BuildError extends Error {}
export declare function buildLinuxBinaries(options?: {
  outDir?: string; static?: boolean; force?: boolean; log?: (message: string) => void;
}): { workload: string; agent: string; built: boolean };

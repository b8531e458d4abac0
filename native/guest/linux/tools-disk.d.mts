// Types of tools-disk.mjs (plain JavaScript: the build scripts run under plain Node).
export declare const AGENT_UNIT_SRC: string;
export declare const START_AGENT_SRC: string;
export declare const TOOLS_MOUNT: string;
export declare function toolsDiskAgentFiles(agentBinary: string): { path: string; from: string; mode: number }[];
export declare function toolsDiskInputs(): string[];

// Types of scripts/build-node.mjs (a plain script, run before anything is built).
export declare const ROOT: string;
export declare const OUT: string;
export declare function buildNodeBundle(opts?: { outDir?: string }): Promise<{ outDir: string; files: number; chunks: number }>;

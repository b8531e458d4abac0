// Types of bin/node-check.mjs (plain JavaScript: bin/unhalt.mjs loads it before anything else).
export declare const MIN_NODE: string;
export declare function nodeTooOld(version?: string): boolean;
export declare function fetchedNode(root: string): { bin: string; dir: string; version: string } | null;
export declare function tooOldAdvice(root: string, args?: string[], version?: string, execPath?: string): string;

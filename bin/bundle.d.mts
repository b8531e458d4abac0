// Types of bin/bundle.mjs (plain JavaScript: bin/unhalt.mjs loads it before anything else).
export declare const BUNDLE_DIR: string;
export declare const INPUTS_FILE: string;
export declare const BUNDLE_FORMAT: number;
export declare function stampOf(path: string | URL): [mtimeMs: number, size: number];
export declare function currentBundle(root: URL, dir?: URL): URL | null;

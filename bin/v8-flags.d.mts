// Types of bin/v8-flags.mjs (plain JavaScript: bin/unhalt.mjs loads it before anything else).
export declare const LONG_LIVED_V8_FLAGS: readonly string[];

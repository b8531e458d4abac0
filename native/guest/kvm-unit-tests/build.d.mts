// Types of build.mjs (a plain script, also run on its own).
export declare const KVM_UNIT_TESTS_DIR: string;
export declare function findTarball(): string;
export declare function buildKvmUnitTests(opts?: { force?: boolean; log?: (message: string) => void }): string;

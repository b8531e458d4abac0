// The limits of an experiment spec, as plain data: spec.ts enforces them; the renderer shows them
// (through electron/service/api.ts) without importing anything with code.

/** Runs per configuration and VMM. Each run boots a VM: 100 x 8 configs x 2 VMMs is already hours. */
export const MAX_RUNS = 100;
/** Below this many runs a rank test cannot reach p < 0.05 for most pairs; the UI and the CLI warn. */
export const FEW_RUNS = 5;
export const MAX_CONFIGS = 8;
/** The longest deadline per phase: a day. */
export const MAX_DEADLINE_S = 86_400;
export const MAX_WORKLOAD_ARGS = 512;
/** A configuration's name: it is a table cell and a CSV field. */
export const CONFIG_NAME = /^[A-Za-z0-9][A-Za-z0-9 ._+-]{0,39}$/;
/** Host contention: at most this many CPU-bound processes beside an experiment's runs. */
export const MAX_CONTENTION = 64;

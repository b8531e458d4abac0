// The error of a spec or an experiment that cannot be run as given, in a module of its own so
// the checks spec.ts calls (user-bench.ts, argv-split.ts) can throw it without an import cycle.

/** A spec or an experiment that cannot be run as given; the message is one line for a user. */
export class ExperimentError extends Error {
  override name = 'ExperimentError';
}

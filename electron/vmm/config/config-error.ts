// The error every configuration rule throws, in a module of its own so the rule modules
// (vm-config.ts, net-config.ts, ...) can share it without importing one another.

/** A user-caused configuration error: one line, names the field and what would work. */
export class ConfigError extends Error {
  override name = 'ConfigError';
}
